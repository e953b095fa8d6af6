"""The per-target semantics table: padding and index contracts, gate inputs and the precision model.

Kernels legitimately disagree on these; a disagreement is a row here, never tolerance slack.
Rows are keyed by target path and the library versions they hold for, so the suite can run
against other releases (the installed version picks the row; the first matching row wins, newest first).
Confirmed bugs are not contracts: they live in fuzz.model.known_bugs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

import torch
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from fuzz.model.case import TORCH_DTYPES
from reference.contracts import PadContract, Precision


@dataclass(frozen=True)
class Semantics:
    """How one kernel path behaves, as data.

    pad:             what a padded read/write slot does (reference.contracts.PadContract).
    gates:           "raw" -> the kernel takes A_log, a, dt_bias, b; "log" -> precomputed g and beta.
    inputs_as:       dtype the kernel converts q, k, v, a, b to before use (None: as given).
    beta_as_input:   beta rounded to b's dtype after the sigmoid.
    state_each_step: running state rounded to the pool dtype after every token.
    output:          output dtype: "q" / "v" (that input's dtype) or a fixed dtype name.
    norm_as_input:   l2-normalized q, k rounded to the input dtype before the kernel.
    products_as_input: the state products run on tensor cores in the input dtype (Precision.products).
    scratch_slots:   pool slots whose content is undefined after a call (SGLang's reserved slot 0, the dummy write
                     target of padded rows): the untouched-slot check skips them, and a request reading one starts
                     from undefined content, so its row is not judged either.
    epilogue:        a fused output epilogue the oracle does not model, named as the pair compares it (vLLM's MTP
                     port: its gated RMSNorm): the verdict leaves the output to the pair (fuzz.judge.pair).
    """

    pad: PadContract = PadContract()
    gates: Literal["raw", "log"] = "raw"
    inputs_as: str | None = None
    beta_as_input: bool = False
    state_each_step: bool = False
    output: str = "q"
    norm_as_input: bool = False
    products_as_input: bool = False
    bf16_truncates: bool = False  # set for Triton kernels run by the CPU interpreter (see Precision)
    scratch_slots: tuple[int, ...] = ()
    epilogue: str = ""
    prefill: Semantics | None = None  # a prefill's row where the path's prefill runs another kernel (SGLang's glue)
    why: str = ""

    def for_op(self, op: str) -> Semantics:
        """The row a case of `op` runs under: this one, or for a prefill the `prefill` row where one is set (under
        this row's interpreter flag)."""
        if op != "prefill" or self.prefill is None:
            return self
        return dataclasses.replace(self.prefill, bf16_truncates=self.bf16_truncates)

    def output_dtype(self, case) -> torch.dtype:
        return TORCH_DTYPES[case.input_dtype if self.output in ("q", "v") else self.output]

    def precision(self, case) -> Precision:
        """The kernel's own precision model: fp32 arithmetic, rounding where this row says."""
        inputs = TORCH_DTYPES[self.inputs_as] if self.inputs_as else None
        return Precision(
            compute=torch.float32,
            inputs=inputs,
            beta=(inputs or TORCH_DTYPES[case.input_dtype]) if self.beta_as_input else None,
            state_each_step=self.state_each_step,
            output=self.output_dtype(case),
            bf16_truncates=self.bf16_truncates,
            normalized=TORCH_DTYPES[case.input_dtype] if self.norm_as_input else None,
            products=TORCH_DTYPES[case.input_dtype] if self.products_as_input else None,
        )


@dataclass(frozen=True)
class Row:
    path: str
    versions: str  # a PEP 440 specifier; "" matches every version
    semantics: Semantics = field(default_factory=Semantics)


SKIP_ZERO = PadContract("negative", "skip_zero", "skip")
ZERO_STATE = PadContract("negative", "zero_state", "skip")

TABLE: tuple[Row, ...] = (
    # fla-core has no pools or padding: the adapter passes identity slots; in-kernel gating or precomputed.
    Row("fla.fused_recurrent", "", Semantics(output="v", why="o = empty_like(v); fp32 registers")),
    Row("fla.fused_recurrent.loggates", "", Semantics(gates="log", output="v")),
    # SGLang (triton_gdn.md §2.2, §2.4, checked under the interpreter).
    Row(
        "sglang.packed_decode",
        ">=0.5.12",
        Semantics(pad=SKIP_ZERO, beta_as_input=True, why="beta = sigmoid(b).to(b.dtype); idx < 0 stores 0 and returns"),
    ),
    Row(
        "sglang.sigmoid_gating",
        ">=0.5.12",
        Semantics(pad=ZERO_STATE, why="idx < 0: zero state, output still computed, scratch row still written"),
    ),
    Row("sglang.recurrent_update", ">=0.5.12", Semantics(pad=ZERO_STATE, gates="log")),
    # FlashInfer decode, 0.6.5 .. 0.7.4 (flashinfer_gdn.md §4; docs/research/flashinfer-releases.md §3-§5). The
    # intended contract of each path is one across the range; what a release lacks (a pool before 0.6.6 / 0.6.7,
    # split write slots before 0.6.9 / 0.6.14, verify flags on the pretranspose before 0.7.0) narrows its Support
    # (fuzz.targets.flashinfer.Plan), not its row. Every kernel consumes q, k, v as bf16 and writes a
    # bf16 output; fp16 inputs are converted by value from 0.7.2 (fp32 pretranspose), 0.6.18 (fp32 MTP, bf16 state;
    # 0.6.5 .. 0.6.7 bf16-state kernels read them by value into fp32, which the bf16 model bounds), while the releases
    # between reinterpret fp16 bits as bf16: a bug the fuzzer finds, so never a row. Likewise bugs, not rows: the bf16
    # pool's unguarded -1 (0.6.6), use_qk_l2norm=False ignored on bf16 (0.6.5 .. 0.6.7), lost writes to strided
    # buffers, intermediate rows at stride T, unchecked HV % H.
    Row(
        "flashinfer.pretranspose.fp32",
        ">=0.6.5",
        Semantics(
            pad=PadContract("negative", "skip_zero", "slot0"),
            inputs_as="bf16",
            output="bf16",
            why="pool_idx < 0: output row zeroed, no state I/O (pool from 0.6.7); out_pool_idx < 0 -> 0 (0.6.9+, the "
            "null slot); 0.6.5, 0.6.6: no fp32 pool, the batch's states are passed as `state`",
        ),
    ),
    Row(
        "flashinfer.decode.kmajor",
        ">=0.6.5",
        Semantics(inputs_as="bf16", output="bf16", why="no pool: the state tensor is the batch"),
    ),
    Row(
        "flashinfer.bf16",
        ">=0.6.5",
        Semantics(
            pad=PadContract("negative", "slot0", "slot0"),
            inputs_as="bf16",
            output="bf16",
            why="cache_idx < 0 -> 0 for read and write (0.6.7+: the fix of 0.6.6's unguarded read); padded output "
            "undefined; 0.6.5: no pool; T <= 4 before 0.6.8",
        ),
    ),
    Row(
        "flashinfer.mtp.fp32",
        ">=0.6.5",
        Semantics(
            pad=PadContract("negative", "skip_untouched", "skip"),
            inputs_as="bf16",
            output="bf16",
            why="cache_idx < 0: row skipped, caller's output untouched; write idx < 0: write-back skipped "
            "(output_state_indices, 0.6.14+)",
        ),
    ),
    # FlashInfer varlen prefill (gdn_prefill.py, research §8). g is linear alpha (the adapter passes exp(g)) and beta
    # fp32 on every release; q/k/v/output share q's dtype; the chunk kernels' MMAs take the fp32 state, S k and the new
    # values u in q's dtype (delta_rule_sm90.py: make_acc_into_op(..., self.dtype)); q, k reach them l2-normalized and
    # rounded to q's dtype: by the library on the host from 0.7.1 (normalize_qk), by the adapter before (those releases
    # ignore use_qk_l2norm_in_kernel: the adapter normalizes and passes False, FlashInferPrefill).
    Row(
        "flashinfer.prefill.chunk",
        ">=0.7.4",
        Semantics(
            pad=ZERO_STATE,
            gates="log",
            output="q",
            norm_as_input=True,
            products_as_input=True,
            why="with output_state_indices: read id -1 starts from the zero state, write id -1 skips the store, an "
            "empty sequence stores nothing; normalize_qk on the host",
        ),
    ),
    Row(
        "flashinfer.prefill.chunk",
        ">=0.7.1,<0.7.4",
        Semantics(
            gates="log",
            output="q",
            norm_as_input=True,
            products_as_input=True,
            why="state_indices name pool rows (0.7.0+ on SM90) but -1 is no id (no output_state_indices): identity "
            "slots, no padding; normalize_qk on the host",
        ),
    ),
    Row(
        "flashinfer.prefill.chunk",
        ">=0.6.5,<0.7.1",
        Semantics(
            gates="log",
            output="q",
            norm_as_input=True,
            products_as_input=True,
            why="use_qk_l2norm_in_kernel is ignored: the adapter l2-normalizes q, k in fp32, rounds them to q's dtype "
            "and passes False; sequence-ordered states before 0.7.0 (SM90), identity slots, no padding; 0.6.5 .. "
            "0.6.13 SM90 is CUDA C++ built by nvcc from flashinfer/data at the first call",
        ),
    ),
)

# FlashInfer's SM100-only paths (fuzz/targets/flashinfer_sm100.py), as read in the 0.7.4 wheel. Cake kernels test each
# slot as 0 <= slot < pool in-kernel, whatever FLASHINFER_CAKE_GDN_VALIDATE_SLOTS says (=1 only adds a device assert
# for slots other than -1 outside the pool; the adapters leave it unset: drawn slots are -1 or in the pool).
TABLE += (
    Row(
        "flashinfer.cake.bf16",
        ">=0.7.4",
        Semantics(
            pad=PadContract("negative", "skip_untouched", "skip"),
            inputs_as="bf16",
            output="bf16",
            why="Cake bf16-state T=1 (vec8 / vec8occ / wide128 bodies): read slot -1 (or >= pool): the row is skipped, "
            "no state I/O, its output row untouched; write slot -1: the store is skipped, the output still written; "
            "state held in fp32 registers, rounded to bf16 on store",
        ),
    ),
    Row(
        "flashinfer.cake.fp32",
        ">=0.7.4",
        Semantics(
            pad=PadContract("negative", "skip_zero", "skip"),
            inputs_as="bf16",
            output="bf16",
            why="Cake fp32-state T=1 (splitv8): read slot -1 (or >= pool): no state I/O, output row written as 0; "
            "write slot -1: the store is skipped",
        ),
    ),
    Row(
        "flashinfer.cake.kmajor",
        ">=0.7.4",
        Semantics(inputs_as="bf16", output="bf16", why="Cake K-major fp32 T=1: no pool, the state tensor is the batch"),
    ),
    Row(
        "flashinfer.replayssm",
        ">=0.7.4",
        Semantics(
            pad=PadContract("negative", "skip_untouched", "skip"),
            inputs_as="bf16",
            output="bf16",
            why="verify(cache_replayssm=True) keeps the checkpoint frozen; read slot -1 leaves output and window rows "
            "untouched; commit replays accept_lens tokens in fp32 into checkpoint[slot], slots <= null_block_id (-1) "
            "and accept 0 are no-ops; the adapter commits T (update) or 0 (noupdate) at the read slot",
        ),
    ),
)

# SGLang's GDN kernel glue (fuzz/targets/sglang_glue.py), as read in the sglang 0.5.23 wheel (paths from sglang/;
# shared/research/serving-glue.md §1.3-1.4). A padded row (cache index -1, PAD_SLOT_ID) is discarded by the engine:
# no state read or write of a live slot, its output and scratch rows undefined ("discard"); slot 0, never allocated
# (srt/mem_cache/allocator/mamba.py:85-88, "a dummy write target for padded tokens"), may change. Each path's
# precision is its kernel's (the flashinfer.* and sglang.* rows above); decode and verify take the raw gates, extend
# (each row's `prefill` row) g and beta from fused_gdn_gating (gdn_backend.py:944-946).
GLUE_PAD = PadContract("negative", "discard", "skip")
GLUE_FI_EXTEND = Semantics(  # FlashInfer's chunked prefill under the glue, as the flashinfer.prefill.chunk row
    pad=GLUE_PAD, gates="log", output="q", norm_as_input=True, products_as_input=True, scratch_slots=(0,)
)
GLUE_FI = Semantics(pad=GLUE_PAD, inputs_as="bf16", output="bf16", scratch_slots=(0,))  # both archs' decode, verify
TABLE += (
    Row(
        "sglang.glue.flashinfer.sm90",
        ">=0.5.23",
        dataclasses.replace(
            GLUE_FI,
            prefill=dataclasses.replace(
                GLUE_FI_EXTEND,
                why="extend: gdn_prefill_qkv_prepare_fwd l2-normalizes q, k into q's dtype, alpha = exp(g), beta "
                "fp32, the fp32 gathered states (-1 -> the last slot, l.546-555) through FlashInfer's chunked prefill, "
                "every row written back with index_copy_ (l.585)",
            ),
            why="srt/layers/attention/linear/kernels/gdn_flashinfer.py: decode gathers ssm_states[cache_indices] and "
            "scatters the fp32 pretranspose's new state back (l.461-475); target_verify hands the whole pool-scoped "
            "scratch to the fp32 gated_delta_rule_mtp (l.701-716), rows positional",
        ),
    ),
    Row(
        "sglang.glue.flashinfer.sm100",
        ">=0.5.23",
        dataclasses.replace(
            GLUE_FI,
            prefill=dataclasses.replace(
                GLUE_FI_EXTEND,
                why="extend, state pool: -1 clamped to slot 0 (l.539), the bf16 states gathered as they are "
                "(l.540-544), the final states stored in the pool dtype with index_copy_ (l.585)",
            ),
            why="gdn_flashinfer.py: decode passes the bf16 pool and cache_indices to "
            "gated_delta_rule_decode_pretranspose (A_log as fp32, l.433-457; FlashInfer reads -1 as slot 0); "
            "target_verify calls the internal bf16 gated_delta_rule_mtp through its adapter (l.231-263) with "
            "scratch[:B] or an exact-B copy (l.353-384)",
        ),
    ),
    Row(
        "sglang.glue.triton",
        ">=0.5.23",
        Semantics(
            pad=GLUE_PAD,
            scratch_slots=(0,),
            prefill=Semantics(
                pad=GLUE_PAD,
                gates="log",
                norm_as_input=True,
                products_as_input=True,
                scratch_slots=(0,),
                why="gdn_triton.py extend (l.169-215): SGLang's chunk_gated_delta_rule, in-kernel l2norm, the pool "
                "updated in place at cache_indices (inplace_update); GPU only",
            ),
            why="srt/layers/attention/linear/kernels/gdn_triton.py decode / target_verify (l.138-167, 217-257): "
            "fused_sigmoid_gating_delta_rule_update, fp32 registers; idx < 0 skips the state I/O, an empty "
            "query_start_loc row runs nothing",
        ),
    ),
    Row(
        "sglang.glue.triton.packed",
        ">=0.5.23",
        Semantics(
            pad=GLUE_PAD,
            beta_as_input=True,
            scratch_slots=(0,),
            why="gdn_triton.py packed_decode (l.46-136): fused_recurrent_gated_delta_rule_packed_decode, beta = "
            "sigmoid(b).to(b.dtype); idx < 0 stores a zero output and returns",
        ),
    ),
)


# vLLM 0.34.0's spec-decode GDN Triton kernels (fuzz/targets/vllm.py), as read in the wheel (vllm/; ops =
# third_party/flash_linear_attention/ops). Padding: NULL_BLOCK_ID = 0 (v1/attention/backends/utils.py:55) in every
# column of a CUDA-graph padded row, its query_start_loc row zero-length (v1/attention/backends/gdn_attn.py:639,
# 660-665, 680-687): the kernels return before any output store on a zero-length row (ops/fused_recurrent.py:77-79,
# fused_sigmoid_gating.py:76-78) and on a read slot <= 0 (fused_recurrent.py:114-116, fused_sigmoid_gating.py:113-115),
# into an output from q.new_empty (fused_recurrent.py:202, fused_sigmoid_gating.py:225): undefined, "discard". Slot 0
# is never written (each store tests `> 0`: fused_recurrent.py:159, fused_sigmoid_gating.py:163,
# fused_gdn_decode_post_conv_mtp.py:97): no scratch slots. Each token's state goes to its own slot
# ssm_state_indices[n, t] (fused_recurrent.py:153-162, fused_sigmoid_gating.py:157-166, the MTP port :96-99), the
# oracle's token_slots; the accepted count selects the read slot, column accepted - 1 (fused_recurrent.py:105-113,
# fused_sigmoid_gating.py:104-112; the MTP port bounds it to 1..columns, :61-64). Precision: q/k/v/a/b/g/beta loaded
# into fp32 registers, the state kept there across the tokens and rounded to the pool dtype at each store, the output
# rounded to q's dtype; l2norm x / sqrt(sum x^2 + 1e-6) (fused_recurrent.py:128-130) or x * rsqrt(sum x^2 + 1e-6)
# (fused_sigmoid_gating.py:138-140, MTP :85-86); g = -exp(A_log) * softplus(a + dt_bias), softplus x past 20
# (fused_sigmoid_gating.py:129-133 with beta = 1, threshold = 20; MTP :81-82); beta = sigmoid(b) in fp32, not rounded
# (:136; MTP :83).
VLLM_PAD = PadContract("zero", "discard", "skip")
TABLE += (
    Row(
        "vllm.fused_recurrent",
        "==0.34.0",
        Semantics(
            pad=VLLM_PAD,
            gates="log",
            why="g and beta precomputed by the caller (OLMo hybrid: fused_olmo_hybrid_gdn_gating), loaded as fp32; "
            "o = q.new_empty(...): q's dtype",
        ),
    ),
    Row(
        "vllm.sigmoid_gating",
        "==0.34.0",
        Semantics(pad=VLLM_PAD, why="gates in fp32 in-kernel (softplus threshold 20), beta = sigmoid(b) unrounded"),
    ),
    Row(
        "vllm.mtp",
        "==0.34.0",
        Semantics(
            pad=VLLM_PAD,
            epilogue="gated output, MTP port vs sigmoid gating + RMSNorm",
            why="the port's states are the sigmoid kernel's (judged by the oracle); its output is RMSNorm-gated "
            "(core rounded to out's dtype first, :91), so the port's output is held to its partner's, sigmoid "
            "gating then rmsnorm_fn, by the pair (fuzz.judge.pair); a null or out-of-range read writes a "
            "zero output row (:63-69), a zero-length row nothing",
        ),
    ),
)


def semantics_for(path: str, version: str | None) -> Semantics:
    """The row for `path` whose version range holds `version` (None: an override module without a release, which
    gets the path's newest row)."""
    held = lambda spec: not spec or (version is not None and Version(version) in SpecifierSet(spec))
    for row in TABLE:
        if row.path == path and (version is None or held(row.versions)):
            return row.semantics
    modelled = [row.versions for row in TABLE if row.path == path]
    raise LookupError(
        f"its contract is modelled for releases {' | '.join(modelled) or '(none)'} only, not for "
        f"{version} (no semantics row for {path}; research the release and add one to "
        "fuzz/targets/semantics.py)"
    )
