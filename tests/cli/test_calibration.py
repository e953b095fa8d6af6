"""gdn-fuzz calibrate (fuzz.cli.calibrate): error / bound per target x output x dtype over the passing examples,
with a flag where the margin is thin and no known bug bears on the output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from fuzz.cli import calibrate as calibration
from fuzz.model.case import Case
from fuzz.run.report import ExampleRecord, RunReport, TargetRow

ROOT = Path(__file__).resolve().parents[2]


CASE = "decode-B1-T1-H1-HV1-K8-V8-pool1-pad0-fp32state-bf16in-i32-vk-decay_mild-seed0-slots[0]"


def _record(target, ratios, outcome="pass", case=CASE) -> ExampleRecord:
    return ExampleRecord("t", target, "decode", Case.parse(case), "b", outcome, "generate", ratios)


def report(records, version="0.7.4") -> RunReport:
    return RunReport(
        "ci",
        "cpu",
        targets={"flashinfer-pretranspose-fp32": TargetRow(version=version), "fla-recurrent": TargetRow(version=None)},
        records=records,
    )


def test_each_output_gets_its_percentile_its_largest_and_the_case_of_the_largest():
    records = [_record("fla-recurrent", {"output": r / 100, "state": 0.01}) for r in range(1, 101)]
    records.append(_record("fla-recurrent", {"output": 9.0}, outcome="OutputMismatch"))  # failures are not margin
    rows = {r.cell.output: r for r in calibration.rows(report(records))}
    assert rows["output"].examples == 100 and rows["output"].p99 == 0.99 and rows["output"].worst == 1.0
    assert rows["output"].unmodelled and not rows["state"].unmodelled  # 1.0 > MARGIN, and no record bears on fla
    assert rows["output"].worst_case.startswith("decode-B1")


def test_a_thin_margin_on_an_output_a_known_bug_of_the_release_shows_on_is_not_flagged():
    rows = calibration.rows(report([_record("flashinfer-pretranspose-fp32", {"output": 0.9})], version="0.6.11"))
    assert rows[0].bugs and not rows[0].unmodelled  # 0.6.11 still bit-casts fp16 inputs: a known OutputMismatch


def test_the_command_prints_the_table_and_refuses_a_file_that_is_not_a_report(tmp_path):
    good, bad = tmp_path / "run.json", tmp_path / "bad.json"
    good.write_text(json.dumps(report([_record("fla-recurrent", {"output": 0.2})]).to_json()))
    bad.write_text("{}")
    run = subprocess.run(
        [sys.executable, "-m", "fuzz", "calibrate", str(good)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0 and "| fla-recurrent | output | fp32 | bf16 | 1 | 0.200 | 0.200 |" in run.stdout
    refused = subprocess.run(
        [sys.executable, "-m", "fuzz", "calibrate", str(bad)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
