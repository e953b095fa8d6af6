"""Serving sequences run and judged (fuzz.generate.serving draws them): one persistent pool, every call judged against
the oracle, and every failure typed by whether it needs the calls before it.

The pool is one guarded allocation (GUARD_SLOTS of guard pattern on each side, `pool_gap` spare heads after each
slot) and the machine's record of it: a copy of every slot as the last call left it (in the pool's dtype, compared
bit for bit: a float64 copy would hold the same values and need a tolerance). A call sees the view of its Case's
capacity, or a reallocation with the state copied over; the oracle runs on what the call reads, so every call is
judged exactly as one case alone is (fuzz.judge.verdict.judge), on state carried from the calls before it.

Checks per call (ServingRun.execute), in order; the first that fails is the call's failure:
  1. the pool holds what the record says (else StateLeak: state changed between calls);
  2. the call, with output=None where the Case says so (a rejection: RejectedValidInput; the library's "unsupported
     on this device": UnsupportedHere, which ends the test as skipped, the target unavailable);
  3. a returned output (output=None) shares memory with an input, the pool, the intermediate buffer or an output of an
     earlier call, or an earlier call's output changed (OutputAliased);
  4. the allocation's guards and gaps (GuardBreach); a slot that no request of the call names (nor slot 0 where the
     padding contract sends padded rows) changed, in the call's view (PoolCorruption) or past it (GuardBreach);
  5. the verdict on the call's view: output, written states, intermediate states, untouched slots.
A failure of 2, 4 or 5 after earlier calls is run again alone (`Alone`): the same step on a fresh copy of the override
module and a copy of the same pool (in this process: a reloaded module is what a fresh process gives it), or, for the
installed library, the step's coordinate in a fresh worker process whose FLASHINFER_WORKSPACE_BASE and TRITON_CACHE_DIR
are empty directories. Failing alone too, it is the plain kind (and the sequence shrinks to that call); passing alone,
a changed slot outside the call's requests is a StateLeak and anything else a StaleCompile, which names what the
call changed among the arguments a compile cache could key on (fuzz.generate.serving.COMPILE_ARGS) since the first
earlier call of its op and T with other values of them (`changed_from`): the kernel that call compiled is the one a
stale cache serves. Failures 1 and 3 are cross-call by definition.

Compile caches and any other library state are reset before every sequence where they can be (an override module is
reloaded: it must survive importlib.reload, as the CPU stand-ins and mutants do), so a sequence fails or passes by
its own calls; Hypothesis shrinks it, and `shortest` deletes the calls it does not need. The installed library cannot
be reset in a running process: its caches outlive a sequence, and a call that fails because of an earlier sequence is
reported as a StaleCompile with no earlier call in its own.

fuzz.suite.serving runs the state machine as a test (rounds, time box, run report): its ServingTest keeps a run's
`Accounts`.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import tempfile
import time
from dataclasses import dataclass
from typing import Protocol

import hypothesis
import torch
from hypothesis.control import current_build_context
from hypothesis.errors import InvalidArgument

from fuzz.generate.materialize import materialize
from fuzz.generate.serving import Step, compile_changes
from fuzz.judge.failures import (
    GuardBreach,
    OutputAliased,
    OutputMismatch,
    PoolCorruption,
    StaleCompile,
    StateLeak,
    normalized,
)
from fuzz.model.case import DTYPE_NAMES
from fuzz.model.guarded import GUARD_SLOTS, Guarded
from fuzz.model.patterns import bits
from fuzz.model.tensors import Tensors
from fuzz.run.harness import Check
from fuzz.run.result import CheckResult, Failure
from fuzz.run.worker import DEFAULT_TIMEOUT, Worker
from fuzz.targets.base import Target

CROSS_CALL = ("carried", "aliased")  # stages whose failures need earlier calls by definition


# ---- the pool ---------------------------------------------------------------------------------------------------
def _remember(pool: Guarded) -> Guarded:
    """Make the pool's record (kept rows: all of them) what it holds now."""
    pool.kept_rows = torch.arange(pool.view.shape[0], device=pool.view.device)
    pool.kept = pool.view.clone()
    return pool


