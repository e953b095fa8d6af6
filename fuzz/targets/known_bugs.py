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

KNOWN_BUGS: tuple[KnownBug, ...] = (
    KnownBug("fla-unchecked-gva", "HV not a multiple of H is accepted and computed with a wrong head map",
             FLA, "0.6.0", mask={"invalid_gva": False}, seen_on=("0.6.0",)),
    KnownBug("sglang-unchecked-gva", "HV not a multiple of H is accepted and computed with a wrong head map",
             ("sglang.sigmoid_gating", "sglang.recurrent_update"), "0.5.23", mask={"invalid_gva": False},
             seen_on=("0.5.23",)),
    KnownBug("sglang-strided-write-lost", "@input_guard .contiguous() copies the pool / intermediate buffer: writes "
             "to a strided view are lost", ("sglang.recurrent_update",), "0.5.23",
             mask={"strided_pool": False, "sliced_intermediate": False}, seen_on=("0.5.23",)),
    KnownBug("unchecked-gva", "HV not a multiple of H is accepted and computed with a wrong head map",
             (FI_PRETRANSPOSE, FI_BF16, FI_KMAJOR), "0.6.5", mask={"invalid_gva": False},
             seen_on=("0.7.2.post1", "0.7.4")),  # no decode path checks HV % H on any release (research §6)
    KnownBug("size1-layout", "CuTe DSL compile fails (\"Can't deduce the leading dimension\") at B = 1, H = HV = 1; "
             "masked by drawing HV >= 2", (FI_PRETRANSPOSE, FI_BF16, FI_KMAJOR, FI_MTP), "0.7.4",
             mask={"gva_ratios": (2, 4)}, seen_on=("0.7.4",)),
    KnownBug("mtp-t1-layout", "gated_delta_rule_mtp at T = 1 fails to compile (\"Can't deduce the leading dimension\") "
             "for every B, H, HV tried; T = 2 runs: its T = 1 (decode) is not fuzzed", (FI_MTP,), "0.7.4",
             mask={"verify_min_T": 2}, masked_ops=("decode",), seen_on=("0.7.4",)),
    KnownBug("bf16-i64-indices", "bf16-state kernels fail to compile with int64 initial_state_indices "
             "(TYPE_UNSTABLE_JOIN: the -1 -> 0 redirect assigns an Int32 to the Int64 cache_idx); masked by int32 "
             "indices", (FI_BF16,), "0.6.14", mask={"index_dtypes": ("i32",)}, seen_on=("0.7.4",)),
    # ^ 0.6.14 brought back the Int32(0) redirect on caller-dtype indices (_mark_index_dynamic, research §7.9)
    KnownBug("fp16-output-roundtrip", "gated_delta_rule_mtp with an fp16 output stages it as bf16 and copies every "
             "row back (run_mtp_decode: output.to(bfloat16) ... output_writeback.copy_), so padded requests' rows, left "
             "untouched by contract, are rounded to bf16; masked by bf16 inputs only", (FI_MTP,), "0.6.18",
             mask={"input_dtypes": ("bf16",)}, seen_on=("0.7.2.post1", "0.7.4")),  # staged since 0.6.18 (#4219)
    KnownBug("wide-vec-no-writeback", "bf16-state gated_delta_rule_mtp with an intermediate_states_buffer and state "
             "updates on does not write the final state to the pool when B*HV >= 128 (its wide_vec kernel: 'caller "
             "must read the final state from buffer[:, T-1]'); masked by drawing the buffer only with "
             "disable_state_update", (FI_BF16,), "0.6.11", mask={"buffer_with_update": False},
             seen_on=("0.7.2.post1", "0.7.4")),  # wide_vec since 0.6.11 (#3147); via the pretranspose from 0.7.0
    KnownBug("sliced-inter-rejected", "the intermediate buffer must be contiguous: a sliced [:, :T] view of a larger "
             "cache is rejected; masked by drawing whole buffers", (FI_MTP,), "0.6.14", fixed_in="0.7.4",
             mask={"sliced_intermediate": False}, seen_on=("0.7.2.post1",)),  # the assert came in 0.6.14
    KnownBug("inter-row-stride-T", "the intermediate buffer [B, cache_steps, HV, V, K] is indexed with row stride T "
             "instead of cache_steps (flat_idx = i_n * T * HV + i_t * HV + i_hv), so with more steps than T every row "
             "after the first lands in the wrong place; masked by buffers of exactly T steps", (FI_MTP,),
             "0.6.5", fixed_in="0.7.4", mask={"spare_steps": False}, seen_on=("0.7.2.post1",)),  # every release before
    KnownBug("strided-pool-capacity-key", "a strided (non-contiguous) pool is compiled with its whole static layout, "
             "capacity included, but the compile key holds only its strides (pool_strides_key), so a later call on a "
             "pool of another capacity is rejected ('Mismatched h0_source.shape[0]'), from the on-disk kernel cache "
             "too; masked by contiguous pools", (FI_MTP,), "0.6.14", fixed_in="0.7.4",
             mask={"strided_pool": False}, seen_on=("0.7.2.post1",)),  # native 4D pools (pool_strides_key) from 0.6.14
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
