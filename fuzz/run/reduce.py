"""A case-level reducer: shrink a failing Case outside Hypothesis, from its coordinate alone.

Hypothesis shrinks the choices it drew; a run whose time box cut that shrink off leaves only the coordinates of its
live log (--gdn-live-log). `reduce` takes one of them on in a later run (--gdn-resume, fuzz.suite.session).

Invariants, first:
- The result is `case` itself or a candidate `fails_the_same` accepted: whatever failure `case` has, so does the result
  (the caller's predicate says what "the same" is; the session's: the same failure key, kind x bucket x cause).
- Every candidate is a Case (one that would not be, CaseError, is skipped unchecked) and differs from the case it
  came from, which it never exceeds in any field: each is smaller in B, tokens, slot numbers, pool or buffer rows, or
  has one more field at its plain value. So the reduction ends.
- Deterministic: the candidates come in a fixed order, so the same predicate answers give the same checks.
- Greedy: the first candidate accepted becomes the case, and the candidates start over from the first; it ends when
  a full pass accepts nothing (the result is then minimal for these candidates), or when `go_on()`, asked before each
  check, says stop (then it is the smallest case found so far).

Candidates, simplest win first: drop one request; fewer tokens; smaller slot numbers; a smaller pool and intermediate
buffer; the plain value of each optional feature; fewer heads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from fuzz.model.case import Case, CaseError
from fuzz.model.tensors import named_slots


def reduce(case: Case, fails_the_same: Callable[[Case], bool], go_on: Callable[[], bool]) -> tuple[Case, int]:
    """The smallest case found that fails like `case`, and the number of checks (`fails_the_same` calls) made."""
    checks = 0
    while True:
        for candidate in candidates(case):
            if not go_on():
                return case, checks
            checks += 1
            if fails_the_same(candidate):
                case = candidate
                break
        else:
            return case, checks


def candidates(case: Case) -> Iterator[Case]:
    """The valid cases one step smaller than `case`, in the order they are tried."""
    for family in (_fewer_requests, _fewer_tokens, _smaller_slots, _smaller_buffers, _plain_features, _fewer_heads):
        for changes in family(case):
            try:
                candidate = case.replace(**changes)
            except CaseError:
                continue
            if candidate != case:
                yield candidate


def _smaller(n: int, least: int) -> list[int]:
    """Values below n down to least, smallest first: the least, half, one less (a bisection's few steps)."""
    return sorted({m for m in (least, n // 2, n - 1) if least <= m < n})


def _fewer_requests(case: Case) -> Iterator[dict]:
    """Each request dropped in turn, every per-request field with it; an intermediate buffer one row smaller, or as
    it was (a bug may need rows past the batch)."""
    if case.B < 2:
        return
    for i in range(case.B):
        seqlens = _without(case.seqlens, i)
        changes = {
            "read_slots": _without(case.read_slots, i),
            "write_slots": _without(case.write_slots, i),
            "token_slots": _without(case.token_slots, i),
            "inter_index": _without(case.inter_index, i),
            "seqlens": seqlens,
            "T": max(seqlens) if case.op == "prefill" else case.T,
        }
        for rows in (case.inter_rows - 1, case.inter_rows) if case.inter_rows else (0,):
            yield {**changes, "inter_rows": rows}


def _without(xs: tuple | None, i: int) -> tuple | None:
    return None if xs is None else xs[:i] + xs[i + 1 :]


def _fewer_tokens(case: Case) -> Iterator[dict]:
    """A verify with fewer tokens per request (each token-slot row cut to match); a prefill with one sequence
    shorter. The buffer's steps stay, still >= T (`inter_steps = T` is a plain feature)."""
    if case.op == "verify":
        for t in _smaller(case.T, 1):
            yield {"T": t, "token_slots": None if case.token_slots is None else tuple(r[:t] for r in case.token_slots)}
    elif case.op == "prefill":
        for i, n in enumerate(case.seqlens):
            for m in _smaller(n, 1):
                seqlens = case.seqlens[:i] + (m,) + case.seqlens[i + 1 :]
                yield {"seqlens": seqlens, "T": max(seqlens)}


def _smaller_slots(case: Case) -> Iterator[dict]:
    """Every slot a request names mapped, in order, onto the smallest ones; then one slot at a time lowered to a
    value no request names. Read, write and token slots share the map, so which requests share a slot is kept, and
    padding stays. Slot 0 stays out of the map when no request named it: the pool keeps it (named_slots), and a
    contract may redirect padding there, a sacrificial slot."""
    used = sorted({s for s in _slots(case) if s >= 0})
    start = 0 if 0 in used else 1
    yield _renumbered(case, {s: start + i for i, s in enumerate(used)})
    for s in used:
        for lower in _smaller(s, start):
            if lower not in used:
                yield _renumbered(case, {s: lower})


def _slots(case: Case) -> list[int]:
    return [*case.read_slots, *(case.write_slots or ()), *(s for row in case.token_slots or () for s in row)]


def _renumbered(case: Case, new: dict[int, int]) -> dict:
    renumber = lambda xs: None if xs is None else tuple(new.get(s, s) for s in xs)
    return {
        "read_slots": renumber(case.read_slots),
        "write_slots": renumber(case.write_slots),
        "token_slots": None if case.token_slots is None else tuple(map(renumber, case.token_slots)),
    }


def _smaller_buffers(case: Case) -> Iterator[dict]:
    """A pool down to the slots it keeps (named_slots), then an intermediate buffer with fewer rows."""
    for pool in _smaller(case.pool, max(named_slots(case)) + 1):
        yield {"pool": pool}
    if case.inter_rows:
        for rows in _smaller(case.inter_rows, 1):
            yield {"inter_rows": rows}


def _plain_features(case: Case) -> Iterator[dict]:
    """One optional feature at a time at its plain value (a candidate equal to the case is dropped by `candidates`)."""
    yield {"pool_gap": 0}
    yield {"inter_spare_steps": 0}
    if case.inter_rows:
        yield {"inter_steps": case.T}
    yield {"warm_pool": 0}
    yield {"scale": None}
    yield {"l2norm": True}
    yield {"output_given": True}
    yield {"decay": "mild"}
    yield {"input_dtype": "bf16"}
    yield {"index_dtype": "i32"}
    yield {"seed": 0}


def _fewer_heads(case: Case) -> Iterator[dict]:
    """One query head with the same number of value heads per query head, then one value head per query head fewer
    (HV - H keeps HV mod H: an invalid case, HV not a multiple of H, stays one)."""
    yield {"H": 1, "HV": max(1, case.HV // case.H)}
    if case.HV > case.H:
        yield {"HV": case.HV - case.H}