def _allocate(like: Guarded, capacity: int, gap: int, seed_: int, state: torch.Tensor) -> Guarded:
    """A new allocation of `capacity` slots (`gap` spare heads after each) holding the filler of `seed_`, with `state`
    (an old record) copied into its first slots."""
    view = like.view
    pool = Guarded.around((capacity, *view.shape[1:]), view.dtype, view.device, GUARD_SLOTS, gap)
    pool.fill(seed_)
    kept = min(capacity, state.shape[0])
    pool.view[:kept] = state[:kept]
    return _remember(pool)


def _gap(pool: Guarded) -> int:
    return pool.full.shape[1] - pool.view.shape[1]


def _window(pool: Guarded, capacity: int) -> Guarded:
    """The first `capacity` slots of the allocation, as the Guarded the verdict judges: no outer guard of its own
    (slots past the view and the allocation's guards are checked on the allocation), its gaps guarded, its record
    the allocation's."""
    lead = pool.lead
    return Guarded(
        pool.full[lead : lead + capacity],
        pool.view[:capacity],
        0,
        kept_rows=pool.kept_rows[:capacity],
        kept=pool.kept[:capacity],
    )


def _footprint(case, sem) -> set[int]:
    """The slots a call may touch: those its requests name, slot 0 where its contract redirects padding there, and
    the contract's scratch slots (Semantics.scratch_slots)."""
    tokens = (s for row in case.token_slots or () for s in row)
    named = {s for s in (*case.read_slots, *(case.write_slots or ()), *tokens) if s >= 0} | set(sem.scratch_slots)
    pad = any(case.padded) or any(w < 0 if case.null < 0 else w <= 0 for w in case.write_slots or ())
    return named | ({0} if pad and "slot0" in (sem.pad.read, sem.pad.write) else set())


def _changed(pool: Guarded) -> list[int]:
    """Slots of the allocation that differ from the record (bit for bit)."""
    return (bits(pool.view) != bits(pool.kept)).flatten(1).any(1).nonzero().squeeze(1).tolist()


# ---- memory overlap -----------------------------------------------------------------------------------------------
def _span(x: torch.Tensor) -> tuple[int, int]:
    """The bytes [first, last) a tensor's elements occupy."""
    if x.numel() == 0:
        return (x.data_ptr(), x.data_ptr())
    last = sum((n - 1) * s for n, s in zip(x.shape, x.stride()))
    return (x.data_ptr(), x.data_ptr() + (last + 1) * x.element_size())


def _overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    (a0, a1), (b0, b1) = _span(a), _span(b)
    return a.device == b.device and a0 < b1 and b0 < a1


@dataclass
class _Held:
    """An output an earlier call produced (the caller's buffer or the library's) and its bits after that call."""

    call: int
    tensor: torch.Tensor
    bits: torch.Tensor


# ---- one pool's calls --------------------------------------------------------------------------------------------
class Accounts(Protocol):
    """What a test keeps of its examples (fuzz.suite.serving.ServingTest): a ServingRun given one reports to it."""

    def example(self) -> None:
        """An example (a sequence) starts."""

    def may_check_now(self) -> bool:
        """Whether a call may be checked now (the time box)."""

    def recorded(self, result: CheckResult, seconds: float, first: bool) -> None:
        """A call was checked (`first`: the sequence's first call)."""

    def hit(self, failure: Failure, steps: tuple, reproduced: bool | None) -> bool:
        """A call failed after `steps`: whether the failure fails the Hypothesis run."""


