"""The per-target semantics table: padding and index contracts, gate inputs and the precision model.

Kernels legitimately disagree on these; a disagreement is a row here, never tolerance slack.
Rows are keyed by target path and the library versions they hold for, so the suite can run
against other releases (the installed version picks the row).
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Literal

import torch
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from reference.contracts import PadContract, Precision

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
DTYPE_NAMES = {v: k for k, v in TORCH_DTYPES.items()}


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
    known_bugs: frozenset = frozenset()  # KNOWN_BUGS keys for this release (filled from KNOWN)
    why: str = ""

    def masked_reason(self, op: str) -> str | None:
        """Why `op` is not fuzzed on this path at this release (a known bug makes every case of it fail)."""
        bugs = sorted(b for b in self.known_bugs if MASKED_OPS.get(b) == op)
        return "; ".join(f"known bug {b}: {KNOWN_BUGS[b]} (corpus/ replays it)" for b in bugs) or None

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


# Confirmed findings (each has a corpus/ entry that replays it). While KNOWN lists one for the installed
# release, the strategies stop drawing its trigger so a campaign keeps finding *new* bugs; the corpus replay
# turns the mask into a failure the day the library fixes it.
KNOWN_BUGS = {
    "unchecked-gva": "HV not a multiple of H is accepted and computed with a wrong head map",
    "strided-write-lost": "@input_guard .contiguous() copies the pool / intermediate buffer: writes to a strided "
                          "view are lost",
    "size1-layout": "CuTe DSL compile fails (\"Can't deduce the leading dimension\") at B = 1, H = HV = 1; "
                    "the exact trigger is not isolated yet; masked by drawing HV >= 2",
    "mtp-t1-layout": "gated_delta_rule_mtp at T = 1 fails to compile (\"Can't deduce the leading dimension\") "
                     "for every B, H, HV tried; T = 2 runs: masked by not fuzzing its T = 1 (decode) at all",
    "bf16-i64-indices": "bf16-state kernels fail to compile with int64 initial_state_indices (TYPE_UNSTABLE_JOIN: "
                        "the -1 -> 0 redirect assigns an Int32 to the Int64 cache_idx); masked by int32 indices",
    "fp16-output-roundtrip": "gated_delta_rule_mtp with an fp16 output stages it as bf16 and copies every row back "
                             "(run_mtp_decode: output.to(bfloat16) ... output_writeback.copy_), so padded requests' "
                             "rows, left untouched by contract, are rounded to bf16; masked by bf16 inputs only",
    "wide-vec-no-writeback": "bf16-state gated_delta_rule_mtp with an intermediate_states_buffer and state updates "
                             "on does not write the final state to the pool when B*HV >= 128 (its wide_vec kernel: "
                             "'caller must read the final state from buffer[:, T-1]'); below 128 the ILP4 kernel "
                             "writes it; masked by drawing the buffer only with disable_state_update",
    "sliced-inter-rejected": "the intermediate buffer must be contiguous: a sliced [:, :T] view of a larger cache is "
                             "rejected (accepted since 0.7.4); masked by drawing whole buffers",
    "inter-row-stride-T": "the intermediate buffer [B, cache_steps, HV, V, K] is indexed with row stride T instead "
                          "of cache_steps (flat_idx = i_n * T * HV + i_t * HV + i_hv), so with more steps than T "
                          "every row after the first lands in the wrong place (0.7.4: i_n * cache_steps + i_t); "
                          "masked by drawing buffers of exactly T steps",
    "strided-pool-capacity-key": "a strided (non-contiguous) pool is compiled with its whole static layout, capacity "
                                 "included, but the compile key holds only its strides (pool_strides_key), so a "
                                 "later call on a pool of another capacity is rejected ('Mismatched "
                                 "h0_source.shape[0]'), from the on-disk kernel cache too (0.7.4 keys the capacity); "
                                 "masked by contiguous pools",
}
# Each bug's mask: the Support fields the strategies draw with while it is known (Support.narrowed: choices are
# intersected, flags only turn off, minimums only rise).
MASKS = {
    "unchecked-gva": {"invalid_gva": False},
    "strided-write-lost": {"strided_pool": False, "sliced_intermediate": False},
    "size1-layout": {"gva_ratios": (2, 4)},
    "mtp-t1-layout": {"verify_min_T": 2},
    "bf16-i64-indices": {"index_dtypes": ("i32",)},
    "fp16-output-roundtrip": {"input_dtypes": ("bf16",)},
    "wide-vec-no-writeback": {"buffer_with_update": False},
    "sliced-inter-rejected": {"sliced_intermediate": False},
    "inter-row-stride-T": {"spare_steps": False},
    "strided-pool-capacity-key": {"strided_pool": False},
}
# Known bugs that make a whole operation unusable on a path: the test is skipped, with this as its reason.
MASKED_OPS = {"mtp-t1-layout": "decode"}
# (path, versions the bug was seen on, bugs): the masks hold for those releases only, and never for an override
# module (no version), whose bugs nobody knows yet.
KNOWN: tuple[tuple[str, str, frozenset], ...] = (
    ("fla.fused_recurrent", "==0.6.0", frozenset({"unchecked-gva"})),
    ("fla.fused_recurrent.loggates", "==0.6.0", frozenset({"unchecked-gva"})),
    ("sglang.sigmoid_gating", "==0.5.23", frozenset({"unchecked-gva"})),
    ("sglang.recurrent_update", "==0.5.23", frozenset({"unchecked-gva", "strided-write-lost"})),
    ("flashinfer.pretranspose.fp32", "==0.7.4", frozenset({"size1-layout", "unchecked-gva"})),
    ("flashinfer.pretranspose.fp32", "==0.7.2.post1", frozenset({"unchecked-gva"})),
    ("flashinfer.bf16", "==0.7.4", frozenset({"size1-layout", "bf16-i64-indices", "unchecked-gva",
                                              "wide-vec-no-writeback"})),
    ("flashinfer.bf16", "==0.7.2.post1", frozenset({"unchecked-gva", "wide-vec-no-writeback"})),
    ("flashinfer.decode.kmajor", "==0.7.4", frozenset({"size1-layout", "unchecked-gva"})),
    ("flashinfer.mtp.fp32", "==0.7.4", frozenset({"size1-layout", "mtp-t1-layout", "fp16-output-roundtrip"})),
    ("flashinfer.mtp.fp32", "==0.7.2.post1", frozenset({"fp16-output-roundtrip", "sliced-inter-rejected",
                                                        "inter-row-stride-T", "strided-pool-capacity-key"})),
)

SKIP_ZERO = PadContract("negative", "skip_zero", "skip")
ZERO_STATE = PadContract("negative", "zero_state", "skip")

TABLE: tuple[Row, ...] = (
    # fla-core has no pools or padding: the adapter passes identity slots; in-kernel gating or precomputed.
    Row("fla.fused_recurrent", "", Semantics(output="v", why="o = empty_like(v); fp32 registers")),
    Row("fla.fused_recurrent.loggates", "", Semantics(gates="log", output="v")),
    # SGLang (triton_gdn.md §2.2, §2.4, checked under the interpreter).
    Row("sglang.packed_decode", ">=0.5.12", Semantics(
        pad=SKIP_ZERO, beta_as_input=True,
        why="beta = sigmoid(b).to(b.dtype); idx < 0 stores 0 and returns")),
    Row("sglang.sigmoid_gating", ">=0.5.12", Semantics(
        pad=ZERO_STATE,
        why="idx < 0: zero state, output still computed, scratch row still written")),
    Row("sglang.recurrent_update", ">=0.5.12", Semantics(pad=ZERO_STATE, gates="log")),
    # FlashInfer 0.7.4 (flashinfer_gdn.md §4). Inputs are consumed as bf16 (as_bf16), output is bf16.
    Row("flashinfer.pretranspose.fp32", ">=0.6.5", Semantics(
        pad=PadContract("negative", "skip_zero", "slot0"), inputs_as="bf16", output="bf16",
        why="pool_idx < 0: output row zeroed, no state I/O; out_pool_idx < 0 -> 0")),
    Row("flashinfer.decode.kmajor", ">=0.6.5", Semantics(inputs_as="bf16", output="bf16",
                                                         why="no pool: the state tensor is the batch")),
    Row("flashinfer.bf16", ">=0.6.5", Semantics(
        pad=PadContract("negative", "slot0", "slot0"), inputs_as="bf16", output="bf16",
        why="cache_idx < 0 -> 0 for read and write; padded output undefined")),
    Row("flashinfer.mtp.fp32", ">=0.6.5", Semantics(
        pad=PadContract("negative", "skip_untouched", "skip"), inputs_as="bf16", output="bf16",
        why="cache_idx < 0: row skipped, caller's output untouched; write idx < 0: write-back skipped")),
    # FlashInfer 0.7.4 varlen prefill (gdn_prefill.py; 0.7.2.post1 has no output_state_indices, so no -1 padding).
    Row("flashinfer.prefill.chunk", ">=0.7.4", Semantics(
        pad=ZERO_STATE, gates="log", output="q", norm_as_input=True, products_as_input=True,
        why="with output_state_indices: read id -1 starts from the zero state, write id -1 skips the store, an empty "
            "sequence stores nothing; g is passed as linear alpha = exp(g); q/k/v/output share q's dtype; "
            "normalize_qk rounds the normalized q, k back to it; the SM90 chunk kernel's MMAs take the fp32 state, "
            "S k and the new values u in q's dtype (delta_rule_sm90.py: make_acc_into_op(..., self.dtype))")),
)

# FlashInfer's SM100-only paths (fuzz/targets/flashinfer_sm100.py), as read in the 0.7.4 wheel. Cake kernels test each
# slot as 0 <= slot < pool in-kernel, whatever FLASHINFER_CAKE_GDN_VALIDATE_SLOTS says (=1 only adds a device assert
# for slots other than -1 outside the pool; the adapters leave it unset: drawn slots are -1 or in the pool).
TABLE += (
    Row("flashinfer.cake.bf16", ">=0.7.4", Semantics(
        pad=PadContract("negative", "skip_untouched", "skip"), inputs_as="bf16", output="bf16",
        why="Cake bf16-state T=1 (vec8 / vec8occ / wide128 bodies): read slot -1 (or >= pool): the row is skipped, "
            "no state I/O, its output row untouched; write slot -1: the store is skipped, the output still written; "
            "state held in fp32 registers, rounded to bf16 on store")),
    Row("flashinfer.cake.fp32", ">=0.7.4", Semantics(
        pad=PadContract("negative", "skip_zero", "skip"), inputs_as="bf16", output="bf16",
        why="Cake fp32-state T=1 (splitv8): read slot -1 (or >= pool): no state I/O, output row written as 0; "
            "write slot -1: the store is skipped")),
    Row("flashinfer.cake.kmajor", ">=0.7.4", Semantics(
        inputs_as="bf16", output="bf16", why="Cake K-major fp32 T=1: no pool, the state tensor is the batch")),
    Row("flashinfer.replayssm", ">=0.7.4", Semantics(
        pad=PadContract("negative", "skip_untouched", "skip"), inputs_as="bf16", output="bf16",
        why="verify(cache_replayssm=True) keeps the checkpoint frozen; read slot -1 leaves output and window rows "
            "untouched; commit replays accept_lens tokens in fp32 into checkpoint[slot], slots <= null_block_id (-1) "
            "and accept 0 are no-ops; the adapter commits T (update) or 0 (noupdate) at the read slot")),
)


def semantics_for(path: str, version: str | None) -> Semantics:
    """The row for `path` whose version range holds `version` (None: the library has no version), with the
    bugs known for exactly that release."""
    held = lambda spec: not spec or (version is not None and Version(version) in SpecifierSet(spec))  # noqa: E731
    # The upgrade gate masks every release's known bugs on both sides, so that both draw the same cases.
    mask = (lambda spec: True) if os.environ.get("GDN_FUZZ_MASK_ALL") else held  # noqa: E731
    for row in TABLE:
        if row.path == path and (version is None or held(row.versions)):
            bugs = frozenset().union(*(b for p, spec, b in KNOWN if p == path and version is not None and mask(spec)))
            return dataclasses.replace(row.semantics, known_bugs=bugs)
    raise LookupError(f"no semantics row for {path} at version {version}: add one to fuzz/semantics.py")
