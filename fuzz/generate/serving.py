"""Serving sequences: a Hypothesis state machine that drives ONE target the way a serving engine drives it.

An engine calls a kernel library over and over on one state pool: decode steps, MTP verify passes and prefills whose
B, T, slot maps and padding change every call, input and index dtypes and the output buffer (given, or output=None)
that differ between call sites, and a pool that is a view of one allocation or a reallocation with the state copied
over. The bugs that need two calls live here: a compile cache keyed without a dtype, a shape or the pool's capacity
(StaleCompile), an output buffer the library hands out twice (OutputAliased), a call that changes other requests'
state or carries state wrongly from an earlier call (StateLeak).

Invariants of one example, which is one pool's life:
  * The pool's geometry (H, HV, K, V, state dtype, layout: what a model layer fixes) is drawn once (`Geometry`);
    every call is drawn by fuzz.generate.strategies.cases inside the target's declared support, narrowed by its
    known-bug masks and pinned to that geometry (`Pinned`), so calls stay inside what the target declares.
  * A call is a `Step`: its Case plus whether the pool is reallocated first. The Case is the unit: its coordinate
    reproduces the call alone (the first call of a sequence runs exactly as fuzz.run.harness.check runs the
    coordinate), and a failing sequence prints as the list of its steps' coordinates.
  * Capacity and strides come from the Case (`pool`, `pool_gap`): a call on fewer slots than the allocation sees the
    view pool[:capacity]; more slots, another gap or a drawn `realloc` reallocate. A call on capacity N+k followed by
    one on capacity N is what Case.warm_pool does in one case.
This module only draws: fuzz.run.serving runs and judges each step on the persistent pool, fuzz.run.serving_rounds runs
the machine as a test.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from fuzz.case import Case
from fuzz.generate.profiles import Budget
from fuzz.generate.strategies import bucket_plan, cases, draw_bucket
from fuzz.targets.base import Target
from fuzz.targets.known_bugs import masked_reason

STEPS = 8  # calls per example: enough for a warm-up, a stale call and the calls that shrink away


@dataclass(frozen=True)
class Step:
    """One call of a sequence. repr: the case's coordinate, then ' realloc' when the pool is reallocated to the case's
    capacity and gap (state copied over) before the call; without it the call sees a view of the current allocation,
    which is reallocated only when the case needs more slots or another gap."""

    case: Case
    realloc: bool = False

    def __repr__(self) -> str:
        return repr(self.case) + (" realloc" if self.realloc else "")

    def _repr_pretty_(self, printer, cycle) -> None:  # Hypothesis prints drawn steps as their coordinates
        printer.text(repr(self))

    @classmethod
    def parse(cls, coordinate: str) -> Step:
        case, _, flag = coordinate.strip().partition(" ")
        if flag not in ("", "realloc"):
            raise ValueError(f"Step coordinate: unknown flag {flag!r} after the case (expected 'realloc' or nothing)")
        return cls(Case.parse(case), flag == "realloc")


@dataclass(frozen=True)
class Geometry:
    """What one pool fixes for all its calls."""

    H: int
    HV: int
    K: int
    V: int
    state_dtype: str
    layout: str

    def __repr__(self) -> str:
        return f"H{self.H}-HV{self.HV}-K{self.K}-V{self.V}-{self.state_dtype}state-{self.layout}"

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(repr(self))

    def support(self) -> dict:
        """The Support fields that pin a call to this pool (a valid GVA ratio: the pool has HV heads)."""
        return dict(heads=((self.H, self.HV),), head_dims=((self.K, self.V),), state_dtypes=(self.state_dtype,),
                    layouts=(self.layout,), invalid_gva=False)


class Pinned:
    """A target as the strategies see it (name, declared support, semantics), its support replaced in some fields."""

    def __init__(self, target: Target, **fields):
        self.target, self.name, self.fields = target, target.name, fields

    def declared(self, bugs: tuple = ()):
        return dataclasses.replace(self.target.declared(bugs), **self.fields)

    def semantics(self):
        return self.target.semantics()


def serving_ops(target: Target, bugs: tuple = ()) -> tuple[str, ...]:
    """The operations a serving sequence calls on `target`: those it supports that no known bug masks."""
    return tuple(op for op in sorted(target.support.ops) if not masked_reason(bugs, op))


def serving_budget(budget: Budget) -> Budget:
    """The budget a step draws with: no warm-up calls (the sequence makes its own) and no 8 GiB pools."""
    return dataclasses.replace(budget, warm_calls=False, large_slots=False)


@st.composite
def geometries(draw, target: Target, op: str, budget: Budget, bugs: tuple = ()) -> Geometry:
    """A pool geometry inside the target's support: from the compile-bucket plan where the budget has one (GPU)."""
    sup = target.declared(bugs)
    pick = lambda options: draw(st.sampled_from(options))  # noqa: E731
    bucket = pick(bucket_plan(target.name, op, sup, budget)) if budget.plan_size else draw_bucket(pick, sup, op, budget)
    return Geometry(bucket.H, bucket.HV, bucket.K, bucket.V, bucket.state_dtype, bucket.layout)


@st.composite
def steps(draw, target: Target, geometry: Geometry, ops: tuple[str, ...], budget: Budget, bugs: tuple = ()) -> Step:
    """One call on a pool of this geometry: an operation, its case, and whether the pool is reallocated first."""
    op = draw(st.sampled_from(ops))
    case = draw(cases(Pinned(target, **geometry.support()), op, budget, bugs))
    return Step(case, realloc=draw(st.booleans()))


def serving_machine(target: Target, budget: Budget, bugs: tuple, new_run: Callable) -> type[RuleBasedStateMachine]:
    """The state machine for one target. `new_run()` gives each example its runner (fuzz.run.serving.ServingRun):
    `step(Step)` runs and judges a call on the example's pool, raising the typed failure; `close()` ends it."""
    budget = serving_budget(budget)
    ops = serving_ops(target, bugs)
    if not ops:
        raise ValueError(f"{target.name}: every operation is masked by a known bug; nothing to call")

    class ServingMachine(RuleBasedStateMachine):
        def __init__(self):
            super().__init__()
            self.run = new_run()
            self.geometry: Geometry | None = None

        @initialize(geometry=geometries(target, ops[0], budget, bugs))
        def pool(self, geometry: Geometry) -> None:
            self.geometry = geometry

        @rule(data=st.data())
        def call(self, data) -> None:
            self.run.step(data.draw(steps(target, self.geometry, ops, budget, bugs), label="step"))

        def teardown(self) -> None:
            self.run.close()

    return ServingMachine