class ServingRun:
    """The calls of one example on one pool. `execute(step)` runs and judges a call and returns (CheckResult, stage)
    with the plain failure kind; `step(step)` also types the failure (Alone) and keeps the test's accounts; `close()`
    raises the example's failure. The library is reset (fresh_library) before the first call that runs.

    A failing step does not raise: the steps after it are still drawn (and not checked) and the failure is raised at
    the end, so what an example draws never depends on what was checked (the time box, a failure an earlier round
    reported): Hypothesis requires the same choices to draw the same way every time."""

    def __init__(self, target: Target, device: str, test: Accounts | None = None, alone: Alone | None = None):
        self.target, self.device, self.test = target, device, test
        self.fresh: bool | None = None  # whether the library was reset (None: no call ran yet)
        self.pool: Guarded | None = None  # the allocation (None until the first call builds it)
        self.held: list[_Held] = []
        self.steps: list[Step] = []
        self.alone = alone or Alone(target, device)
        self.failed: tuple | None = None  # (Failure, steps, fails alone) once a step failed
        self.raises = False  # whether close() raises it (not when an earlier round reported its key)
        if test is not None:
            test.example()

    def close(self) -> None:
        self.held.clear()
        if self.raises:
            raise self.failed[0].exception()

    def step(self, step: Step) -> CheckResult | None:
        """Run, judge and type one call. None: not checked (past the time box, or after a failure)."""
        test = self.test
        if self.failed is not None or test is not None and not test.may_check_now():
            return None
        self.steps.append(step)
        before = self.pool
        began = time.monotonic()
        result, stage = self.execute(step)
        reproduced = None  # does the call fail alone? (None: cross-call by definition, not run alone)
        if result.failure is not None and stage not in CROSS_CALL:
            failure, reproduced = self._typed(step, result.failure, stage, before)
            result = dataclasses.replace(result, failure=failure)
        if test is not None:
            test.recorded(result, time.monotonic() - began, first=len(self.steps) == 1)
        for text in result.events if _build_context() else ():
            hypothesis.event(text)
        if result.failure is not None:
            failure = dataclasses.replace(
                result.failure.with_notes(sequence_note(self.steps)), before=tuple(s.case for s in self.steps[:-1])
            )
            self.failed = (failure, tuple(self.steps), reproduced)
            self.raises = test is None or test.hit(*self.failed)
        return result

    def _typed(self, step: Step, failure: Failure, stage: str, before: Guarded | None) -> tuple[Failure, bool]:
        """The failure's kind once it is known whether the call fails alone, and whether it does."""
        if len(self.steps) == 1 and self.fresh:
            return failure, True  # the first call on a fresh library is the call alone
        passes, how = self.alone(step, before)
        if not passes:
            return failure, True
        earlier = len(self.steps) - 1
        kind = StateLeak if stage == "footprint" else StaleCompile
        after = (
            f"after {earlier} earlier call(s)"
            if earlier
            else "with no earlier call in this sequence: the library's caches kept a kernel from an earlier example"
        )
        changed, what = changed_from(self.steps) if kind is StaleCompile else ("", "")
        return Failure(
            kind.__name__,
            failure.case,
            f"call {len(self.steps)} fails {after} ({failure.kind}: {failure.detail}); {how} it passes{changed}",
            f"{failure.kind} after {f'a call that differed in {what}' if what else 'earlier calls'}, "
            f"not alone: {failure.cause}",
            failure.bucket,
            failure.notes,
        ), False

    # ---- one call, judged ----------------------------------------------------------------------------------------
    def execute(self, step: Step) -> tuple[CheckResult, str]:
        """The call's check (fuzz.run.harness.Check) on the carried pool, and the stage it ended in (CROSS_CALL, or
        "call", "footprint", "verdict")."""
        case, stage = step.case, "carried"
        run = Check(self.target, case, self.device)
        if self.fresh is None:
            self.fresh = fresh_library(self.target)
        with run.judging():
            self._check_carried(case)
            t = run.tensors(lambda: self._tensors(step))
            run.events.append(
                f"serving pool: {'reallocated' if step.realloc else 'view'}, "
                f"output {'given' if case.output_given else 'None'}"
            )
            want = run.expected(t)
            stage = "call"
            got = run.call(t)  # output=None where Case.output_given is False; UnsupportedHere ends the sequence
            stage = "aliased"
            with run.phase("verdict"):
                self._check_aliasing(case, t, got)
                stage = "footprint"
                self._check_footprint(case, run.sem)
                stage = "verdict"
                self._check_returned(case, t, got)
            run.verdict(t, got, want)
            self._hold(got)
            _remember(self.pool)
        return run.result(), stage

    def _check_carried(self, case) -> None:
        if self.pool is not None and (slots := _changed(self.pool)):
            raise StateLeak(
                case,
                f"before call {len(self.steps)}, pool slot {slots[0]} no longer holds what the "
                "calls before it left there",
                cause="pool slot changed between calls",
            )

    def _tensors(self, step: Step) -> Tensors:
        case = step.case
        if self.pool is None:  # the first call: its pool exactly as the case alone builds it
            t = materialize(case, self.device)
            self.pool = _remember(t.pool)
            return dataclasses.replace(t, pool=_window(self.pool, case.pool))
        if step.realloc or case.pool > self.pool.view.shape[0] or case.pool_gap != _gap(self.pool):
            self.pool = _allocate(self.pool, case.pool, case.pool_gap, case.seed, self.pool.kept)
        return materialize(case, self.device, pool=_window(self.pool, case.pool))

    def _check_aliasing(self, case, t: Tensors, got) -> None:
        n = len(self.steps)
        if isinstance(got, torch.Tensor) and not (case.output_given and _overlap(got, t.output.full)):
            inputs = [
                (f"input {f.name}", x)
                for f in dataclasses.fields(t)
                if isinstance(x := getattr(t, f.name), torch.Tensor)
            ]
            regions = [
                *inputs,
                ("the state pool", self.pool.full),
                *([("the intermediate-state buffer", t.inter.full)] if t.inter is not None else []),
                *((f"the output of call {h.call}", h.tensor) for h in self.held),
            ]
            for what, x in regions:
                if _overlap(got, x):
                    raise OutputAliased(
                        case,
                        f"the output call {n} returned shares memory with {what}",
                        cause=f"returned output shares memory with {normalized(what)}",
                    )
        for h in self.held:
            if not torch.equal(bits(h.tensor), h.bits):
                raise OutputAliased(
                    case,
                    f"the output of call {h.call} changed during call {n}",
                    cause="an earlier call's output changed",
                )

    def _check_footprint(self, case, sem) -> None:
        pool, n = self.pool, len(self.steps)
        if (where := pool.outside_changed()) is not None:
            raise GuardBreach(
                case, f"pool written outside its allocation at index {where}", cause="pool written outside the buffer"
            )
        touched = _footprint(case, sem)
        for slot in _changed(pool):
            if slot in touched:
                continue
            if slot >= case.pool:
                raise GuardBreach(
                    case,
                    f"call {n} changed pool slot {slot}, past the {case.pool}-slot view it was given",
                    cause="pool written past the view",
                )
            raise PoolCorruption(
                case,
                f"call {n} changed pool slot {slot}, which no request of it reads or writes "
                f"(its slots: {sorted(touched)})",
                cause="pool slot outside the call's requests changed",
            )

    def _check_returned(self, case, t: Tensors, got) -> None:
        if not (isinstance(got, torch.Tensor) and got.shape == t.output.view.shape and got.dtype in DTYPE_NAMES):
            what = f"{tuple(got.shape)} {got.dtype}" if isinstance(got, torch.Tensor) else type(got).__name__
            raise OutputMismatch(
                case,
                f"the returned output is {what}; expected {tuple(t.output.view.shape)}",
                cause="returned output of the wrong shape or dtype",
            )

    def _hold(self, got: torch.Tensor) -> None:
        self.held.append(_Held(len(self.steps), got, bits(got).clone()))


