"""scripts/gpu_campaign.py: a round killed while shrinking still reports, per (target, failure class), the smallest
failing case its live log holds, marked as not minimal."""
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from fuzz.generate.profiles import BUDGETS
from fuzz.run.session import FuzzSession
from fuzz.judge.verdict import NonFinite, StateMismatch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import gpu_campaign  # noqa: E402

BIG = "verify-B3-T2-H1-HV2-K8-V16-pool4-pad1-fp32state-bf16in-i32-vk-gate_mild-seed0-slots[1,2,-1]"
SMALL = "verify-B1-T2-H1-HV2-K8-V16-pool2-pad1-fp32state-bf16in-i32-vk-gate_mild-seed0-slots[-1]"
OTHER = "decode-B2-T1-H1-HV2-K8-V16-pool3-pad0-fp32state-bf16in-i32-vk-gate_mild-seed5-slots[1,2]"


def test_smallest_logged_case_per_target_and_class(tmp_path, monkeypatch):
    """The live log as the fuzz session writes it (FuzzSession.log_failure), read back by the campaign."""
    live = tmp_path / "live.log"
    monkeypatch.setenv("GDN_FUZZ_LIVE_LOG", str(live))
    session, target = FuzzSession("ci", BUDGETS["ci"], frozenset()), SimpleNamespace(name="t-a")
    for error in (StateMismatch(f"{BIG}: state[0]: error 5 > bound 0.1"),
                  StateMismatch(f"{SMALL}: state[0]: error 5 > bound 0.1"), NonFinite(f"{OTHER}: output[0] = nan")):
        session.log_failure(target, error)
    found = gpu_campaign.unfinished_shrinks(live, "fam round 0", 60)
    assert [(f["target"], f["kind"], f["case"]) for f in found] == [("t-a", "NonFinite", OTHER),
                                                                     ("t-a", "StateMismatch", SMALL)]
    assert all("not minimal" in f["message"] and "--shrink-seconds 60" in f["message"] for f in found)


def test_a_killed_round_without_logged_failures_says_so(tmp_path):
    [found] = gpu_campaign.unfinished_shrinks(tmp_path / "absent.log", "fam round 0", 60)
    assert "no failing example was logged" in found["message"]


def test_a_run_killed_after_its_first_test_leaves_that_tests_report(tmp_path):
    repo = Path(__file__).resolve().parent.parent
    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "pytest", "fuzz/test_decode.py", "-k", "sglang-packed or fla-recurrent",
           "--hypothesis-profile=ci", "--gdn-test-seconds=3", f"--gdn-report={report}",
           "-p", "tests.exit_after_first_test", "-q"]
    proc = subprocess.run(cmd, cwd=repo, env=dict(os.environ, PYTHONPATH=str(repo)), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    examples = {name: t["examples"] for name, t in json.loads(report.read_text())["targets"].items() if t["examples"]}
    assert len(examples) == 1 and sum(next(iter(examples.values())).values()) > 0, examples
