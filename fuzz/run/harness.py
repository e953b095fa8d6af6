"""One differential check: Case -> tensors -> expected values (oracle and model) -> target -> verdict -> CheckResult.

`Check` is one check of one Case on one target, as named stages, each timed under its PHASES entry:
  tensors   materialize the case (or time a driver's own builder: a pool carried from an earlier call);
  expected  the oracle's values for what the call reads;
  call      the library call (Case.warm_pool's warm-up call first); an error the library raises becomes a finding
            (library_error: RejectedValidInput, or UnsupportedHere for "not on this device"); `call_invalid` for a
            case outside the contract, which the library must reject;
  verdict   the standard judgement (fuzz.judge.verdict.judge) of outputs, states, guards and untouched slots;
  paired    a target with a twin (Target.paired: a differential inside one engine) runs the case again on it, with
            tensors of its own: tensors, expected, call and verdict as above, then the two runs judged against each
            other (fuzz.judge.pair);
  result    the CheckResult: comparisons, phase times, coverage events, the failure.
A driver composes them inside the stage runner `with check.judging():`, the one place where a GdnFailure a stage
raises becomes the result's Failure value (typed with the failure bucket and the library's traceback); the stages
after it never run. `check` below is the single-call driver: the stages in order. fuzz.run.serving's ServingRun is a
driver of sequences on one pool: it builds each call's tensors on its carried pool and adds its own checks (the pool
record before the call; aliasing, footprint and the returned output after it) in `check.phase("verdict")` before
the standard verdict. A chain of calls on one pool (verify, commit, decode) does the same per call: the carried pool
as its tensors, its own invariants raised as GdnFailure between call and verdict, one CheckResult per call.

`check` returns what happened; it raises only when the harness itself breaks (a bug of ours, never a finding). An
error by which the library says it does not support this device (fuzz.targets.unsupported) is no finding either: the
result then says the target is unavailable, with the library's reason."""

from __future__ import annotations

import dataclasses
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from fuzz.generate.materialize import materialize
from fuzz.judge.failures import AcceptedInvalidInput, GdnFailure, RejectedValidInput, normalized
from fuzz.judge.oracle import Expected, expected
from fuzz.judge.pair import Run, judge_pair
from fuzz.judge.verdict import judge
from fuzz.model.case import Case
from fuzz.model.engines import EDGES
from fuzz.model.tensors import Tensors
from fuzz.run.memory import exclusive_if_heavy
from fuzz.run.result import CheckResult, Failure
from fuzz.targets.api import AdapterError
from fuzz.targets.base import Target
from fuzz.targets.unsupported import UnsupportedHere, unsupported_here

PHASES = ("tensors", "oracle", "warm-up call", "kernel call", "verdict")  # what a Check tells its on_phase hook


def dispatch_bucket(target: Target, case: Case) -> str:
    """What a compiled kernel is keyed by (B is dynamic), plus the kernel variant the target picks for the case:
    one bucket per compile on GPU targets (coverage, compile cost)."""
    variant = target.variant(case)
    return (
        f"{target.name}:{case.op}-T{case.T}-H{case.H}-HV{case.HV}-K{case.K}-V{case.V}-{case.state_dtype}"
        f"-{case.input_dtype}-{case.index_dtype}-{case.layout}{'-strided' if case.pool_gap else ''}"
        f"{'-inter' if case.inter_rows else ''}{'' if case.update else '-noupdate'}"
        f"{f'-{variant}' if variant else ''}"
    )


def failure_bucket(target: Target, case: Case) -> str:
    """The dispatch part of a failure's identity: target, operation and the kernel variant the library runs for the
    case. Not the compile key: one bug would then be one failure per shape and dtype the shrinker passes through."""
    variant = target.variant(case)
    return f"{target.name}:{case.op}" + (f":{variant}" if variant else "")