def replay(target: Target, device: str, steps, alone: Alone) -> tuple | None:
    """Run a sequence on a fresh pool (and library, where it can be reset): (Failure, the steps up to it, fails
    alone) of its first failure, or None."""
    run = ServingRun(target, device, alone=alone)
    for step in steps:
        run.step(step)
    return run.failed


def shortest(target: Target, device: str, failed: tuple, alone: Alone, go_on=lambda: True) -> tuple:
    """`failed` (Failure, steps, fails alone) with every call deleted that its failure does not need: a deletion is
    replayed and kept when the same failure key comes back. Hypothesis deletes at most a few consecutive choices at a
    time, so it drops trailing calls but seldom an earlier one (a call is dozens of choices); this pass ends at a
    sequence from which no single call can go (or when `go_on()` says the time is up)."""
    key, i = failed[0].key, 0
    while i < len(failed[1]) - 1 and go_on():
        trial = replay(target, device, failed[1][:i] + failed[1][i + 1 :], alone)
        if trial is not None and trial[0].key == key:
            failed = trial
        else:
            i += 1
    return failed


def changed_from(steps) -> tuple[str, str]:
    """What the last call changed among COMPILE_ARGS since the first earlier call of its op and T (a prefill: of its
    op, T is no compile constant there) with other values of them: a cache keyed without one of them compiled its
    kernel at that call and served it to the later ones (the calls between, which passed, change nothing here, so
    deleting them keeps the failure's key). Returns a clause for the detail, with the values, and the words for the
    cause, which is part of the failure key: the argument's name where one changed (a variation), "several compile
    arguments" where more did (a fresh call: naming each set would split one bug into a failure per set). Both empty
    when no such call came before."""
    *earlier, last = (s.case for s in steps)
    shape = lambda c: (c.op, 0 if c.op == "prefill" else c.T)
    differing = [
        (i, changes)
        for i, case in enumerate(earlier)
        if shape(case) == shape(last) and (changes := compile_changes(case, last))
    ]
    if not differing:
        return "", ""
    i, changes = differing[0]
    kind = "prefill" if last.op == "prefill" else f"{last.op} of T{last.T}"
    which = (
        "the call before it" if i == len(earlier) - 1 else f"call {i + 1}, the first {kind} with other values of them,"
    )
    values = ", ".join(f"{name} {old} -> {new}" for name, old, new in changes)
    if len(changes) == 1:
        return f"; {which} differed only in {values}", changes[0][0]
    return f"; {which} differed in {values}", "several compile arguments"


