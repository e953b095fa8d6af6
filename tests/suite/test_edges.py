"""A failure on a contract edge (fuzz.model.engines.EDGES) is reported as one: its key carries the edge, the run
summary lists it under its own heading with the edge's contract text, and it does not fail the fuzz test unless
--gdn-edges fail."""

from __future__ import annotations

import json

from fuzz.model.case import Case
from fuzz.model.engines import EDGES
from fuzz.run.failure_key import FailureKey
from fuzz.run.report import FailureRecord, RunReport
from fuzz.run.result import Failure
from tests.child_pytest import pytest_run

CASE = Case.parse("decode-B2-T1-H1-HV1-K8-V8-pool4-pad1-fp32state-bf16in-i32-vk-decay_mild-seed3-slots[0,-1]")


def test_an_edge_case_keys_its_failure_apart():
    plain = Failure("OutputMismatch", CASE, "output[0]: ...", "output error above the bound", "t:decode")
    edge = Failure("OutputMismatch", CASE.replace(edge="slot-zero"), "output[0]: ...", plain.cause, "t:decode")
    assert plain.key != edge.key and edge.key.edge == "slot-zero" and not plain.key.edge
    assert edge.key.to_json() == "OutputMismatch | t:decode | output error above the bound | edge slot-zero"
    assert plain.key.to_json() == "OutputMismatch | t:decode | output error above the bound"  # as before edges
    for key in (plain.key, edge.key):
        assert FailureKey.from_json(key.to_json()) == key
    record = FailureRecord("test", "t", edge, 1.0, 3, minimal=True)
    assert FailureRecord.from_json(json.loads(json.dumps(record.to_json()))).failure.key == edge.key


def test_the_summary_lists_edges_under_their_own_heading():
    report = RunReport("ci", "cpu")
    plain = Failure("StateMismatch", CASE, "state[1]: ...", "state error above the bound", "t:decode")
    edge = Failure("OutputMismatch", CASE.replace(edge="slot-zero"), "output[0]: ...", "output error", "t:decode")
    for failure in (plain, edge):
        report.add_failure(FailureRecord("test", "t", failure, 1.0, 3, minimal=True))
    text = "\n".join(report.summary_lines())
    assert "1 distinct failure(s):\n    StateMismatch on t" in text
    assert "1 contract edge(s)" in text and f"slot-zero (sglang, vllm): {EDGES['slot-zero'].contract}" in text
    assert text.index("OutputMismatch on t") > text.index("contract edge(s)")


def _fuzz(tmp_path, *args, test="fuzz/test_decode.py"):
    report = tmp_path / "r.json"
    proc = pytest_run(
        test,
        "--hypothesis-profile=ci",
        "-p",
        "tests.engine_edges",
        "-k",
        "flashinfer-pretranspose-fp32",
        "--gdn-target",
        "flashinfer=tests.engine_edges:slot_zero_skipped",
        f"--gdn-report={report}",
        "-rA",
        *args,
    )
    return proc, json.loads(report.read_text())


def test_an_edge_finding_passes_the_test_and_is_listed_unless_edges_fail(tmp_path):
    """A kernel that skips requests named on the reserved slot fails only slot-zero edge cases: the test passes, the
    summary and the report say what was found; with --gdn-edges fail the same finding fails it."""
    proc, report = _fuzz(tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    found = report["failures"]  # the skipped row's output and its unwritten state: one failure each
    assert found and {f["kind"] for f in found} <= {"OutputMismatch", "StateMismatch"}, found
    assert all(f["key"].endswith(" | edge slot-zero") and f["case"].endswith("-edge_slot_zero") for f in found)
    assert "contract edge(s)" in proc.stdout and proc.stdout.count(EDGES["slot-zero"].contract) == 1
    proc, report = _fuzz(tmp_path, "--gdn-edges=fail")
    assert proc.returncode == 1 and "edge_slot_zero" in proc.stdout, proc.stdout[-3000:]


def test_a_serving_sequence_passes_on_an_edge_finding_unless_edges_fail(tmp_path):
    """The serving test failed on edge findings (the README's fuzz command went red on vLLM's accepted-count edges and
    SGLang's empty extends): it now passes on them as the fuzz tests do, and --gdn-edges fail fails it."""
    proc, report = _fuzz(tmp_path, test="fuzz/test_serving.py")
    assert proc.returncode == 0, proc.stdout[-3000:]
    found = report["failures"]
    assert found and all(f["key"].endswith(" | edge slot-zero") for f in found), found
    proc, report = _fuzz(tmp_path, "--gdn-edges=fail", test="fuzz/test_serving.py")
    assert proc.returncode == 1 and "edge_slot_zero" in proc.stdout, proc.stdout[-3000:]