class Check:
    """One check of `case` on `target` while it runs: its stages, and what they gathered (phase times, coverage
    events, comparisons, the failure). on_phase(name), if given, is told each PHASES entry as it begins."""

    def __init__(self, target: Target, case: Case, device: str, on_phase: Callable[[str], None] | None = None):
        self.target, self.case, self.device, self.on_phase = target, case, device, on_phase
        self.sem = target.semantics().for_op(case.op)
        self.phases: dict[str, float] = {}  # seconds per phase: tensors, oracle, kernel, verdict
        self.events: list[str] = []  # coverage labels
        self.compared: list = []  # the verdict's comparisons
        self.failure: Failure | None = None  # set by the stage runner

    # ---- the stage runner and its timing ---------------------------------------------------------------------------
    @contextmanager
    def judging(self) -> Iterator[None]:
        """Run stages: a GdnFailure raised in the block ends it and becomes `failure`, the one conversion of a raised
        failure into a value (fuzz.run.result says the way out). Anything else propagates."""
        try:
            yield
        except GdnFailure as error:
            bucket = failure_bucket(self.target, self.case)
            self.failure = Failure.from_exception(error, bucket, _notes(error))

    def reached(self, phase: str) -> None:
        """Tell the caller the PHASES entry the check enters: a crash that takes the process down leaves no result
        to say where it happened (fuzz.run.worker publishes it to its parent)."""
        if self.on_phase is not None:
            self.on_phase(phase)

    @contextmanager
    def phase(self, name: str, reached: str | None = None) -> Iterator[None]:
        """Time phase `name` (added to its earlier time, so a driver's own checks join the phase they belong to);
        it begins PHASES entry `reached` (default: its name)."""
        self.reached(reached or name)
        start = time.perf_counter()
        try:
            yield
        finally:
            if str(self.device).startswith("cuda"):
                torch.cuda.synchronize()  # charge asynchronous kernel time to the phase that launched it
            self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - start

    # ---- the stages ------------------------------------------------------------------------------------------------
    def tensors(self, build: Callable[[], Tensors] | None = None) -> Tensors:
        """The case's tensors: `build()` where the driver supplies them (a pool carried between calls), else the
        case materialized as it is alone."""
        with self.phase("tensors"):
            if build is not None:
                return build()
            return materialize(self.case, self.device, offset_bits=self.target.offset_bits())

    def expected(self, t: Tensors) -> Expected:
        """The oracle's values (exact and the target's precision model) for what the call reads in `t`."""
        with self.phase("oracle"):
            return expected(self.case, t, self.sem)

    def call(self, t: Tensors, target: Target | None = None) -> torch.Tensor:
        """The library call on a valid case (after Case.warm_pool's unjudged warm-up call), writing the pool and
        intermediate buffers in place: its output. An error the library raises is the finding (library_error); our
        adapter's defect (AdapterError) or the device's memory propagate as they are. `target`: the paired one
        (Target.paired), else the check's."""
        case, target = self.case, target or self.target
        try:
            with self.phase("kernel", "warm-up call"):
                if case.warm_pool:  # on a larger pool: same slots, so every index stays in range
                    warm = case.replace(pool=case.pool + case.warm_pool, warm_pool=0)
                    target.call(warm, materialize(warm, self.device, offset_bits=target.offset_bits()))
                self.reached("kernel call")
                return target.call(case, t)
        except (AdapterError, torch.OutOfMemoryError):
            raise  # our adapter's defect, or the device's memory: never a finding
        except Exception as e:  # the library's own error text is the finding
            raise library_error(case, e) from e

    def call_invalid(self, t: Tensors) -> None:
        """The call stage of a case outside the contract (not Case.valid): the library must raise, any clean error."""
        case = self.case
        try:
            with self.phase("kernel", "kernel call"):
                self.target.call(case, t)
        except Exception as e:  # noqa: BLE001 - any clean error is a rejection
            self.events.append(f"rejected invalid input: {type(e).__name__}")
            return
        raise AcceptedInvalidInput(
            case, f"HV={case.HV} is not a multiple of H={case.H}, yet it ran", cause="HV not a multiple of H accepted"
        )

    def verdict(self, t: Tensors, got: torch.Tensor, want: Expected) -> None:
        """The standard verdict on the call: raises the first failure, keeps every comparison."""
        with self.phase("verdict"):
            judge(self.case, self.target.path, self.sem, t, got, want, self.compared)

    def paired(self, other: Target, first: Run) -> None:
        """The paired target's run of the case (Target.paired) on tensors of its own, built alike: judged against the
        oracle under its own contract (a failure named by its target; a partner not under test is not:
        Target.oracle_judged), then against `first`, this check's run, where
        both contracts define the values (fuzz.judge.pair: Disagreement)."""
        t = self.tensors()
        sem = other.semantics().for_op(self.case.op)
        with self.phase("oracle"):
            want = expected(self.case, t, sem)
        own: list = []
        try:
            got = self.call(t, other)
            if other.oracle_judged:
                with self.phase("verdict"):
                    judge(self.case, other.path, sem, t, got, want, own)
        except GdnFailure as e:  # the paired run's failure, named by its target (its own failure key)
            raise type(e)(self.case, f"{other.name}: {e.detail}", f"{other.name}: {e.cause}") from e.__cause__
        finally:
            self.compared += [dataclasses.replace(c, kind=f"{other.name} {c.kind}") for c in own]
        with self.phase("verdict"):
            judge_pair(self.case, self.sem, first, Run(t, got, want), self.compared)

    def result(self, unjudged: str | None = None, unavailable: str | None = None) -> CheckResult:
        """The check's CheckResult: what it found, with its comparisons, phase times and coverage events."""
        return CheckResult(
            self.target.name,
            self.case,
            dispatch_bucket(self.target, self.case),
            self.failure,
            tuple(self.compared),
            self.phases,
            tuple(self.events),
            unjudged,
            unavailable,
        )