def sequence_note(steps) -> str:
    return "the calls, one coordinate each (fuzz.generate.serving.Step.parse), the last one failing:\n" + "\n".join(
        f"  {i}. {s!r}" for i, s in enumerate(steps, 1)
    )


# ---- the call alone --------------------------------------------------------------------------------------------
def fresh_library(target: Target) -> bool:
    """Reload the target's override module: empty compile caches and no state from earlier calls, what a fresh
    process gives it. False for the installed library, which cannot be reset in a running process."""
    spec = target.family.override
    if spec is None:
        return False
    importlib.reload(importlib.import_module(spec.partition(":")[0]))
    target.family.reset(spec)
    return True


class Alone:
    """Does a call fail on its own? `alone(step, pool)` -> (passes, how it was run, in words).

    An override module: the step on a fresh copy of the module and a copy of the pool as the record had it before the
    call (`pool`; None: the call was the first), so only the library's own state differs. The installed library: the
    step's coordinate in a fresh worker process with empty compile caches (fuzz.run.worker; its pool is seeded from
    the coordinate, its output buffer given), each coordinate once."""

    def __init__(self, target: Target, device: str, timeout: float | None = None):
        self.target, self.device, self.timeout = target, device, timeout
        self._worker_results: dict[str, bool] = {}

    def __call__(self, step: Step, pool: Guarded | None) -> tuple[bool, str]:
        if self.target.family.override is not None:
            run = ServingRun(self.target, self.device, alone=self)
            if pool is not None:  # a copy of the pool the call had
                run.pool = _allocate(pool, pool.view.shape[0], _gap(pool), 0, pool.kept)
            result, _ = run.execute(step)
            return result.failure is None, "alone (a fresh copy of the override module, the same pool)"
        coordinate = repr(step.case)
        if coordinate not in self._worker_results:
            self._worker_results[coordinate] = self._in_fresh_process(step)
        return self._worker_results[coordinate], "alone (its coordinate in a fresh process, empty compile caches)"

    def _in_fresh_process(self, step: Step) -> bool:
        with tempfile.TemporaryDirectory(prefix="gdn-alone-") as tmp:
            from fuzz.targets.registry import current_overrides

            worker = Worker(current_overrides(), self.device, self.timeout or DEFAULT_TIMEOUT)
            worker.env.update(
                FLASHINFER_WORKSPACE_BASE=os.path.join(tmp, "flashinfer"), TRITON_CACHE_DIR=os.path.join(tmp, "triton")
            )
            try:
                return worker.check(self.target, step.case).failure is None
            finally:
                worker.close()


def _build_context():
    try:
        return current_build_context()
    except InvalidArgument:  # outside a Hypothesis test
        return None


def final_replay() -> bool:
    """Is Hypothesis replaying a shrunk failure for the last time (its report)?"""
    return bool((context := _build_context()) and context.is_final)


__all__ = [
    "Alone",
    "ServingRun",
    "changed_from",
    "final_replay",
    "fresh_library",
    "replay",
    "sequence_note",
    "shortest",
]
