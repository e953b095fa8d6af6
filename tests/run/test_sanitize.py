"""compute-sanitizer replay: reports are attributed to the case that caused them, and the child restarts after
an error (a stand-in sanitizer on CPU; the real one runs on the GPU hosts)."""

import sys
import time
from pathlib import Path

from fuzz.model.case import Case
from fuzz.run.sanitize import sanitize

FAKE = f"{sys.executable} {Path(__file__).resolve().parents[1] / 'fake_sanitizer.py'}"
STANDIN = {"flashinfer": "fuzz.standins.flashinfer_cpu"}
CLEAN = "decode-B1-T1-H1-HV2-K8-V16-pool2-pad0-fp32state-bf16in-i32-vk-decay_mild-seed{}-slots[1]"
DIRTY = "decode-B2-T1-H1-HV2-K8-V16-pool2-pad1-fp32state-bf16in-i32-vk-decay_mild-seed0-slots[1,-1]"


def test_errors_go_to_their_case_and_the_rest_still_runs(monkeypatch):
    cases = [Case.parse(c) for c in (CLEAN.format(0), DIRTY, CLEAN.format(1), CLEAN.format(2))]
    results = sanitize("flashinfer-pretranspose-fp32", cases, "cpu", STANDIN, executable=FAKE)
    assert [r.case for r in results] == [repr(c) for c in cases]
    assert [r.clean for r in results] == [True, False, True, True]
    assert results[0].outcome == "pass" and results[2].outcome == "pass"
    assert results[1].outcome == "died" and results[1].errors == 1
    assert "Invalid __global__ write" in results[1].report


def test_the_verdict_under_the_sanitizer_is_reported_with_the_case(monkeypatch):
    case = Case.parse(CLEAN.format(0))
    mutant = {"flashinfer": "tests.mutants:output_before_update"}
    [result] = sanitize("flashinfer-pretranspose-fp32", [case], "cpu", mutant, executable=FAKE)
    assert result.errors == 0
    assert result.outcome.startswith("OutputMismatch"), result.outcome


def _sanitizer_children() -> list[int]:
    """PIDs of live `fuzz.run.sanitize --child` processes running the crashing stand-in (Linux /proc)."""
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--child" in cmd and any(b"tests.crashing_standin" in c for c in cmd):
            pids.append(int(proc.name))
    return pids


def test_a_case_cut_off_by_the_time_budget_is_not_reported_and_its_process_is_killed(monkeypatch):
    """The crashing stand-in never returns at T=3: the budget ends the run, the finished case is reported, the hung
    one is neither passed nor failed, and no process of the run is left behind."""
    hang = Case.parse("verify-B1-T3-H1-HV1-K8-V16-pool1-pad0-fp32state-bf16in-i32-vk-decay_mild-seed0-slots[0]-nol2")
    already = set(_sanitizer_children())  # another run's, not ours
    start = time.monotonic()
    results = sanitize(
        "flashinfer-mtp-fp32",
        [Case.parse(CLEAN.format(0)), hang, Case.parse(CLEAN.format(1))],
        "cpu",
        {"flashinfer": "tests.crashing_standin"},
        timeout=20,
        executable=FAKE,
    )
    assert 20 <= time.monotonic() - start < 40
    assert [r.case for r in results] == [CLEAN.format(0)] and results[0].clean
    assert not set(_sanitizer_children()) - already
