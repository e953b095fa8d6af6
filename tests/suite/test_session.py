"""Fuzz tests run in rounds (fuzz.suite.session, fuzz.suite.rounds): an early bug does not hide a later one, each
distinct failure (kind x dispatch bucket x cause) is shrunk and reported once, and the time box bounds a test's wall
time (no new example is drawn into a check after it, only a failure found in the last round may still shrink)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import torch

from fuzz.standins.flashinfer_cpu import FlashInferCPU
from tests.child_pytest import pytest_run

REPO = Path(__file__).resolve().parents[2]


class TwoBugs(FlashInferCPU):
    """Padded fp32 decode rows are left unwritten (found at once), and fp16 inputs are bit-cast as bf16 (found only
    in fp16 cases): two distinct failures of one test."""

    def pad_output(self, out, rows):
        pass

    def to_bf16(self, x):
        return x.view(torch.bfloat16) if x.dtype == torch.float16 else super().to_bf16(x)


two_bugs = TwoBugs()


def fuzz(*args, report: Path, timeout: float = 600) -> tuple[subprocess.CompletedProcess, dict, float]:
    began = time.monotonic()
    proc = pytest_run(
        "fuzz/test_decode.py", "--hypothesis-profile=ci", f"--gdn-report={report}", *args, timeout=timeout
    )
    return proc, json.loads(report.read_text()), time.monotonic() - began


def test_both_bugs_of_one_test_are_reported_each_shrunk(tmp_path):
    proc, report, _ = fuzz(
        "-k",
        "flashinfer-pretranspose",
        "--gdn-target",
        "flashinfer=tests.suite.test_session:two_bugs",
        report=tmp_path / "r.json",
    )
    assert proc.returncode == 1, proc.stdout
    by_kind = {}
    for f in report["failures"]:
        by_kind.setdefault(f["kind"], []).append(f)
    [unwritten] = by_kind.pop("UnwrittenOutput")  # one bug, one failure: the bucket is not the compile key
    assert "-pad1-" in unwritten["case"] and "-B1-" in unwritten["case"] and unwritten["minimal"]
    # the bit-cast: wrong values, and NaN where the l2norm no longer tames the garbage, each its own failure
    assert by_kind and set(by_kind) <= {"OutputMismatch", "StateMismatch", "NonFinite"}, report["failures"]
    for f in (f for fs in by_kind.values() for f in fs):
        assert "fp16in" in f["case"] and "-B1-" in f["case"] and "-pad0-" in f["case"] and f["minimal"], f
    test = report["tests"]["fuzz/test_decode.py::test_decode[flashinfer-pretranspose-fp32]"]
    assert test["rounds"] >= 2 and test["checked"] > 50, test  # generation went on after the first failure
    assert f"{len(report['failures'])} distinct failure(s)" in proc.stdout


def test_the_time_box_bounds_wall_time_and_stops_drawing(tmp_path):
    box = 6.0
    proc, report, wall = fuzz(
        "-k",
        "fla-recurrent and not loggates",
        f"--gdn-test-seconds={box}",
        "--gdn-examples=100000",
        report=tmp_path / "r.json",
    )
    assert proc.returncode == 0, proc.stdout
    [test] = report["tests"].values()
    assert test["boxed"], test
    assert test["seconds"] < box + 4, test  # the box plus at most one example and the round's few leftover draws
    drawn_after = [r for r in report["records"] if r["stage"] == "generate"]
    assert len(drawn_after) == test["checked"] > 0
    assert "stopped by its 6 s time box" in proc.stdout


def test_without_a_time_box_the_profile_bounds_a_test_without_resizing_its_rounds(monkeypatch):
    """A test given no --gdn-test-seconds used to run, and shrink, without bound (Profile.time_box)."""
    from fuzz.generate.profiles import PROFILES
    from fuzz.suite.options import Options
    from fuzz.suite.session import FuzzSession, fuzz_test
    from fuzz.targets.registry import TARGETS

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    session = FuzzSession("ci", PROFILES["ci"].budget, Options(bound_seconds=3.0, examples=2000))  # unbounded: minutes
    target = next(t for t in TARGETS if t.name == "fla-recurrent")
    began = time.monotonic()
    session.run_test("fuzz/test_decode.py::test_decode[fla-recurrent]", target, "decode", fuzz_test("decode"))
    [test] = session.report.tests.values()
    assert test.boxed and test.rounds == 1 and test.box is None, test  # one round: as without a bound
    assert test.checked < 2000 and time.monotonic() - began < 3.0 + 30, test  # past it: draws, no checks
    assert test.bound == 3.0


@pytest.mark.parametrize(
    ("box", "bound", "says"),
    [(None, 300.0, "(stopped by the profile's 300 s bound)"), (45.0, None, "(stopped by its 45 s time box)")],
)
def test_the_targets_table_names_what_stopped_a_test(box, bound, says):
    """A test stopped by its profile's bound once crashed the run's table (it formatted the absent time box)."""
    from fuzz.run.report import FinishedTest, RunReport, TargetRow

    report = RunReport("ci", "cpu")
    report.targets["fla-recurrent"] = TargetRow(unavailable=None, origin="installed", version="0.6.0")
    report.examples[("fla-recurrent", "decode")] = 2
    report.distinct[("fla-recurrent", "decode")].update({"a", "b"})
    report.tests["fuzz/test_decode.py::test_decode[fla-recurrent]"] = FinishedTest(
        "fla-recurrent", "decode", boxed=True, box=box, bound=bound
    )
    [line] = [ln for ln in report.summary_lines() if ln.lstrip().startswith("fla-recurrent ")]
    assert line.endswith(f"decode 2 (2 distinct) {says}"), line


def test_two_boxed_tests_of_one_operation_say_what_stopped_them_once():
    """test_prefill and test_large_pool_prefill both draw a target's prefill: the summary names the time box that
    stopped them once, not once per test (the H200 gate of 2026-12-04 printed it twice)."""
    from fuzz.run.report import FinishedTest, RunReport, TargetRow

    report = RunReport("h200", "cuda", targets={"t": TargetRow(unavailable=None, version="1", origin="installed")})
    report.examples[("t", "prefill")] = 3
    report.tests = {
        test: FinishedTest("t", "prefill", boxed=True, box=60.0)
        for test in ("test_prefill[t]", "test_large_pool_prefill[t]")
    }
    (line,) = [line for line in report.summary_lines() if line.strip().startswith("t ")]
    assert line.endswith("prefill 3 (0 distinct) (stopped by its 60 s time box)"), line


def test_each_option_is_one_row_that_pytest_registers_and_options_read_back():
    """--gdn-* options are declared once (fuzz.suite.options): the rows pytest registers are the fields Options reads,
    an alias sets its option, and a value out of its bound is one line."""
    import argparse

    from fuzz.generate.profiles import PROFILES
    from fuzz.suite.options import Options, register

    parser = argparse.ArgumentParser()
    parser.addoption = parser.add_argument  # a pytest option group's method

    def read(*argv: str) -> Options:
        parsed = parser.parse_args(argv)
        return Options.read(lambda name, default: getattr(parsed, name, default), PROFILES["ci"])

    register(parser)
    assert read() == Options(bound_seconds=300.0)  # the rows' defaults are the fields'; the bound is the profile's
    chosen = read("--gdn-unmask", "--gdn-target", "fla=a", "--gdn-target", "sglang=b", "--gdn-examples=5")
    assert (chosen.masks, chosen.targets, chosen.examples) == ("none", ("fla=a", "sglang=b"), 5)
    boxed = read("--gdn-no-shrink", "--gdn-test-seconds=9", "--gdn-report=run.json")
    assert (boxed.shrink, boxed.test_seconds, boxed.bound_seconds, boxed.report) == (False, 9.0, None, Path("run.json"))
    with pytest.raises(ValueError, match=r"^--gdn-shrink-seconds=-1: expected a number >= 0$"):
        read("--gdn-shrink-seconds=-1")
    with pytest.raises(ValueError, match=r"^--gdn-live-log=/nonexistent/x: no directory /nonexistent to write it in$"):
        read("--gdn-live-log=/nonexistent/x")


def test_the_rounds_engine_runs_the_round_its_plan_gives_it_and_hands_over_each_failure_key_once():
    """fuzz.suite.rounds owns the loop and each round (its seed, settings and Hypothesis run); a driver gives it a
    Plan, the body a round runs and what a round's new failures become. The first round reports the early bug, the
    next draws on and reports the later one, the rounds go on drawing until the examples are spent, and the same
    seed draws the same examples again."""
    from types import SimpleNamespace

    from hypothesis import HealthCheck, settings
    from hypothesis import strategies as st

    from fuzz.model.case import Case
    from fuzz.run.result import Failure
    from fuzz.suite.rounds import Plan, TestRun, run_rounds

    case = Case.parse("decode-B1-T1-H1-HV1-K8-V16-pool1-pad0-fp32state-bf16in-i32-vk-decay_mild-seed0-slots[0]")
    early, late = (Failure("OutputMismatch", case, "detail", cause, "t:decode") for cause in ("early", "late"))
    base = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))

    def rounds() -> tuple[list[str], list[int], TestRun]:
        test, drawn = TestRun.start("test_rounds[t]", SimpleNamespace(name="t"), "decode"), []

        def body(data, bug_every: int) -> None:
            drawn.append(x := data.draw(st.integers(0, 1000)))
            test.drawn += test.round_failed_at is None
            for failure, fails in ((early, True), (late, x % bug_every == 0)):
                if fails and test.raises(failure.key):
                    raise failure.exception()

        def found(failures, ran) -> list[str]:
            assert ran.deadline is None and ran.max_examples <= 60, ran  # the plan's settings, sized to what is left
            test.reported.update((f.key, f) for f in failures)
            return [f.cause for f in failures]

        plan = Plan(examples=60, first=10, found=found, body=body, args={"bug_every": 2}, seed=0, base=base)
        return run_rounds(test, plan), drawn, test

    reported, drawn, test = rounds()
    assert reported == ["early", "late"]
    assert test.rounds >= 3 and test.drawn >= 60, test  # a round after the late bug drew on to the budget
    assert rounds()[1] == drawn  # seeded: the same examples


def test_verify_renamed_keeps_its_case_stream():
    """fuzz/test_mtp_verify.py became fuzz/test_verify.py (one name for verify): its tests seed from the former node
    id, so the README's fuzz command draws the same verify cases as before; other tests keep their own."""
    from fuzz.suite.rounds import seed_of

    now, before = (
        "fuzz/test_verify.py::test_verify[flashinfer-bf16]",
        "fuzz/test_mtp_verify.py::test_mtp_verify[flashinfer-bf16]",
    )
    assert seed_of(now, "ci") == seed_of(before, "ci") != seed_of(now, "dev")
    assert seed_of("fuzz/test_decode.py::test_decode[flashinfer-bf16]", "ci") != seed_of(now, "ci")
