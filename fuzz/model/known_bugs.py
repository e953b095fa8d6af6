"""Known bugs: every confirmed finding, in one place, as a record with the releases it holds for.

A bug holds from the first release it was seen on (`first_seen`) up to, not including, the release that fixed it
(`fixed_in`; None while it is open). A release after the last one it was confirmed on is assumed to still have it
until a corpus replay says otherwise: the corpus entries that replay it are strict xfails, so a fix turns them into
failures that ask for `fixed_in` to be set. While a bug holds for the installed release, its mask narrows what the
strategies draw (Support fields, see Support.narrowed), so a campaign spends its time on bugs nobody knows yet;
`--gdn-masks none` (alias `--gdn-unmask`) turns every mask off to hunt on a release, `--gdn-masks all` applies every
mask whatever the release (the upgrade gate: both sides then draw the same cases). The release is the one the loaded
API reports (Target.release): an override module that reports one (a CPU stand-in of a release) gets that release's
masks, as it gets its contract and semantics row; one that reports none gets no mask under the default policy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from packaging.version import Version

MASK_POLICIES = ("release", "all", "none")


@dataclass(frozen=True)
class KnownBug:
    id: str
    summary: str
    paths: tuple[str, ...]  # semantics paths (fuzz.targets.semantics) the bug is on
    first_seen: str  # the first release known to have it (older ones: not known to, so not masked)
    fixed_in: str | None = None  # the first release without it
    mask: dict = field(default_factory=dict)  # Support fields the strategies draw with while it holds
    masked_ops: tuple[str, ...] = ()  # operations it breaks entirely: their test is reported unavailable
    seen_on: tuple[str, ...] = ()  # releases a run confirmed it on
    shows: str = ""  # regex over "FailureKind: cause" its findings match (fuzz.targets.triage)
    # a compile key that leaves something out: the call that fails was served a kernel built for an earlier call,
    # which its mask keeps out and a single-case test does not name, so its pattern and releases explain it alone
    stale_key: bool = False

    def holds(self, path: str, version: str | None) -> bool:
        if path not in self.paths or version is None:
            return False
        v = Version(version)
        return Version(self.first_seen) <= v and (self.fixed_in is None or v < Version(self.fixed_in))

    @property
    def two_call(self) -> bool:
        """Shows only across calls (a compile key, a returned buffer, state between calls): what serving hunts."""
        return self.stale_key or self.shows.startswith(("^OutputAliased", "^StaleCompile", "^StateLeak"))

    @property
    def root_cause(self) -> str:
        """The summary as a library's maintainer reads it: without its closing clause on how gdn-fuzz masks the bug
        (most summaries end "; masked by ..."), as one sentence."""
        return self.summary.split("; masked by ")[0].rstrip(".") + "."

    @property
    def releases(self) -> str:
        return f">={self.first_seen}" + (f",<{self.fixed_in}" if self.fixed_in else "")


FI_PRETRANSPOSE, FI_BF16, FI_KMAJOR, FI_MTP = (
    "flashinfer.pretranspose.fp32",
    "flashinfer.bf16",
    "flashinfer.decode.kmajor",
    "flashinfer.mtp.fp32",
)
FLA = ("fla.fused_recurrent", "fla.fused_recurrent.loggates")
ALL_SEEN = ("0.6.10", "0.6.11", "0.6.16.post4", "0.7.2.post1", "0.7.4")  # the releases the H200 campaign ran
GVA = "^AcceptedInvalidInput"
# a kernel that ran and got values wrong, left them unwritten, or wrote where it must not
WRONG_VALUES = "^(OutputMismatch|StateMismatch|IntermediateMismatch|PoolCorruption|UnwrittenOutput|NonFinite)"
SANE_DECAYS = ("mild", "nodecay", "forget", "threshold", "negsat")  # the decay regimes but saturated and mixed
# a wrapped offset: named by the verdict (fuzz.judge.verdict), or an illegal address where the library wrote through
# a contiguous copy of a strided pool (0.6.10 / 0.6.11: reshape(pool_size * HV, V, K)), below which no guard of ours is
WRAPPED = r"wrapped int32 \w+ offset|an int32 offset there wraps|^KernelCrash"

KNOWN_BUGS: tuple[KnownBug, ...] = (
    KnownBug(
        "fla-unchecked-gva",
        "HV not a multiple of H is accepted and computed with a wrong head map",
        FLA,
        "0.6.0",
        mask={"invalid_gva": False},
        seen_on=("0.6.0",),
        shows=GVA,
    ),
    KnownBug(
        "sglang-unchecked-gva",
        "HV not a multiple of H is accepted and computed with a wrong head map",
        ("sglang.sigmoid_gating", "sglang.recurrent_update"),
        "0.5.23",
        mask={"invalid_gva": False},
        seen_on=("0.5.23",),
        shows=GVA,
    ),
    KnownBug(
        "vllm-unchecked-gva",
        "HV not a multiple of H is accepted and computed with a wrong head map (i_h = i_hv // (HV // H) reads q/k "
        "heads past H: fused_recurrent.py:65, fused_sigmoid_gating.py:64; the MTP port asserts HV % H == 0)",
        ("vllm.fused_recurrent", "vllm.sigmoid_gating"),
        "0.34.0",
        mask={"invalid_gva": False},
        seen_on=("0.34.0",),
        shows=GVA,
    ),
    KnownBug(
        "sglang-strided-write-lost",
        "@input_guard .contiguous() copies the pool / intermediate buffer: writes to a strided view are lost",
        ("sglang.recurrent_update",),
        "0.5.23",
        mask={"strided_pool": False, "sliced_intermediate": False},
        seen_on=("0.5.23",),
        shows=WRONG_VALUES,
    ),
    KnownBug(
        "unchecked-gva",
        "HV not a multiple of H is accepted and computed with a wrong head map",
        (FI_PRETRANSPOSE, FI_BF16, FI_KMAJOR, FI_MTP),
        "0.6.5",
        mask={"invalid_gva": False},
        seen_on=ALL_SEEN,
        shows=GVA,
    ),  # no decode path checks HV % H on any release (research §6)
    KnownBug(
        "size1-layout",
        'CuTe DSL compile fails ("Can\'t deduce the leading dimension") for B = 1 with H = 1: '
        "q and k [1, 1, 1, K] have several unit dimensions of stride 1, and from 0.6.14 the kernels mark every "
        "tensor layout-dynamic without a leading_dim (mark_layout_dynamic); masked by drawing B >= 2 when H = 1",
        (FI_PRETRANSPOSE, FI_BF16, FI_KMAJOR),
        "0.6.14",
        mask={"single_head_min_B": 2},
        seen_on=("0.6.16.post4", "0.7.2.post1", "0.7.4"),
        shows="leading dimension",
    ),  # 0.6.10 and 0.6.11 run these cases; MTP: mtp-one-token-dummy-indices
    KnownBug(
        "bf16-i64-indices",
        "bf16-state kernels fail to compile with int64 initial_state_indices "
        "(TYPE_UNSTABLE_JOIN: the -1 -> 0 redirect assigns an Int32 to the Int64 cache_idx); masked by int32 "
        "indices",
        (FI_BF16,),
        "0.6.10",
        mask={"index_dtypes": ("i32",)},
        seen_on=("0.6.10", "0.6.16.post4", "0.7.2.post1", "0.7.4"),
        shows="TYPE_UNSTABLE_JOIN",
    ),  # 0.6.11: a dtype compile key instead
    KnownBug(
        "fp16-output-roundtrip",
        "gated_delta_rule_mtp with an fp16 output stages it as bf16 and copies every "
        "row back (run_mtp_decode: output.to(bfloat16) ... output_writeback.copy_), so padded requests' rows, "
        "left untouched by contract, are rounded to bf16; masked by bf16 inputs only",
        (FI_MTP,),
        "0.6.18",
        mask={"input_dtypes": ("bf16",)},
        seen_on=("0.7.2.post1", "0.7.4"),
        shows="^PoolCorruption: padded request output changed",
    ),  # staged since 0.6.18 (#4219)
    KnownBug(
        "wide-vec-no-writeback",
        "bf16-state gated_delta_rule_mtp with an intermediate_states_buffer and state "
        "updates on does not write the final state to the pool when B*HV >= 128 (its wide_vec kernel: 'caller "
        "must read the final state from buffer[:, T-1]'); masked by drawing the buffer only with "
        "disable_state_update",
        (FI_BF16,),
        "0.7.0",
        mask={"buffer_with_update": False},
        seen_on=("0.7.2.post1", "0.7.4"),
        shows="^StateMismatch",
    ),  # kernel-level since 0.6.11 (#3147); reachable via the pretranspose from 0.7.0
    # (0.6.11 / 0.6.16.post4: gdn_decode.py:118-133 takes no buffer, bf16k:1693 / 3043 write back without one)
    KnownBug(
        "sliced-inter-rejected",
        "the intermediate buffer must be contiguous: a sliced [:, :T] view of a larger "
        "cache is rejected; masked by drawing whole buffers",
        (FI_MTP,),
        "0.6.14",
        fixed_in="0.7.4",
        mask={"sliced_intermediate": False},
        seen_on=("0.6.16.post4", "0.7.2.post1"),
        shows="intermediate_states_buffer must be contiguous",
    ),  # the assert: 0.6.14
    KnownBug(
        "inter-row-stride-T",
        "the intermediate buffer [B, cache_steps, HV, V, K] is indexed with row stride T "
        "instead of cache_steps (flat_idx = i_n * T * HV + i_t * HV + i_hv), so with more steps than T every row "
        "after the first lands in the wrong place; masked by buffers of exactly T steps",
        (FI_MTP,),
        "0.6.5",
        fixed_in="0.7.4",
        mask={"spare_steps": False},
        seen_on=("0.7.2.post1",),
        shows=WRONG_VALUES,
    ),  # every release before
    KnownBug(
        "strided-pool-capacity-key",
        "a strided (non-contiguous) pool is compiled with its whole static layout, "
        "capacity included, but the compile key holds only its strides (pool_strides_key), so a later call on a "
        "pool of another capacity is rejected ('Mismatched h0_source.shape[0]'), from the on-disk kernel cache "
        "too; masked by contiguous pools",
        (FI_MTP,),
        "0.6.14",
        fixed_in="0.7.4",
        mask={"strided_pool": False},
        seen_on=("0.6.16.post4", "0.7.2.post1"),
        shows=r"Mismatched h\w*_source\.shape",
        stale_key=True,
    ),  # native 4D pools from 0.6.14
    # Found by the H200 campaign of 2026-12-02 (masks off, five releases; docs/h200-results-2026-12-02.md), root
    # causes read in the wheels (docs/research/flashinfer-releases.md).
    KnownBug(
        "fp16-bitcast-pretranspose",
        "fp16 q/k/v/a/b are read as bf16 bits by the fp32 pretranspose decode "
        "(cute.autovec_copy into a BFloat16 fragment); values by conversion from 0.7.2 (as_bf16); masked by bf16 "
        "inputs",
        (FI_PRETRANSPOSE,),
        "0.6.5",
        fixed_in="0.7.2",
        mask={"input_dtypes": ("bf16",)},
        seen_on=("0.6.10", "0.6.11", "0.6.16.post4"),
        shows=WRONG_VALUES,
    ),
    KnownBug(
        "fp16-bitcast-mtp-bf16",
        "fp16 inputs are read as bf16 bits by gated_delta_rule_mtp (fp32 state) and by "
        "the bf16-state kernels, until as_bf16 (#4219, 0.6.18); masked by bf16 inputs",
        (FI_MTP, FI_BF16),
        "0.6.8",
        fixed_in="0.6.18",
        mask={"input_dtypes": ("bf16",)},
        seen_on=("0.6.10", "0.6.11", "0.6.16.post4"),
        shows=WRONG_VALUES,
    ),
    KnownBug(
        "saturated-softplus-nan",
        "softplus as a blend of x and log(1 + exp(x)) gives 0 * inf = NaN once a + "
        "dt_bias passes ~88.7 (exp overflows in fp32): NaN outputs for saturated gates; 0.7.4 branches instead; "
        "masked by not drawing the saturated decay regimes",
        (FI_MTP, FI_BF16),
        "0.6.5",
        fixed_in="0.7.4",
        mask={"decay_regimes": SANE_DECAYS},
        seen_on=("0.6.10", "0.6.11", "0.6.16.post4", "0.7.2.post1"),
        shows="^NonFinite",
    ),
    KnownBug(
        "bf16-strided-pool-copied",
        "the bf16-state kernels flatten the pool with reshape(pool_size * HV, V, "
        "K): a strided pool is copied and the kernel's writes to the copy are lost (the caller's pool keeps its "
        "old state), and where the reshape stays a view (HV = 1) its strides, absent from the compile key, "
        "meet a kernel built for a contiguous pool ('Mismatched hN_source.strides'); masked by contiguous "
        "pools",
        (FI_BF16,),
        "0.6.8",
        fixed_in="0.6.12",
        mask={"strided_pool": False},
        seen_on=("0.6.10", "0.6.11"),
        shows=WRONG_VALUES + r"|Mismatched h\w*_source\.strides",
    ),  # 4D strides in 0.6.12
    KnownBug(
        "bf16-sliced-inter-lost",
        "a sliced [:, :T] view of a longer bf16 intermediate cache is copied to a "
        "contiguous buffer and the kernel's writes to it are lost (steps left as the caller had them); masked by "
        "whole buffers",
        (FI_BF16,),
        "0.7.0",
        fixed_in="0.7.4",
        mask={"sliced_intermediate": False},
        seen_on=("0.7.2.post1",),
        shows=WRONG_VALUES,
    ),
    KnownBug(
        "bf16-inter-row-stride-T",
        "the bf16 intermediate buffer is indexed with row stride T instead of its step "
        "capacity, so a buffer with more steps than T has its later rows written over the first row's spare "
        "steps; masked by buffers of exactly T steps",
        (FI_BF16,),
        "0.7.0",
        fixed_in="0.7.4",
        mask={"spare_steps": False},
        seen_on=("0.7.2.post1",),
        shows=WRONG_VALUES,
    ),
    KnownBug(
        "dtype-compile-keys",
        "compiled kernels are cached without the index dtype (and q's dtype on MTP and "
        "bf16 state): an int64 call after an int32 one of the same shapes gets the int32 kernel ('Mismatched "
        "Tensor on argument #N'), in-process and from the on-disk cache; fixed by the dtype keys of #4219; "
        "masked by int32 indices and bf16 inputs",
        (FI_PRETRANSPOSE, FI_BF16, FI_KMAJOR, FI_MTP),
        "0.6.5",
        fixed_in="0.6.18",
        mask={"index_dtypes": ("i32",), "input_dtypes": ("bf16",)},
        seen_on=("0.6.10", "0.6.11", "0.6.16.post4"),
        shows="Mismatched Tensor on argument",
        stale_key=True,
    ),
    KnownBug(
        "bf16-one-slot-strided-pool",
        "a one-slot strided bf16-state pool is rejected ('The stride_order is not "
        "consistent with the layout'): torch reports the view contiguous in its leading dimension, the DSL "
        "does not; no Support field narrows it (pool size), so it stays unmasked",
        (FI_BF16,),
        "0.6.12",
        seen_on=("0.6.16.post4", "0.7.4"),
        shows="stride_order is not consistent",
    ),
    # Read in the wheels and measured on the H200 with direct calls (docs/research/dispatch-and-bug-classes.md, Q2-Q7),
    # then found by the campaigns of docs/h200-results-2026-12-02-reach.md.
    KnownBug(
        "mtp-strided-token-slots",
        "gated_delta_rule_mtp with ssm_state_indices on a strided (non-contiguous) "
        "pool fails to compile (MLIRError: 'failed to construct a valid coordinate ... incorrect profile'): the "
        "per-token scatter addresses the 4-D pool with a flat 3-coordinate local_tile (mtpk:1436 in 0.6.16.post4, "
        "mtpk:1664 in 0.7.2.post1, in every kernel variant); 0.7.4 addresses it through _slot_view_i64 "
        "(mtpk:960-976); masked by contiguous pools",
        (FI_MTP,),
        "0.6.14",
        fixed_in="0.7.4",
        mask={"strided_pool": False},
        seen_on=("0.6.16.post4", "0.7.2.post1"),
        shows="failed to construct a valid coordinate|^RejectedValidInput: MLIRError: Operation creation failed",
    ),
    # (a failure key keeps the first line of the error: "MLIRError: Operation creation failed:")
    KnownBug(
        "pretranspose-pool-offset-wrap",
        "the fp32 pretranspose decode computes pool offsets in unsigned 32 bits "
        "(h0_source[(pool_idx, i_hv, ...)] with int32 indices, ptk:137-153 in 0.6.10 / 0.6.11): a slot whose "
        "element offset passes 2^32 reads and writes the slot 2^32 elements lower, in the same pool; Int64 from "
        "0.6.12 (#3230); masked by no large-pool test",
        (FI_PRETRANSPOSE,),
        "0.6.7",
        fixed_in="0.6.12",
        mask={"wide_offsets": False},
        seen_on=("0.6.11",),
        shows=WRAPPED,
    ),
    KnownBug(
        "bf16-pool-offset-wrap",
        "the bf16-state kernels compute pool offsets in Int32 (flat_state_idx = "
        "cache_idx * HV + i_hv: bf16k:1323 in 0.6.10, bf16k:314 and 843 in 0.6.11): a slot whose element offset "
        "passes 2^31 reads and writes 2^32 elements below its place (a GuardBreach below the pool; on a strided "
        "pool, copied contiguous first, an illegal address below the copy: KernelCrash); Int64 from 0.6.12 "
        "(#3230); masked by no large-pool test",
        (FI_BF16,),
        "0.6.6",
        fixed_in="0.6.12",
        mask={"wide_offsets": False},
        seen_on=("0.6.10", "0.6.11"),
        shows=WRAPPED,
    ),
    KnownBug(
        "mtp-pool-offset-wrap",
        "gated_delta_rule_mtp computes pool offsets in Int32 when the indices are int32 "
        "(flat_state_idx = cache_idx * HV + i_hv: mtpk:322 in 0.6.10, mtpk:472 in 0.7.2.post1; a strided pool: "
        "cache_idx times its static stride0): a slot whose element offset passes 2^31 reads and writes 2^32 "
        "elements below its place (a GuardBreach; through the contiguous copy 0.6.10 / 0.6.11 make of a "
        "strided pool, an illegal address: KernelCrash); int64 indices avoid it; 0.7.4 addresses slots "
        "through _slot_view_i64 (mtpk:215-245); masked by no large-pool test",
        (FI_MTP,),
        "0.6.5",
        fixed_in="0.7.4",
        mask={"wide_offsets": False},
        seen_on=("0.6.10", "0.6.11", "0.6.16.post4", "0.7.2.post1"),
        shows=WRAPPED,
    ),
    KnownBug(
        "bf16-cached-output",
        "with output=None the bf16-state kernels return a tensor kept with the compiled "
        "kernel (0.6.11: one per compile key, bf16k:1726-1800; 0.6.16.post4: per compile key and B, "
        "bf16k:3254-3270), so a later call of the same shapes overwrites an output its caller still holds; "
        "a fresh allocation from 0.6.18 (#4219); masked by always passing output",
        (FI_BF16,),
        "0.6.11",
        fixed_in="0.6.18",
        mask={"output_optional": False},
        seen_on=("0.6.11", "0.6.16.post4"),
        shows="^OutputAliased",
    ),
    # Found by the H200 reach campaign of 2026-12-03 (docs/h200-results-2026-12-02-reach.md), read in the wheels.
    KnownBug(
        "mtp-inter-rows-key",
        "gated_delta_rule_mtp compiles the intermediate buffer with its whole static "
        "shape (from_dlpack without a dynamic mode, mtpk:2366 in 0.6.11) but keys the kernel on cache_steps "
        "only, not the buffer's rows (inline_cache_key, mtpk:2316-2334 in 0.6.10 and 0.6.11), so a call whose "
        "buffer has other rows than an earlier call of the same key is rejected ('Mismatched "
        "intermediate_states.shape[0]'); mode 0 is dynamic in 0.6.16.post4 (mtpk:2723); masked by buffers of "
        "exactly B rows",
        (FI_MTP,),
        "0.6.10",
        fixed_in="0.6.14",
        mask={"spare_rows": False},
        seen_on=("0.6.10", "0.6.11"),
        shows=r"Mismatched intermediate_states\.shape",
        stale_key=True,
    ),
    KnownBug(
        "mtp-one-token-dummy-indices",
        "gated_delta_rule_mtp without ssm_state_indices builds a dummy "
        "torch.zeros(B, T) (mtpk:2680-2688 in 0.6.16.post4, mtpk:3120-3128 in 0.7.2.post1, mtpk:3293-3301 in "
        "0.7.4) and marks it mark_layout_dynamic() (mtpk:2746, 3198, 3370): at B = T = 1 its strides (1, 1) "
        "leave no leading dimension ('Can't deduce the leading dimension'); the dummy is cached before the "
        "compile, so after one such call every call of that compile key (B is not in it) fails in the process; "
        "masked by drawing B >= 2 when T = 1",
        (FI_MTP,),
        "0.6.14",
        mask={"one_token_min_B": 2},
        seen_on=("0.6.16.post4", "0.7.2.post1", "0.7.4"),
        shows="leading dimension",
    ),
    KnownBug(
        "mtp-sliced-inter-lost",
        "gated_delta_rule_mtp flattens the intermediate buffer with "
        ".to(float32).reshape(buffer_size * cache_steps * HV, V, K).contiguous() (gdn_decode.py:684-688 in "
        "0.6.10): a sliced [:, :T] view of a longer cache is copied, the kernel writes the copy, and the caller's "
        "buffer keeps its old steps; rejected by an assert from 0.6.14 (sliced-inter-rejected); masked by whole "
        "buffers",
        (FI_MTP,),
        "0.6.10",
        fixed_in="0.6.14",
        mask={"sliced_intermediate": False},
        seen_on=("0.6.10", "0.6.11"),
        shows=WRONG_VALUES,
    ),
    KnownBug(
        "mtp-pool-strides-key",
        "gated_delta_rule_mtp flattens the pool with reshape(pool_size * HV, V, K) "
        "(gdn_decode.py:671 in 0.6.10) and compiles it with static strides left out of the key: a strided "
        "pool of one head stays a view whose stride meets a kernel built for a contiguous one, or the reverse "
        "('Mismatched h0_source.strides[0]'); 4-D pools keyed by pool_strides_key from 0.6.14; masked by "
        "contiguous pools",
        (FI_MTP,),
        "0.6.10",
        fixed_in="0.6.14",
        mask={"strided_pool": False},
        seen_on=("0.6.10",),
        shows=r"Mismatched h\w*_source\.strides",
        stale_key=True,
    ),
    # SGLang's GDN kernel glue (fuzz/targets/sglang_glue.py), read in the sglang 0.5.23 wheel
    KnownBug(
        "sglang-sm90-pad-last-slot",
        "SGLang's FlashInfer GDN glue on SM90 sends a CUDA-graph padding row (cache index -1, PAD_SLOT_ID) onto the "
        "pool's last slot, a live one (the allocator hands out slots 1..size of size + 1, mem_cache/allocator/"
        "mamba.py:85-88): decode gathers ssm_states[cache_indices] and scatters the new states back with the same "
        "indices, so -1 reads and overwrites slot size by Python's negative indexing (srt/layers/attention/linear/"
        "kernels/gdn_flashinfer.py:461, 475); extend remaps -1 to ssm_states.shape[0] - 1 and index_copy_s every "
        "row's final state back, padded rows included (l.546-552, 585). The padded row's state replaces the last "
        "slot's, or races a live request on it (a duplicate index: on a GPU either write may land). SM100 sends -1 to "
        "the reserved slot 0 (decode through FlashInfer's pool API, extend by clamp(min=0), l.539), as the "
        "allocator's comment intends; masked by drawing no padded rows",
        ("sglang.glue.flashinfer.sm90",),
        "0.5.23",
        mask={"padding": False},
        seen_on=("0.5.23",),
        shows="^PoolCorruption: untouched pool slot changed$|^StateMismatch: state error above the bound",
    ),
)
BY_ID = {bug.id: bug for bug in KNOWN_BUGS}


def known_bugs(path: str, version: str | None, policy: str = "release") -> tuple[KnownBug, ...]:
    """The bugs whose masks apply to `path` at `version` under a mask policy (MASK_POLICIES)."""
    if policy not in MASK_POLICIES:
        raise ValueError(f"mask policy {policy!r}: expected one of {', '.join(MASK_POLICIES)}")
    if policy == "none":
        return ()
    return tuple(b for b in KNOWN_BUGS if (path in b.paths if policy == "all" else b.holds(path, version)))


def serving_bugs(path: str, version: str | None, policy: str = "release") -> tuple[KnownBug, ...]:
    """The bugs whose masks a serving sequence draws with: the policy's, and under every policy the single-call bugs
    that hold for the release. Each of those would end every sequence at its first call, so the sequences would
    replay it instead of reaching the bugs that need two calls; the single-case tests hunt them."""
    chosen = {b.id for b in known_bugs(path, version, policy)}
    chosen |= {b.id for b in known_bugs(path, version) if not b.two_call}
    return tuple(b for b in KNOWN_BUGS if b.id in chosen)


def masked_reason(bugs: tuple[KnownBug, ...], op: str) -> str | None:
    """Why `op` is not fuzzed (a known bug makes every case of it fail), or None."""
    return (
        "; ".join(
            f"known bug {b.id} ({b.releases}): {b.summary} (corpus/ replays it)" for b in bugs if op in b.masked_ops
        )
        or None
    )
