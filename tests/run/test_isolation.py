"""Crash isolation (`fuzz.run.worker`) on the CPU. The flashinfer family points at tests/crashing_standin.py, a
correct stand-in that segfaults on a padded row under GVA (HV > H), exits on T=2, hangs on T=3, poisons its
"CUDA context" on T=4, answers wrong on T=5 and makes the next call segfault on T=7. The fuzzing process must
survive all of it: a crash is a KernelCrash that Hypothesis shrinks like any other failure, a hang a KernelHang
bounded by the timeout, and the examples after a crash run in a restarted worker. A reported crash names the call
it happened in and whether it reproduces alone or only after the case checked before it.

`pytest -s` prints the crash run's numbers (examples, crashes, restarts, seconds per worker start).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, Verbosity, given, settings

import tests.crashing_standin as standin
from fuzz.cli import campaign_tables
from fuzz.generate.profiles import BUDGETS
from fuzz.generate.strategies import cases
from fuzz.judge.failures import FAILURE_KINDS, KernelCrash, KernelHang, OutputMismatch, RejectedValidInput
from fuzz.model.case import Case
from fuzz.run import worker
from fuzz.run.harness import check_or_raise as check
from fuzz.run.report import FailureRecord
from fuzz.run.result import CrashAttribution, Failure
from fuzz.suite import session as fuzz_session
from fuzz.suite.rounds import TestRun
from fuzz.targets.registry import TARGETS, current_overrides, overridden

BY_NAME = {t.name: t for t in TARGETS}
PRETRANSPOSE, MTP = BY_NAME["flashinfer-pretranspose-fp32"], BY_NAME["flashinfer-mtp-fp32"]
TIMEOUT = 60.0  # per call, for everything but the hang test
HANG_TIMEOUT = 5.0


def verify(T: int) -> Case:
    """One unpadded row; the stand-in's behaviour is chosen by T (1 and 6: correct)."""
    return Case.parse(f"verify-B1-T{T}-H1-HV1-K8-V16-pool1-pad0-fp32state-bf16in-i32-vk-decay_mild-seed0-slots[0]-nol2")


POOL = worker.WorkerPool()  # this module's workers, as a session holds its own


def isolated_check(target, case, timeout=TIMEOUT):
    result = POOL.check(target, case, "cpu", timeout)  # what the session calls under --gdn-isolate
    result.raise_failure()
    return result


def notes(error) -> str:
    return "\n".join(getattr(error, "__notes__", ()))


@pytest.fixture(scope="module")
def isolated():
    """The session-cached CPU worker for the crashing stand-in (the parent process imports it too)."""
    before = current_overrides()
    with overridden({**before, "flashinfer": "tests.crashing_standin"}):
        w = POOL.worker_for("cpu", TIMEOUT)
        yield w
        w.stop()


def test_failure_classes_registered():
    assert {KernelCrash, KernelHang} <= set(FAILURE_KINDS)


def test_isolated_check_brings_back_its_error_ratios(isolated):
    """The verdict runs in the child; its error-to-bound ratios come back for --gdn-report and the gate's drift."""
    passed = isolated_check(MTP, verify(6))
    assert {c.kind for c in passed.comparisons} == {"output", "state"}
    assert all(0 <= c.ratio < 1 for c in passed.comparisons)
    failed = POOL.check(MTP, verify(5), "cpu", TIMEOUT)  # answers wrong: the failing comparison too
    assert failed.failure.kind == "OutputMismatch" and max(c.ratio for c in failed.comparisons) > 1


@dataclass
class Run:
    calls: int = 0
    crashed: list = field(default_factory=list)  # the cases that crashed, in order (the shrunk one last)
    completed_after_crash: int = 0  # calls that returned normally after the first crash


