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
  * A call is a fresh case, or (about every other call) a *variation* of the call before it: the same case with one
    argument a compile cache could key on changed (COMPILE_ARGS, `alternatives`: inside that same support), with new
    values only (a new seed, its requests in another order: the same compile key), or with fewer of its requests.
    Fresh draws rarely repeat a shape; the bugs that need two calls of one shape (a stale kernel, an output buffer
    handed out twice) need it.
  * How output= is passed is drawn once per sequence (OUTPUTS): per call, or None on every call where the target
    allows None, so that two None calls of one shape are common.
  * A call is a `Step`: its Case plus whether the pool is reallocated first. The Case is the unit: its coordinate
    reproduces the call alone (the first call of a sequence runs exactly as fuzz.run.harness.check runs the
    coordinate), and a failing sequence prints as the list of its steps' coordinates.
  * Capacity and strides come from the Case (`pool`, `pool_gap`): a call on fewer slots than the allocation sees the
    view pool[:capacity]; more slots, another gap or a drawn `realloc` reallocate. A call on capacity N+k followed by
    one on capacity N is what Case.warm_pool does in one case.
This module only draws: fuzz.run.serving runs and judges each step on the persistent pool, fuzz.suite.serving runs
the machine as a test.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from fuzz.generate.profiles import Budget
from fuzz.generate.strategies import bucket_plan, cases, draw_bucket, live_rows
from fuzz.model.case import SEEDS, Case
from fuzz.model.engines import ENGINES, empty_extend
from fuzz.model.known_bugs import masked_reason
from fuzz.model.support import Support, TargetView

STEPS = 8  # calls per example: enough for a warm-up, a stale call and the calls that shrink away
OUTPUTS = ("per call", "none")  # output= per call as a fresh case draws it (one call in four None), or None always
# What a kernel's compile cache could key on beside the shapes: the Case fields a variation changes one at a time.
COMPILE_ARGS = (
    "input_dtype",
    "index_dtype",
    "inter_rows",
    "inter_steps",
    "inter_spare_steps",
    "pool",
    "pool_gap",
    "output_given",
    "update",
)


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
        return dict(
            heads=((self.H, self.HV),),
            head_dims=((self.K, self.V),),
            state_dtypes=(self.state_dtype,),
            layouts=(self.layout,),
            invalid_gva=False,
        )


class Pinned:
    """A target as the strategies see it (name, path, release, declared support, semantics, offset width), its
    support replaced in some fields."""

    def __init__(self, target: TargetView, **fields):
        self.target, self.name, self.fields = target, target.name, fields

    def declared(self, bugs: tuple = ()):
        return dataclasses.replace(self.target.declared(bugs), **self.fields)

    def semantics(self):
        return self.target.semantics()

    def offset_bits(self) -> int:
        return self.target.offset_bits()

    @property
    def path(self) -> str:
        return self.target.path

    def release(self) -> str | None:
        return self.target.release()


def serving_ops(target: TargetView, bugs: tuple = (), device: str = "cpu") -> tuple[str, ...]:
    """The operations a serving sequence calls on `target`: those it supports that no known bug masks and that it
    runs on `device` (Target.op_unavailable)."""
    ops = sorted(target.support.ops)
    return tuple(op for op in ops if not masked_reason(bugs, op) and not target.op_unavailable(op, device))


def serving_budget(budget: Budget) -> Budget:
    """The budget a step draws with: no warm-up calls (the sequence makes its own) and no large pools."""
    return dataclasses.replace(budget, warm_calls=False, large_bytes=0)


@st.composite
def geometries(draw, target: TargetView, op: str, budget: Budget, bugs: tuple = ()) -> Geometry:
    """A pool geometry inside the target's support: from the compile-bucket plan where the budget has one (GPU)."""
    sup = target.declared(bugs)
    pick = lambda options: draw(st.sampled_from(options))
    bucket = pick(bucket_plan(target.name, op, sup, budget)) if budget.plan_size else draw_bucket(pick, sup, op, budget)
    return Geometry(bucket.H, bucket.HV, bucket.K, bucket.V, bucket.state_dtype, bucket.layout)


