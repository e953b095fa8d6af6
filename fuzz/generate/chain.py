"""Chains: verify, then commit, then decode, on one pool (`Chain`, its coordinate), drawn under the engine's index rules
(fuzz.run.chain runs and judges them).

The first verify is a case as fuzz.generate.strategies.cases draws it for the target (its engine's live slots,
tail padding, SGLang's scratch of spec_size + 1 rows, vLLM's per-token slots and accepted counts, now and then a
contract edge), with the serving budget (no warm-up call, no large pool). The later rounds are the same requests on
the same slots with new values (a new seed): an engine's speculative steps keep their batch, T (the draft length)
and scratch. Each round draws an accepted count 1..T per live request; the decode reads the same slots. The number
of rounds is drawn first and shrinks toward one, the accepted counts toward one token: Hypothesis shrinks a failing
chain to its fewest rounds and smallest cases.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from fuzz.generate.profiles import Budget
from fuzz.generate.serving import serving_budget
from fuzz.generate.strategies import cases
from fuzz.model.case import SEEDS, Case
from fuzz.model.engines import EDGES
from fuzz.model.support import TargetView

MAX_ROUNDS = 3  # verify-commit rounds per chain: a bug that needs a state committed twice shows within three
OPS = ("decode", "verify")  # what a chain calls
SEPARATOR = " | "


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


def live_rows(case: Case) -> list[int]:
    """The batch rows of live requests (CUDA-graph padding sits at the tail)."""
    return [n for n, padded in enumerate(case.padded) if not padded]


def chain_target(target: TargetView) -> bool:
    """Whether `target` runs chains: an engine's target (Support.engine) that verifies and decodes."""
    return target.support.engine is not None and set(OPS) <= target.support.ops


@st.composite
def chains(draw, target: TargetView, budget: Budget, bugs: tuple = ()) -> Chain:
    """A chain on `target` inside its declared support narrowed by `bugs` (module doc)."""
    first = draw(cases(target, "verify", serving_budget(budget), bugs))
    rounds = []
    for i in range(draw(st.integers(1, MAX_ROUNDS))):
        case = first if i == 0 else first.replace(seed=draw(st.integers(0, SEEDS - 1)))
        accepted = draw(st.lists(st.integers(1, case.T), min_size=len(live_rows(case)), max_size=len(live_rows(case))))
        rounds.append((case, tuple(accepted)))
    return Chain(tuple(rounds), decode_of(first, draw(st.integers(0, SEEDS - 1))))


def decode_of(verify: Case, seed: int) -> Case:
    """The decode after a verify on the same slots: one token a request, no scratch, the state updated; the verify's
    contract edge where it applies to a decode too."""
    edge = verify.edge if verify.edge and "decode" in EDGES[verify.edge].ops else None
    return verify.replace(
        op="decode", T=1, inter_rows=0, inter_steps=0, inter_spare_steps=0, inter_index=None, update=True, edge=edge,
        seed=seed,
    )  # fmt: skip


__all__ = ["MAX_ROUNDS", "OPS", "Chain", "chain_target", "chains", "decode_of", "live_rows"]
