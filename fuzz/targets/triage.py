"""Which known bug explains a finding: a record explains it when it holds for the release, the finding shows as the
record says (`KnownBug.shows`, over "Kind: cause"), and the record's mask would have kept the case from being drawn
(a record that masks nothing, no field and no operation, explains by its pattern alone; so does a compile key left
short, KnownBug.stale_key: the call its mask keeps out compiled the kernel earlier, in this test or another).
A finding no record explains is new: it needs a root cause and a record (fuzz.model.known_bugs)."""

from __future__ import annotations

import re

from fuzz.model.case import Case
from fuzz.model.known_bugs import KNOWN_BUGS, KnownBug

# Support field (as a mask narrows it) -> whether the case uses a choice the narrowed value leaves out
_OUTSIDE = {
    "input_dtypes": lambda c, v: c.input_dtype not in v,
    "index_dtypes": lambda c, v: c.index_dtype not in v,
    "state_dtypes": lambda c, v: c.state_dtype not in v,
    "decay_regimes": lambda c, v: c.decay not in v,
    "gva_ratios": lambda c, v: c.valid and c.HV // c.H not in v,
    "invalid_gva": lambda c, v: not v and not c.valid,
    "single_head_min_B": lambda c, v: c.H == 1 and c.B < v,
    "one_token_min_B": lambda c, v: c.T == 1 and c.B < v,
    "verify_min_T": lambda c, v: c.op == "verify" and c.T < v,
    "buffer_with_update": lambda c, v: not v and bool(c.inter_rows) and c.update,
    "sliced_intermediate": lambda c, v: not v and c.inter_spare_steps > 0,
    "spare_steps": lambda c, v: not v and c.inter_steps > c.T,
    "strided_pool": lambda c, v: not v and c.pool_gap > 0,
    "output_optional": lambda c, v: not v and not c.output_given,
    "wide_offsets": lambda c, v: not v and _widest_offset(c) >= 2**31,
    "spare_rows": lambda c, v: not v and c.inter_rows > c.B,
    "padding": lambda c, v: not v and any(c.padded),
}


def _widest_offset(case: Case) -> int:
    """The largest element offset (slot x slot stride) of a slot the case names."""
    slots = [s for s in (*case.read_slots, *(case.write_slots or ()), *sum(case.token_slots or (), ())) if s >= 0]
    return max(slots, default=0) * (case.HV + case.pool_gap) * case.K * case.V


def masks(bug: KnownBug, case: Case) -> bool:
    """Whether the bug's mask keeps `case` from being drawn (a record without a mask masks nothing)."""
    return case.op in bug.masked_ops or any(_OUTSIDE[name](case, limit) for name, limit in bug.mask.items())


def explaining(kind: str, cause: str, calls: tuple[Case, ...], path: str, version: str | None) -> tuple[KnownBug, ...]:
    """The known bugs that explain a failure of `kind` with `cause` at semantics path and release. `calls`: the
    calls it needs (a serving failure's earlier calls, Failure.before, then the failing one): a record's mask
    explains it when it keeps any of them from being drawn (a kernel compiled for an int64 call and served to an
    int32 one is masked by drawing int32 only)."""
    shown = f"{kind}: {cause}"
    return tuple(
        b
        for b in KNOWN_BUGS
        if b.holds(path, version)
        and re.search(b.shows, shown)
        and (b.stale_key or any(masks(b, c) for c in calls) or not (b.mask or b.masked_ops))
    )


def verdict(bugs: tuple[KnownBug, ...]) -> str:
    """One line for a results table: the records that explain a finding (`explaining`), or NEW."""
    return ", ".join(f"known: {b.id}" for b in bugs) if bugs else "NEW (no known-bug record explains it)"