def test_crash_is_a_failure_hypothesis_shrinks(isolated):
    run, starts = Run(), isolated.stats.starts

    @settings(
        max_examples=100,
        derandomize=True,
        database=None,
        deadline=None,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
    )
    @given(cases(PRETRANSPOSE, "decode", BUDGETS["ci"]))
    def fuzz(case: Case) -> None:
        run.calls += 1
        try:
            isolated_check(PRETRANSPOSE, case)
        except KernelCrash:
            run.crashed.append(case)
            raise
        if run.crashed:
            run.completed_after_crash += 1

    began = time.perf_counter()
    with pytest.raises(KernelCrash) as info:  # raised in this process: pytest's process is alive
        fuzz()
    shrunk, restarts = run.crashed[-1], isolated.stats.starts - starts
    seconds = isolated.stats.start_seconds[-restarts:]
    print(
        f"\ncrash run: {run.calls} examples, {len(run.crashed)} crashed, {run.completed_after_crash} completed "
        f"after the first crash, {restarts} worker starts ({sum(seconds) / len(seconds):.2f} s each), "
        f"{time.perf_counter() - began:.1f} s; shrunk to {shrunk!r}"
    )
    assert all(any(c.padded) and c.HV > c.H for c in run.crashed), "only padded rows under GVA crash the stand-in"
    assert (shrunk.B, shrunk.padded, shrunk.H, shrunk.HV) == (1, (True,), 1, 2), (
        f"shrunk case not minimal (B=1, one padded row, H=1, HV=2): {shrunk!r}"
    )
    message = str(info.value)
    assert message.startswith(f"{shrunk!r}: ") and "signal SIGSEGV" in message, message
    assert "crashing_standin.py" in notes(info.value), f"the child's faulthandler stack is quoted: {message}"
    assert len(run.crashed) >= 2 and restarts >= len(run.crashed) - 1, "a restarted worker after each crash"
    # The shrinker's proof that HV=2 is minimal is a passing HV=1 candidate, run after the first crash.
    assert run.completed_after_crash > 0, "examples after the first crash still ran"


def test_exit_is_a_crash_and_the_next_case_runs(isolated):
    isolated_check(MTP, verify(1))
    pid = isolated.pid
    with pytest.raises(KernelCrash, match=r"killed the worker process in the kernel call \(exit code 139\)"):
        isolated_check(MTP, verify(2))
    assert not isolated.alive
    isolated_check(MTP, verify(6))  # a correct case passes in the restarted worker
    assert isolated.pid not in (None, pid)


def test_hang_is_bounded_by_the_timeout(isolated):
    isolated_check(MTP, verify(1))  # started: the timeout measures the call, not a start
    began = time.monotonic()
    with pytest.raises(KernelHang, match=f"did not return within {HANG_TIMEOUT:g} s") as info:
        isolated_check(MTP, verify(3), timeout=HANG_TIMEOUT)
    elapsed = time.monotonic() - began
    assert HANG_TIMEOUT <= elapsed < HANG_TIMEOUT + 3, f"KernelHang after {elapsed:.1f} s"
    assert "crashing_standin.py" in notes(info.value), "the hung child's stack is quoted"
    isolated_check(MTP, verify(1))


def test_poisoned_context_is_a_crash_and_a_restart_clears_it(isolated):
    # In one process the poison sticks: every later example fails (what isolation exists for).
    try:
        with pytest.raises(RejectedValidInput, match="illegal memory access"):
            check(MTP, verify(4), "cpu")
        with pytest.raises(RejectedValidInput, match="illegal memory access"):
            check(MTP, verify(1), "cpu")
    finally:
        standin._poisoned = False
    isolated_check(MTP, verify(1))
    pid = isolated.pid
    with pytest.raises(
        KernelCrash,
        match=r"poisoned the CUDA context in the kernel call \(RejectedValidInput: "
        r"RuntimeError: CUDA error: an illegal memory access",
    ):
        isolated_check(MTP, verify(4))
    isolated_check(MTP, verify(1))  # a fresh worker, a fresh context
    assert isolated.pid not in (None, pid)


def test_verdict_failure_comes_back_as_its_own_class(isolated):
    isolated_check(MTP, verify(1))
    pid = isolated.pid
    with pytest.raises(OutputMismatch) as remote:
        isolated_check(MTP, verify(5))
    with pytest.raises(OutputMismatch) as local:
        check(MTP, verify(5), "cpu")
    assert str(remote.value) == str(local.value)
    assert isolated.pid == pid, "a verdict failure keeps the worker"


