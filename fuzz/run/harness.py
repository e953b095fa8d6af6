"""One differential check: Case -> tensors -> expected values (oracle and model) -> target -> verdict -> CheckResult.

`check` returns what happened; it raises only when the harness itself breaks (a bug of ours, never a finding). An
error by which the library says it does not support this device (fuzz.targets.unsupported) is no finding either: the
result then says the target is unavailable, with the library's reason."""

from __future__ import annotations

import time
import traceback
from contextlib import contextmanager

import torch

from fuzz.generate.materialize import materialize
from fuzz.judge.failures import AcceptedInvalidInput, GdnFailure, RejectedValidInput, normalized
from fuzz.judge.oracle import expected
from fuzz.judge.verdict import judge
from fuzz.model.case import Case
from fuzz.run.memory import exclusive_if_heavy
from fuzz.run.result import CheckResult, Failure
from fuzz.targets.api import AdapterError
from fuzz.targets.base import Target
from fuzz.targets.unsupported import UnsupportedHere, unsupported_here

PHASES = ("tensors", "oracle", "warm-up call", "kernel call", "verdict")  # what check() tells its on_phase hook


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


class _Check:
    """The mutable state of one check while it runs: phase times, coverage events, comparisons."""

    def __init__(self, device: str, on_phase=None):
        self.device, self.on_phase = device, on_phase
        self.phases: dict[str, float] = {}
        self.events: list[str] = []
        self.compared: list = []

    def reached(self, phase: str) -> None:
        """Tell the caller the PHASES entry the check enters: a crash that takes the process down leaves no result
        to say where it happened (fuzz.run.worker publishes it to its parent)."""
        if self.on_phase is not None:
            self.on_phase(phase)

    @contextmanager
    def phase(self, name: str, reached: str | None = None):
        """Time phase `name`; it begins PHASES entry `reached` (default: its name)."""
        self.reached(reached or name)
        start = time.perf_counter()
        try:
            yield
        finally:
            if str(self.device).startswith("cuda"):
                torch.cuda.synchronize()  # charge asynchronous kernel time to the phase that launched it
            self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - start

    def result(
        self,
        target: Target,
        case: Case,
        failure: Failure | None,
        unjudged: str | None = None,
        unavailable: str | None = None,
    ) -> CheckResult:
        """The check's CheckResult: what it found, with its comparisons, phase times and coverage events."""
        return CheckResult(
            target.name,
            case,
            dispatch_bucket(target, case),
            failure,
            tuple(self.compared),
            self.phases,
            tuple(self.events),
            unjudged,
            unavailable,
        )


def check(target: Target, case: Case, device: str, on_phase=None) -> CheckResult:
    """Run the case on the target and judge it. on_phase(name), if given, is told each PHASES entry as it begins."""
    run = _Check(device, on_phase)
    failure = unjudged = unavailable = None
    with exclusive_if_heavy(case, device, target.offset_bits()):  # one memory-heavy check at a time per device
        try:
            _differential(target, case, run)
        except GdnFailure as error:
            failure = Failure.from_exception(error, failure_bucket(target, case), _notes(error))
        except UnsupportedHere as error:  # the library's word on the device: no verdict, the target is unavailable
            unavailable = str(error)
        except torch.OutOfMemoryError as error:  # the device's limit, not the kernel's: never a finding
            unjudged = f"out of memory: {normalized(str(error))}"
            if str(device).startswith("cuda"):
                torch.cuda.empty_cache()
    return run.result(target, case, failure, unjudged, unavailable)


def _notes(error: GdnFailure) -> tuple[str, ...]:
    cause = error.__cause__
    if cause is None:
        return ()
    return ("raised by the library:\n" + "".join(traceback.format_exception(cause)).rstrip(),)


def _differential(target: Target, case: Case, run: _Check) -> None:
    sem = target.semantics()
    with run.phase("tensors"):
        t = materialize(case, run.device, offset_bits=target.offset_bits())
    run.events.append(f"contract: {sem.pad.read}/{sem.pad.write}, padded rows {'yes' if any(case.padded) else 'no'}")
    run.events.append(f"gate regime: {case.gate}")
    if not case.valid:
        try:
            with run.phase("kernel", "kernel call"):
                target.call(case, t)
        except Exception as e:  # noqa: BLE001 - any clean error is a rejection
            run.events.append(f"rejected invalid input: {type(e).__name__}")
            return
        raise AcceptedInvalidInput(
            case, f"HV={case.HV} is not a multiple of H={case.H}, yet it ran", cause="HV not a multiple of H accepted"
        )
    run.events.append(f"bucket: {dispatch_bucket(target, case)}")
    with run.phase("oracle"):
        want = expected(case, t, sem)
    try:
        with run.phase("kernel", "warm-up call"):
            _warm_up(target, case, run.device)
            run.reached("kernel call")
            got = target.call(case, t)
    except (AdapterError, torch.OutOfMemoryError):
        raise  # our adapter's defect, or the device's memory: never a finding
    except Exception as e:  # the library's own error text is the finding
        raise library_error(case, e) from e
    with run.phase("verdict"):
        judge(case, target.path, sem, t, got, want, run.compared)


def library_error(case: Case, error: Exception) -> Exception:
    """What the library raising `error` on a valid case means: UnsupportedHere when it says this device is not
    supported (fuzz.targets.unsupported), else RejectedValidInput (a finding)."""
    why = unsupported_here(error)
    return UnsupportedHere(why) if why else RejectedValidInput.raised(case, error)


def _warm_up(target: Target, case: Case, device: str) -> None:
    """Case.warm_pool: an unjudged first call on a larger pool (same slots, so every index stays in range)."""
    if case.warm_pool:
        warm = case.replace(pool=case.pool + case.warm_pool, warm_pool=0)
        target.call(warm, materialize(warm, device, offset_bits=target.offset_bits()))


def verify(target: Target, case: Case, device: str) -> CheckResult:
    """check(), raising the typed failure if there is one (for scripts and tests that want an exception)."""
    result = check(target, case, device)
    result.raise_failure()
    return result