def _notes(error: GdnFailure) -> tuple[str, ...]:
    cause = error.__cause__
    if cause is None:
        return ()
    return ("raised by the library:\n" + "".join(traceback.format_exception(cause)).rstrip(),)


def check(target: Target, case: Case, device: str, on_phase=None) -> CheckResult:
    """Run the case on the target and judge it. on_phase(name), if given, is told each PHASES entry as it begins."""
    run = Check(target, case, device, on_phase)
    unjudged = unavailable = None
    with exclusive_if_heavy(case, device, target.offset_bits()):  # one memory-heavy check at a time per device
        try:
            with run.judging():
                _differential(run)
        except UnsupportedHere as error:  # the library's word on the device: no verdict, the target is unavailable
            unavailable = str(error)
        except torch.OutOfMemoryError as error:  # the device's limit, not the kernel's: never a finding
            unjudged = f"out of memory: {normalized(str(error))}"
            if str(device).startswith("cuda"):
                torch.cuda.empty_cache()
    return run.result(unjudged, unavailable)


def _differential(run: Check) -> None:
    """The single call's stages, with its coverage events."""
    case, sem = run.case, run.sem
    t = run.tensors()
    run.events.append(f"contract: {sem.pad.read}/{sem.pad.write}, padded rows {'yes' if any(case.padded) else 'no'}")
    run.events.append(f"decay regime: {case.decay}")
    if not case.valid:
        run.call_invalid(t)
        return
    run.events.append(f"bucket: {dispatch_bucket(run.target, case)}")
    want = run.expected(t)
    try:
        got = run.call(t)
    except RejectedValidInput:
        if (edge := EDGES.get(case.edge)) is None or edge.expect != "reject":
            raise
        run.events.append(f"edge {edge.id}: rejected cleanly, as its contract asks")  # a skip is judged as usual
        return
    run.verdict(t, got, want)
    if (other := run.target.paired()) is not None:
        run.paired(other, Run(t, got, want))


def library_error(case: Case, error: Exception) -> Exception:
    """What the library raising `error` on a valid case means: UnsupportedHere when it says this device is not
    supported (fuzz.targets.unsupported), else RejectedValidInput (a finding)."""
    why = unsupported_here(error)
    return UnsupportedHere(why) if why else RejectedValidInput.raised(case, error)


def check_or_raise(target: Target, case: Case, device: str) -> CheckResult:
    """check(), raising the typed failure if there is one (for scripts and tests that want an exception)."""
    result = check(target, case, device)
    result.raise_failure()
    return result