def test_workers_are_cached_per_overrides_and_device(isolated):
    assert POOL.worker_for("cpu") is isolated
    assert POOL.worker_for("cuda") is not isolated  # not started: workers start on their first call
    with pytest.raises(ValueError, match="registry targets only"):
        isolated.check("not-a-target", verify(1))


class FreshWorkers(worker.Worker):
    """Worker, remembering the ones made (the attribution's must be fresh, blocking, and closed afterwards)."""

    made: list = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.made.append(self)


def reported(failure: Failure, monkeypatch) -> tuple[FailureRecord, list]:
    """The session's record of a distinct failure under --gdn-isolate (FuzzSession._reported), and the workers made
    for it."""
    monkeypatch.setattr(FreshWorkers, "made", [])
    monkeypatch.setattr(worker, "Worker", FreshWorkers)
    run = fuzz_session.FuzzSession("ci", BUDGETS["ci"], fuzz_session.Options(isolate=True, timeout=TIMEOUT))
    run.workers = POOL  # the session whose worker found it
    run._reported(TestRun("test_verify", MTP, "verify", time.monotonic(), None), failure)
    [record] = run.report.failures
    return record, FreshWorkers.made


def test_a_crash_in_the_kernel_call_is_attributed_to_it_and_reproduces_alone(isolated, monkeypatch):
    crash = POOL.check(MTP, verify(2), "cpu", TIMEOUT).failure
    assert crash.cause == "worker died in the kernel call (exit code N)", crash.cause
    record, made = reported(crash, monkeypatch)
    found = record.failure.attribution
    assert (found.phase, found.alone, found.alone_phase, found.after_previous) == (
        "kernel call",
        True,
        "kernel call",
        None,
    ), found
    assert record.failure.detail.endswith("crashed in the kernel call; reproduces alone with CUDA_LAUNCH_BLOCKING=1")
    assert [w.env.get("CUDA_LAUNCH_BLOCKING") for w in made] == ["1"], "one fresh blocking worker: it crashed alone"
    assert not any(w.alive for w in made) and isolated not in made


def test_a_crash_only_after_its_previous_case_names_that_case(isolated, monkeypatch):
    isolated_check(MTP, verify(7))  # answers right, and the next call in this worker segfaults
    crash = POOL.check(MTP, verify(1), "cpu", TIMEOUT).failure
    assert crash.kind == "KernelCrash" and crash.attribution == CrashAttribution("kernel call", verify(7))
    record, made = reported(crash, monkeypatch)
    found = record.failure.attribution
    assert (found.alone, found.after_previous, found.after_previous_phase, found.previous_crashed) == (
        False,
        True,
        "kernel call",
        False,
    ), found
    assert record.failure.detail.endswith(
        f"crashed in the kernel call; does not crash alone with CUDA_LAUNCH_BLOCKING=1; crashes in the kernel call "
        f"of the case after {verify(7)!r}"
    ), record.failure.detail
    assert record.reproduced_on_rerun is False
    assert [w.env.get("CUDA_LAUNCH_BLOCKING") for w in made] == ["1", "1"] and not any(w.alive for w in made)


def test_a_crash_attribution_survives_the_report_and_shows_in_the_campaign_table():
    case = verify(1)
    found = CrashAttribution(
        "tensors",
        verify(7),
        "flashinfer-bf16",
        alone=False,
        after_previous=True,
        after_previous_phase="kernel call",
        previous_crashed=True,
    )
    crash = KernelCrash(case, "flashinfer-mtp-fp32: the CUDA context was poisoned", cause="CUDA context poisoned")
    record = FailureRecord("t", MTP.name, Failure.from_exception(crash, "b", (), found), 1.0, 3)
    data = json.loads(json.dumps(record.to_json()))
    assert FailureRecord.from_json(data) == record
    line = (
        f"crashed in the tensors phase; does not crash alone with CUDA_LAUNCH_BLOCKING=1; the previous case "
        f"{verify(7)!r} on flashinfer-bf16 crashes in the kernel call when run first"
    )
    row = campaign_tables.FailureRow.from_json(data)  # the failure as the campaign's summary.json holds it
    assert data["attribution"]["summary"] == line and line in campaign_tables._note(row, None)
    del data["attribution"]  # a report written before crashes were attributed
    assert FailureRecord.from_json(data).failure.attribution is None