def output_policies(target: TargetView, bugs: tuple = ()) -> st.SearchStrategy[str]:
    """How a sequence passes output= (OUTPUTS): "none" only where the target takes output=None."""
    return st.sampled_from(OUTPUTS if target.declared(bugs).output_optional else OUTPUTS[:1])


@st.composite
def steps(
    draw,
    target: TargetView,
    geometry: Geometry,
    ops: tuple[str, ...],
    budget: Budget,
    bugs: tuple = (),
    previous: Case | None = None,
    outputs: str = OUTPUTS[0],
) -> Step:
    """One call on a pool of this geometry: a fresh case of one of `ops` (the zero choice) or, every other call, a
    variation of the `previous` call's case; then whether the pool is reallocated first. Under the "none" output
    policy a fresh case passes output=None (a variation keeps what the previous call passed)."""
    pinned = Pinned(target, **geometry.support())
    if previous is not None and draw(st.booleans()):
        case = draw(variations(pinned.declared(bugs), previous, budget, outputs))
    else:
        case = draw(cases(pinned, draw(st.sampled_from(ops)), budget, bugs))
        case = case if outputs == OUTPUTS[0] else case.replace(output_given=False)
    return Step(case, realloc=draw(st.booleans()))


@st.composite
def variations(draw, sup: Support, case: Case, budget: Budget, outputs: str = OUTPUTS[0]) -> Case:
    """`case` with new values only (the zero choice: a new seed, its requests in another order; the compile key
    stays), with fewer of its requests (a batch that shrinks as requests finish: the compile key stays where B is
    dynamic), or with one of COMPILE_ARGS changed to another value it may take inside `sup` (`alternatives`). An
    engine target's padding stays at the tail (Engine.tail_padding): only its live requests are reordered, and its
    padded rows go first when the batch shrinks; the draws are those of any target."""
    others = alternatives(sup, case, budget, outputs)
    least = min(case.B, sup.least_B(case.H, case.T))
    name = draw(st.sampled_from(("values", *(("requests",) if case.B > least else ()), *others)))
    if name in others:
        return case.replace(**{name: draw(st.sampled_from(others[name]))})
    order = draw(st.permutations(range(case.B)))  # shrinks toward the identity
    if sup.engine:  # CUDA graphs pad at the tail (Engine.tail_padding): only the live requests move, padding follows
        live = live_rows(case)
        order = [i for i in order if i in live] + [i for i in range(case.B) if i not in live]
    kept = draw(st.integers(least, case.B - 1)) if name == "requests" else case.B
    return _requests(sup, case, order[:kept]).replace(seed=draw(st.integers(0, SEEDS - 1)))


def _requests(sup: Support, case: Case, order: list[int]) -> Case:
    """`case` with the requests `order` names (indices, in that order): the per-request fields follow, and T and
    buffer rows where they are set by the requests (a prefill's longest sequence, a buffer of exactly B rows); a
    prefill keeps a token where the target needs one. A target without a slot map (Support.pool False) keeps the
    identity map on a pool of exactly the requests: its state rows move with them."""
    pick = lambda xs: tuple(xs[i] for i in order) if xs else xs  # None and () stay as they are
    fields = dict(
        read_slots=pick(case.read_slots),
        write_slots=pick(case.write_slots),
        token_slots=pick(case.token_slots),
        inter_index=pick(case.inter_index),
        accepted=pick(case.accepted),
    )
    if case.op == "prefill":
        seqlens = pick(case.seqlens)
        seqlens = seqlens if sup.empty_prefill or any(seqlens) else (1, *seqlens[1:])
        fields.update(seqlens=seqlens, T=max(seqlens))
        if (engine := ENGINES.get(sup.engine)) and case.edge in (None, "empty-extend"):  # reordered: classify again
            fields.update(edge="empty-extend" if empty_extend(fields["read_slots"], seqlens, engine.null) else None)
    if case.inter_rows and (sup.exact_rows or not sup.spare_rows):
        fields.update(inter_rows=len(order))
    if not sup.pool:  # no slot map: request i is state row i, so the pool shrinks with the batch
        fields.update(read_slots=tuple(range(len(order))), pool=len(order))
    return case.replace(**fields)


