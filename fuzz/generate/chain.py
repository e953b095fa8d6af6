"""Chains: verify, then commit, then decode, on one pool (`Chain`, its coordinate), drawn under the engine's index rules
(fuzz.run.chain runs and judges them).

The first verify is a case as fuzz.generate.strategies.cases draws it for the target (its engine's live slots,
tail padding, SGLang's scratch of spec_size + 1 rows, vLLM's per-token slots and accepted counts, now and then a
contract edge), with the serving budget (no warm-up call, no large pool). Each round draws an accepted count 1..T per
live request; the call after it (`after`) is the same requests with new values (a new seed), as an engine's
speculative steps keep their batch, T (the draft length) and scratch: the next verify (vLLM: with those counts as
its num_accepted_tokens, which select the slots it reads), or the decode on the committed slots. The number of rounds
is drawn first and shrinks toward one, the accepted counts toward one token: Hypothesis shrinks a failing chain to its
fewest rounds and smallest cases.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from fuzz.generate.profiles import Budget
from fuzz.generate.serving import serving_budget
from fuzz.generate.strategies import cases, live_rows
from fuzz.model.case import SEEDS, Case
from fuzz.model.support import TargetView

MAX_ROUNDS = 3  # verify-commit rounds per chain: a bug that needs a state committed twice shows within three
OPS = ("decode", "verify")  # what a chain calls
SEPARATOR = " | "
SLOT_ZERO = "slot-zero"  # the edge of a request named on the reserved slot (fuzz.model.engines.EDGES)


@dataclass(frozen=True)
class Chain:
    """Rounds of (verify Case, accepted counts of its live requests), then a decode Case on the same slots."""

    rounds: tuple[tuple[Case, tuple[int, ...]], ...]
    decode: Case

    def __repr__(self) -> str:
        parts = [p for case, accepted in self.rounds for p in (repr(case), _acc(accepted))]
        return SEPARATOR.join((*parts, repr(self.decode)))

    def _repr_pretty_(self, printer, cycle) -> None:  # Hypothesis prints a drawn chain as its coordinate
        printer.text(repr(self))

    @classmethod
    def parse(cls, coordinate: str) -> Chain:
        *parts, decode = (p.strip() for p in coordinate.split(SEPARATOR.strip()))
        if not parts or len(parts) % 2:
            raise ValueError(f"Chain coordinate: expected 'verify | acc[...]' rounds, then a decode: {coordinate!r}")
        rounds = []
        for case, accepted in zip(parts[::2], parts[1::2]):
            if not (accepted.startswith("acc[") and accepted.endswith("]")):
                raise ValueError(f"Chain coordinate: {accepted!r} is no accepted-count token acc[...]")
            rounds.append((Case.parse(case), tuple(int(a) for a in accepted[4:-1].split(",") if a)))
        return cls(tuple(rounds), Case.parse(decode))

    @property
    def calls(self) -> tuple[Case, ...]:
        return (*(case for case, _ in self.rounds), self.decode)


def _acc(accepted: tuple[int, ...]) -> str:
    return f"acc[{','.join(map(str, accepted))}]"


def committed_slot(case: Case, n: int, accepted: int) -> int:
    """Request n's slot once `accepted` of its tokens are committed: its own slot (SGLang: the commit copies the
    accepted step's state there) or the slot its accepted-th token wrote (vLLM: the next call reads it)."""
    return case.token_slots[n][accepted - 1] if case.token_slots is not None else case.read_slots[n]


def chain_target(target: TargetView) -> bool:
    """Whether `target` runs chains: an engine's target (Support.engine) that verifies and decodes."""
    return target.support.engine is not None and set(OPS) <= target.support.ops


@st.composite
def chains(draw, target: TargetView, budget: Budget, bugs: tuple = ()) -> Chain:
    """A chain on `target` inside its declared support narrowed by `bugs` (module doc)."""
    case = draw(cases(target, "verify", serving_budget(budget), bugs))
    rounds = []
    for i in range(n := draw(st.integers(1, MAX_ROUNDS))):
        live = len(live_rows(case))
        accepted = tuple(draw(st.lists(st.integers(1, case.T), min_size=live, max_size=live)))
        rounds.append((case, accepted))
        if i < n - 1:
            case = after(case, accepted, "verify", draw(st.integers(0, SEEDS - 1)))
    return Chain(tuple(rounds), after(case, accepted, "decode", draw(st.integers(0, SEEDS - 1))))


def after(case: Case, accepted: tuple[int, ...], op: str, seed: int) -> Case:
    """The call on `case`'s requests once `accepted` of their tokens are committed, with new values (`seed`): the
    next verify (the same slots, T and scratch; vLLM: `accepted` as its num_accepted_tokens) or the decode, one token
    a request read from the committed slots (vLLM: block_table[:, 0] pointing at them), no scratch. A verify without
    accepted counts keeps its contract edge (its maps stay); otherwise only a request on the reserved slot outlives
    the counts the chain draws (vLLM's accepted-count edges end there, and a decode has no scratch to pad past)."""
    rows, null = live_rows(case), case.null
    read = tuple(committed_slot(case, n, a) for n, a in zip(rows, accepted)) + (null,) * (case.B - len(rows))
    if op == "verify" and case.accepted is None:
        return case.replace(seed=seed)
    slot_zero = SLOT_ZERO if case.edge == SLOT_ZERO else None  # the edge that outlives the counts: in the maps
    if op == "verify":
        pads = case.B - len(rows)
        return case.replace(seed=seed, accepted=(*accepted, *[1] * pads), read_slots=read, edge=slot_zero)
    slot_zero = slot_zero if 0 in read else None  # the decode's maps are its read slots
    return case.replace(
        op=op, T=1, read_slots=read, token_slots=None, accepted=None, inter_rows=0, inter_steps=0,
        inter_spare_steps=0, inter_index=None, update=True, edge=slot_zero, seed=seed,
    )  # fmt: skip


__all__ = ["MAX_ROUNDS", "OPS", "Chain", "after", "chain_target", "chains", "committed_slot", "live_rows"]
