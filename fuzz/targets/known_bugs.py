"""Known bugs: every confirmed finding, in one place, as a record with the releases it holds for.

A bug holds from the first release it was seen on (`first_seen`) up to, not including, the release that fixed it
(`fixed_in`; None while it is open). A release after the last one it was confirmed on is assumed to still have it
until a corpus replay says otherwise: the corpus entries that replay it are strict xfails, so a fix turns them into
failures that ask for `fixed_in` to be set. While a bug holds for the installed release, its mask narrows what the
strategies draw (Support fields, see Support.narrowed), so a campaign spends its time on bugs nobody knows yet;
`--gdn-masks none` (alias `--gdn-unmask`) turns every mask off to hunt on a release, `--gdn-masks all` applies every
mask whatever the release (the upgrade gate: both sides then draw the same cases). An override module has no release,
so no mask holds for it under the default policy.
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

    def holds(self, path: str, version: str | None) -> bool:
        if path not in self.paths or version is None:
            return False
        v = Version(version)
        return Version(self.first_seen) <= v and (self.fixed_in is None or v < Version(self.fixed_in))

    @property
    def releases(self) -> str:
        return f">={self.first_seen}" + (f",<{self.fixed_in}" if self.fixed_in else "")


FI_PRETRANSPOSE, FI_BF16, FI_KMAJOR, FI_MTP = ("flashinfer.pretranspose.fp32", "flashinfer.bf16",
                                               "flashinfer.decode.kmajor", "flashinfer.mtp.fp32")
FLA = ("fla.fused_recurrent", "fla.fused_recurrent.loggates")
ALL_SEEN = ("0.6.10", "0.6.11", "0.6.16.post4", "0.7.2.post1", "0.7.4")  # the releases the H200 campaign ran
GVA = "^AcceptedInvalidInput"
# a kernel that ran and got values wrong, left them unwritten, or wrote where it must not
WRONG_VALUES = "^(OutputMismatch|StateMismatch|IntermediateMismatch|PoolCorruption|UnwrittenOutput|NonFinite)"
SANE_GATES = ("mild", "nodecay", "forget", "threshold", "negsat")  # the gate regimes but saturated and mixed

KNOWN_BUGS: tuple[KnownBug, ...] = (
    KnownBug("fla-unchecked-gva", "HV not a multiple of H is accepted and computed with a wrong head map",
             FLA, "0.6.0", mask={"invalid_gva": False}, seen_on=("0.6.0",), shows=GVA),
    KnownBug("sglang-unchecked-gva", "HV not a multiple of H is accepted and computed with a wrong head map",
             ("sglang.sigmoid_gating", "sglang.recurrent_update"), "0.5.23", mask={"invalid_gva": False},
             seen_on=("0.5.23",), shows=GVA),
    KnownBug("sglang-strided-write-lost", "@input_guard .contiguous() copies the pool / intermediate buffer: writes "
             "to a strided view are lost", ("sglang.recurrent_update",), "0.5.23",
             mask={"strided_pool": False, "sliced_intermediate": False}, seen_on=("0.5.23",), shows=WRONG_VALUES),
    KnownBug("unchecked-gva", "HV not a multiple of H is accepted and computed with a wrong head map",
             (FI_PRETRANSPOSE, FI_BF16, FI_KMAJOR, FI_MTP), "0.6.5", mask={"invalid_gva": False},
             seen_on=ALL_SEEN, shows=GVA),  # no decode path checks HV % H on any release (research §6)
    KnownBug("size1-layout", "CuTe DSL compile fails (\"Can't deduce the leading dimension\") for B = 1 with H = 1: "
             "q and k [1, 1, 1, K] have several unit dimensions of stride 1, and from 0.6.14 the kernels mark every "
             "tensor layout-dynamic without a leading_dim (mark_layout_dynamic); masked by drawing B >= 2 when H = 1",
             (FI_PRETRANSPOSE, FI_BF16, FI_KMAJOR, FI_MTP), "0.6.14", mask={"single_head_min_B": 2},
             seen_on=("0.6.16.post4", "0.7.2.post1", "0.7.4"),
             shows="leading dimension"),  # 0.6.10 and 0.6.11 run these cases
    KnownBug("bf16-i64-indices", "bf16-state kernels fail to compile with int64 initial_state_indices "
             "(TYPE_UNSTABLE_JOIN: the -1 -> 0 redirect assigns an Int32 to the Int64 cache_idx); masked by int32 "
             "indices", (FI_BF16,), "0.6.10", mask={"index_dtypes": ("i32",)},
             seen_on=("0.6.10", "0.6.16.post4", "0.7.2.post1", "0.7.4"),
             shows="TYPE_UNSTABLE_JOIN"),  # 0.6.11: a dtype compile key instead
    KnownBug("fp16-output-roundtrip", "gated_delta_rule_mtp with an fp16 output stages it as bf16 and copies every "
             "row back (run_mtp_decode: output.to(bfloat16) ... output_writeback.copy_), so padded requests' rows, "
             "left untouched by contract, are rounded to bf16; masked by bf16 inputs only", (FI_MTP,), "0.6.18",
             mask={"input_dtypes": ("bf16",)}, seen_on=("0.7.2.post1", "0.7.4"),
             shows="^PoolCorruption: padded request output changed"),  # staged since 0.6.18 (#4219)
    KnownBug("wide-vec-no-writeback", "bf16-state gated_delta_rule_mtp with an intermediate_states_buffer and state "
             "updates on does not write the final state to the pool when B*HV >= 128 (its wide_vec kernel: 'caller "
             "must read the final state from buffer[:, T-1]'); masked by drawing the buffer only with "
             "disable_state_update", (FI_BF16,), "0.6.11", mask={"buffer_with_update": False},
             seen_on=("0.7.2.post1", "0.7.4"),
             shows="^StateMismatch"),  # wide_vec since 0.6.11 (#3147); via the pretranspose from 0.7.0
    KnownBug("sliced-inter-rejected", "the intermediate buffer must be contiguous: a sliced [:, :T] view of a larger "
             "cache is rejected; masked by drawing whole buffers", (FI_MTP,), "0.6.14", fixed_in="0.7.4",
             mask={"sliced_intermediate": False}, seen_on=("0.6.16.post4", "0.7.2.post1"),
             shows="intermediate_states_buffer must be contiguous"),  # the assert: 0.6.14
    KnownBug("inter-row-stride-T", "the intermediate buffer [B, cache_steps, HV, V, K] is indexed with row stride T "
             "instead of cache_steps (flat_idx = i_n * T * HV + i_t * HV + i_hv), so with more steps than T every row "
             "after the first lands in the wrong place; masked by buffers of exactly T steps", (FI_MTP,),
             "0.6.5", fixed_in="0.7.4", mask={"spare_steps": False}, seen_on=("0.7.2.post1",),
             shows=WRONG_VALUES),  # every release before
    KnownBug("strided-pool-capacity-key", "a strided (non-contiguous) pool is compiled with its whole static layout, "
             "capacity included, but the compile key holds only its strides (pool_strides_key), so a later call on a "
             "pool of another capacity is rejected ('Mismatched h0_source.shape[0]'), from the on-disk kernel cache "
             "too; masked by contiguous pools", (FI_MTP,), "0.6.14", fixed_in="0.7.4",
             mask={"strided_pool": False}, seen_on=("0.6.16.post4", "0.7.2.post1"),
             shows=r"Mismatched h\w*_source\.shape"),  # native 4D pools from 0.6.14
    # Found by the H200 campaign of 2026-12-02 (masks off, five releases; docs/h200-results-2026-12-02.md), root
    # causes read in the wheels (docs/research/flashinfer-releases.md).
    KnownBug("fp16-bitcast-pretranspose", "fp16 q/k/v/a/b are read as bf16 bits by the fp32 pretranspose decode "
             "(cute.autovec_copy into a BFloat16 fragment); values by conversion from 0.7.2 (as_bf16); masked by bf16 "
             "inputs", (FI_PRETRANSPOSE,), "0.6.5", fixed_in="0.7.2", mask={"input_dtypes": ("bf16",)},
             seen_on=("0.6.10", "0.6.11", "0.6.16.post4"), shows=WRONG_VALUES),
    KnownBug("fp16-bitcast-mtp-bf16", "fp16 inputs are read as bf16 bits by gated_delta_rule_mtp (fp32 state) and by "
             "the bf16-state kernels, until as_bf16 (#4219, 0.6.18); masked by bf16 inputs",
             (FI_MTP, FI_BF16), "0.6.8", fixed_in="0.6.18", mask={"input_dtypes": ("bf16",)},
             seen_on=("0.6.10", "0.6.11", "0.6.16.post4"), shows=WRONG_VALUES),
    KnownBug("saturated-softplus-nan", "softplus as a blend of x and log(1 + exp(x)) gives 0 * inf = NaN once a + "
             "dt_bias passes ~88.7 (exp overflows in fp32): NaN outputs for saturated gates; 0.7.4 branches instead; "
             "masked by not drawing the saturated gate regimes", (FI_MTP, FI_BF16), "0.6.5", fixed_in="0.7.4",
             mask={"gate_regimes": SANE_GATES}, seen_on=("0.6.10", "0.6.11", "0.6.16.post4", "0.7.2.post1"),
             shows="^NonFinite"),
    KnownBug("bf16-strided-pool-copied", "the bf16-state kernels flatten the pool with reshape(pool_size * HV, V, "
             "K): a strided pool is copied and the kernel's writes to the copy are lost (the caller's pool keeps its "
             "old state), and where the reshape stays a view (HV = 1) its strides, absent from the compile key, "
             "meet a kernel built for a contiguous pool ('Mismatched hN_source.strides'); masked by contiguous "
             "pools", (FI_BF16,), "0.6.8", fixed_in="0.6.12", mask={"strided_pool": False},
             seen_on=("0.6.10", "0.6.11"),
             shows=WRONG_VALUES + r"|Mismatched h\w*_source\.strides"),  # 4D strides in 0.6.12
    KnownBug("bf16-sliced-inter-lost", "a sliced [:, :T] view of a longer bf16 intermediate cache is copied to a "
             "contiguous buffer and the kernel's writes to it are lost (steps left as the caller had them); masked by "
             "whole buffers", (FI_BF16,), "0.7.0", fixed_in="0.7.4", mask={"sliced_intermediate": False},
             seen_on=("0.7.2.post1",), shows=WRONG_VALUES),
    KnownBug("bf16-inter-row-stride-T", "the bf16 intermediate buffer is indexed with row stride T instead of its step "
             "capacity, so a buffer with more steps than T has its later rows written over the first row's spare "
             "steps; masked by buffers of exactly T steps", (FI_BF16,), "0.7.0", fixed_in="0.7.4",
             mask={"spare_steps": False}, seen_on=("0.7.2.post1",), shows=WRONG_VALUES),
    KnownBug("dtype-compile-keys", "compiled kernels are cached without the index dtype (and q's dtype on MTP and "
             "bf16 state): an int64 call after an int32 one of the same shapes gets the int32 kernel ('Mismatched "
             "Tensor on argument #N'), in-process and from the on-disk cache; fixed by the dtype keys of #4219; "
             "masked by int32 indices and bf16 inputs", (FI_PRETRANSPOSE, FI_BF16, FI_KMAJOR, FI_MTP), "0.6.5",
             fixed_in="0.6.18", mask={"index_dtypes": ("i32",), "input_dtypes": ("bf16",)},
             seen_on=("0.6.10", "0.6.11", "0.6.16.post4"), shows="Mismatched Tensor on argument"),
    KnownBug("bf16-one-slot-strided-pool", "a one-slot strided bf16-state pool is rejected ('The stride_order is not "
             "consistent with the layout'): torch reports the view contiguous in its leading dimension, the DSL "
             "does not; no Support field narrows it (pool size), so it stays unmasked", (FI_BF16,), "0.6.12",
             seen_on=("0.6.16.post4", "0.7.4"), shows="stride_order is not consistent"),
)
BY_ID = {bug.id: bug for bug in KNOWN_BUGS}


def known_bugs(path: str, version: str | None, policy: str = "release") -> tuple[KnownBug, ...]:
    """The bugs whose masks apply to `path` at `version` under a mask policy (MASK_POLICIES)."""
    if policy not in MASK_POLICIES:
        raise ValueError(f"mask policy {policy!r}: expected one of {', '.join(MASK_POLICIES)}")
    if policy == "none":
        return ()
    return tuple(b for b in KNOWN_BUGS if (path in b.paths if policy == "all" else b.holds(path, version)))


def masked_reason(bugs: tuple[KnownBug, ...], op: str) -> str | None:
    """Why `op` is not fuzzed (a known bug makes every case of it fail), or None."""
    return "; ".join(f"known bug {b.id} ({b.releases}): {b.summary} (corpus/ replays it)"
                     for b in bugs if op in b.masked_ops) or None