def alternatives(sup: Support, case: Case, budget: Budget, outputs: str = OUTPUTS[0]) -> dict[str, tuple]:
    """COMPILE_ARGS -> the other values each may take in `case` (those with none left out), inside `sup` and as
    fuzz.generate.strategies.cases draws them: another input or index dtype; the intermediate buffer's rows (unless
    exact: B to B+3, past every explicit row), steps (T to T+2, where spare steps are allowed) and spare steps of a
    sliced view (0 to 2, where allowed); a capacity that keeps every slot the requests name inside (up to
    budget.max_pool more); another of the budget's gaps (strided pools); output= given or None (per-call policy);
    disable_state_update flipped (a verify without per-token slots, whose buffer, if any, may go with an update)."""
    buffer = case.inter_rows > 0
    named = [s for s in (*case.read_slots, *(case.write_slots or ()), *sum(case.token_slots or (), ())) if s >= 0]
    fields = {
        "input_dtype": sup.input_dtypes,
        "index_dtype": sup.index_dtypes,
        "inter_rows": range(max((case.B, *(r + 1 for r in case.inter_index or ()))), case.B + 4)
        if buffer and not sup.exact_rows and sup.spare_rows
        else (),
        "inter_steps": range(case.T, case.T + 3) if buffer and sup.spare_steps else (),
        "inter_spare_steps": range(3) if buffer and sup.sliced_intermediate else (),
        "pool": range(max(named, default=0) + 1, case.pool + budget.max_pool + 1) if sup.pool else (),
        "pool_gap": budget.gaps if sup.strided_pool else (),
        "output_given": (False, True) if sup.output_optional and outputs == OUTPUTS[0] else (),
        "update": (False, True)
        if sup.no_update and case.op == "verify" and case.token_slots is None and (sup.buffer_with_update or not buffer)
        else (),
    }
    return {
        name: others
        for name, values in fields.items()
        if (others := tuple(v for v in values if v != getattr(case, name)))
    }


def compile_changes(before: Case, after: Case) -> tuple[tuple[str, object, object], ...]:
    """(argument, its value in `before`, in `after`) for each of COMPILE_ARGS in which the two calls differ."""
    return tuple(
        (name, getattr(before, name), getattr(after, name))
        for name in COMPILE_ARGS
        if getattr(before, name) != getattr(after, name)
    )


def serving_machine(target: TargetView, budget: Budget, bugs: tuple, new_run: Callable) -> type[RuleBasedStateMachine]:
    """The state machine for one target. `new_run()` gives each example its runner (fuzz.run.serving.ServingRun):
    `step(Step)` runs and judges a call on the example's pool, raising the typed failure; `close()` ends it."""
    budget = serving_budget(budget)
    ops = serving_ops(target, bugs, budget.device)
    if not ops:
        raise ValueError(f"{target.name}: every operation is masked by a known bug; nothing to call")

    class ServingMachine(RuleBasedStateMachine):
        def __init__(self):
            super().__init__()
            self.run = new_run()
            self.geometry: Geometry | None = None
            self.outputs = OUTPUTS[0]
            self.last: Case | None = None  # the case of the call drawn last (checked or not), which a variation varies

        @initialize(geometry=geometries(target, ops[0], budget, bugs), outputs=output_policies(target, bugs))
        def pool(self, geometry: Geometry, outputs: str) -> None:
            self.geometry, self.outputs = geometry, outputs

        @rule(data=st.data())
        def call(self, data) -> None:
            step = data.draw(steps(target, self.geometry, ops, budget, bugs, self.last, self.outputs), label="step")
            self.last = step.case
            self.run.step(step)

        def teardown(self) -> None:
            self.run.close()

    return ServingMachine
