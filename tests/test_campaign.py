"""`gdn-fuzz campaign` (fuzz.run.campaign): a run cut off while shrinking still reports, per (target, failure kind),
the smallest case its live log holds, marked not minimal; an argument TypeError is flagged as our adapter error; a
run killed after its first test leaves that test's report; a real campaign run on the CPU writes its table."""
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from fuzz.case import Case
from fuzz.generate.profiles import BUDGETS
from fuzz.judge.failures import NonFinite, StateMismatch
from fuzz.run import campaign, campaign_tables
from fuzz.run.result import Failure
from fuzz.run.session import FuzzSession, Options, logged_failures

BIG = "verify-B3-T2-H1-HV2-K8-V16-pool4-pad1-fp32state-bf16in-i32-vk-gate_mild-seed0-slots[1,2,-1]"
SMALL = "verify-B1-T2-H1-HV2-K8-V16-pool2-pad1-fp32state-bf16in-i32-vk-gate_mild-seed0-slots[-1]"
OTHER = "decode-B2-T1-H1-HV2-K8-V16-pool3-pad0-fp32state-bf16in-i32-vk-gate_mild-seed5-slots[1,2]"
REPO = Path(__file__).resolve().parent.parent


def failure(kind, coordinate, detail="state[0]: error 5 > bound 0.1"):
    return Failure.from_exception(kind(Case.parse(coordinate), detail), "t-a:verify")


def test_smallest_logged_case_per_target_and_kind(tmp_path):
    """The live log as the session writes it (--gdn-live-log), read back by the campaign."""
    live = tmp_path / "live.jsonl"
    session, target = FuzzSession("ci", BUDGETS["ci"], Options(live_log=live)), SimpleNamespace(name="t-a")
    for f in (failure(StateMismatch, BIG), failure(StateMismatch, SMALL), failure(NonFinite, OTHER, "output[0] = nan")):
        session._log(target, f)
    assert [(t, k, repr(c)) for t, k, c in logged_failures(live)] == [
        ("t-a", "StateMismatch", BIG), ("t-a", "StateMismatch", SMALL), ("t-a", "NonFinite", OTHER)]
    found = campaign.unfinished(live, reported={("t-a", "NonFinite")})
    assert [(f["target"], f["kind"], f["case"], f["minimal"]) for f in found] == [
        ("t-a", "StateMismatch", SMALL, False)]


def test_an_argument_type_error_is_flagged_as_ours():
    row = {"installation": "x", "family": "flashinfer-", "seconds": 1, "killed": False, "exit": 1, "errors": [],
           "examples": 3, "distinct": 3, "buckets": 1,
           "environment": {}, "targets": {}, "failures": [
               {"kind": "RejectedValidInput", "target": "flashinfer-bf16", "case": SMALL, "first_hit_seconds": 0.5,
                "hits": 3, "minimal": True, "test": "t", "detail": "TypeError: f() got an unexpected keyword argument "
                                                                     "'backend'"}]}
    text = campaign_tables.markdown([row], SimpleNamespace(profile="ci", test_seconds=5, masks="none", workers=1))
    assert "ADAPTER ERROR (ours)" in text and SMALL in text


def test_a_run_killed_after_its_first_test_leaves_that_tests_report(tmp_path):
    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "pytest", "fuzz/test_decode.py", "-k", "sglang-packed or fla-recurrent",
           "--hypothesis-profile=ci", "--gdn-test-seconds=3", f"--gdn-report={report}",
           "-p", "tests.exit_after_first_test", "-q"]
    proc = subprocess.run(cmd, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    examples = {name: t["examples"] for name, t in json.loads(report.read_text())["targets"].items() if t["examples"]}
    assert len(examples) == 1 and sum(next(iter(examples.values())).values()) > 0, examples


def test_a_campaign_on_a_mutant_tables_its_distinct_failures(tmp_path, capsys):
    out = tmp_path / "campaign"
    code = campaign.main(["flashinfer-pretranspose", "--profile", "ci", "--test-seconds", "8", "--out", str(out),
                          "--db-per-run", "--pytest", "--gdn-target",
                          "flashinfer=tests.mutants:padded_output_not_zeroed"])
    assert code == 1  # findings
    assert any((out / "installed-flashinfer-pretranspose-db").rglob("*")), "the run's own example database is empty"
    [result] = json.loads((out / "summary.json").read_text())
    kinds = {f["kind"] for f in result["failures"]}
    assert kinds == {"UnwrittenOutput"}, result["failures"]
    assert "| 1 | UnwrittenOutput | flashinfer-pretranspose-fp32 decode |" in (out / "summary.md").read_text()

    # rendered again from its summary.json, triaged against today's records: a mutant's bug is no known one
    capsys.readouterr()
    assert campaign.main(["--render", str(out / "summary.json"), "--profile", "ci"]) == 0
    assert "NEW (no known-bug record explains it)" in capsys.readouterr().out


def test_a_campaign_is_green_only_when_every_run_ran():
    ran = {"installation": "a", "family": "fla-", "exit": 0, "killed": False, "examples": 5, "failures": []}
    assert campaign.exit_code([ran]) == 0
    assert campaign.exit_code([ran, dict(ran, exit=1, failures=[{"kind": "StateMismatch"}])]) == 1
    assert campaign.exit_code([ran, dict(ran, exit=5, examples=0)]) == 3  # a run that ran nothing
    assert campaign.exit_code([dict(ran, exit=-9, killed=True, failures=[{"kind": "NonFinite"}])]) == 3


def test_render_of_something_else_is_one_clear_error(tmp_path, capsys):
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(SystemExit) as e:
        campaign.main(["--render", str(tmp_path / "x.json")])
    assert e.value.code == 2 and "not a campaign summary.json" in capsys.readouterr().err
