"""The kernel-upgrade gate (`gdn-fuzz gate`, fuzz.cli.gate). End to end on the CPU: each side is this interpreter or
a directory on PYTHONPATH, with the flashinfer family pointed at the CPU stand-in or at a mutant of it (a build that
stopped zeroing padded fp32 decode outputs); two targets and 20 examples per test keep each gate run short. Failure
classification and drift are checked on hand-built reports (tests/run/test_progress.py holds the progress display)."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import matplotlib.image
import pytest

from fuzz.cli import gate, gate_model
from fuzz.model.case import Case
from fuzz.run.installation import Installation
from fuzz.run.report import ExampleRecord, FailedTest, FailureRecord, RunReport
from fuzz.run.report import load as load_report
from fuzz.run.result import Failure

ROOT = Path(__file__).resolve().parents[2]
STANDIN = "flashinfer=fuzz.standins.flashinfer_cpu"
MUTANT = "flashinfer=tests.mutants:padded_output_not_zeroed"
BUG = ("fuzz/test_decode.py::test_decode[flashinfer-pretranspose-fp32]", "UnwrittenOutput")
CLEAN = "flashinfer-decode-kmajor"  # the mutant leaves it alone: every case it judges is shared


def run_gate(
    out, baseline_override, candidate_override, *more, baseline=sys.executable, candidate=sys.executable
) -> int:
    return gate.main(
        [
            "--baseline",
            baseline,
            "--candidate",
            str(candidate),
            "--families",
            "flashinfer",
            "-k",
            "(test_decode or test_corpus) and (pretranspose or kmajor)",
            "--baseline-override",
            baseline_override,
            "--candidate-override",
            candidate_override,
            "--examples",
            "20",
            "--parallel",
            "--out",
            str(out),
            *more,
        ]
    )


@dataclass
class Run:
    code: int
    out: Path
    printed: str
    step: Path  # the GitHub step summary it appended to


@pytest.fixture(scope="module")
def new_failure(tmp_path_factory) -> Run:
    """One gate run for the tests below: the stand-in against the mutant, the candidate an installation directory."""
    tmp = tmp_path_factory.mktemp("gate")
    site = tmp / "site"  # a candidate "installation" directory, put on PYTHONPATH
    site.mkdir()
    step = tmp / "step-summary.md"
    step.write_text("earlier step\n")
    printed = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(printed):
        patch.setenv("GITHUB_STEP_SUMMARY", str(step))
        code = run_gate(tmp / "out", STANDIN, MUTANT, "--markdown", str(tmp / "gate.md"), candidate=site)
    return Run(code, tmp / "out", printed.getvalue(), step)


def junit(out) -> dict:
    """JUnit testcase name -> (its status: the classname's last part, its testcase element)."""
    suite = ET.parse(out / "gate.xml").getroot()
    return {c.get("name"): (c.get("classname").rpartition(".")[2], c) for c in suite.iter("testcase")}


class Report(HTMLParser):
    """The HTML report's h1 text, its table cells per table, its images and its links."""

    def __init__(self, text: str):
        super().__init__()
        self.h1, self.tables, self.images, self.links, self._tag = "", [], {}, [], None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self._tag = tag if tag in ("h1", "td", "th") else self._tag
        if tag == "table":
            self.tables.append([])
        elif tag in ("td", "th"):
            self.tables[-1].append("")
        elif tag == "img":
            self.images[attrs["alt"]] = attrs["src"]
        elif tag == "a":
            self.links.append(attrs["href"])

    def handle_data(self, data):
        if self._tag == "h1":
            self.h1 += data
        elif self._tag in ("td", "th"):
            self.tables[-1][-1] += data

    def handle_endtag(self, tag):
        if tag in ("h1", "td", "th"):
            self._tag = None


def test_new_failure_fails_the_gate(new_failure):
    assert new_failure.code == 1
    [(status, case)] = [v for n, v in junit(new_failure.out).items() if n.startswith(" ".join(BUG))]
    assert status == "new" and case.find("failure").get("type") == BUG[1]
    assert junit(new_failure.out)["summary"][1].find("failure").get("message") == "1 new failures"
    # no terminal: one progress line per finished test, with its examples and distinct failures
    printed, at = new_failure.printed, r"\[\d+/\d+ \d:\d\d\]"  # [tests finished/selected elapsed]
    assert re.search(
        rf"^candidate {at} FAILED {re.escape(BUG[0])}: \d+ examples, 1 distinct failure$", printed, re.M
    ), printed
    assert re.search(
        rf"^baseline {at} PASSED fuzz/test_decode.py::test_decode\[{CLEAN}\]: \d+ examples$", printed, re.M
    ), printed


def test_its_script_reproduces_it(new_failure):
    [script] = (new_failure.out / "scripts").iterdir()
    coordinate = json.loads((new_failure.out / "candidate.json").read_text())["failures"][0]["case"]
    assert script.name == f"new-1-flashinfer-pretranspose-fp32-{BUG[1]}.py" and coordinate in script.read_text()
    [(_, case)] = [v for n, v in junit(new_failure.out).items() if n.startswith(" ".join(BUG))]
    assert coordinate in case.find("failure").text and str(script) in case.find("failure").text
    assert f"`scripts/{script.name}`" in (new_failure.out / "summary.md").read_text()
    assert f"scripts/{script.name}" in Report((new_failure.out / "report.html").read_text()).links
    run = subprocess.run(
        [sys.executable, str(script)],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 1, run.stdout + run.stderr  # reproduced, on the candidate's mutant module


def test_markdown_summary(new_failure):
    out = new_failure.out
    summary = (out / "summary.md").read_text()
    assert summary == (out.parent / "gate.md").read_text()
    assert new_failure.step.read_text() == f"earlier step\n{summary}\n"
    coordinate = json.loads((out / "candidate.json").read_text())["failures"][0]["case"]
    assert summary.startswith("## gdn-fuzz gate: ❌ FAIL: 1 new failure\n")
    assert "| fuzz failures | 1 | 0 | 0 | 0 |" in summary
    assert f"| `test_decode[flashinfer-pretranspose-fp32]` | {BUG[1]} | - | `{coordinate}` " in summary
    b, c, both = gate.shared_coordinates(*(load_report(out / f"{s}.json") for s in gate_model.SIDES))
    assert both >= 0.5 * max(b, c), (b, c, both)  # the clean target's cases are all shared
    assert f"{both} coordinates judged by both sides" in summary
    assert "flashinfer-pretranspose-fp32 (candidate)" in summary  # why that target shares fewer


def test_html_report(new_failure):
    report = Report((new_failure.out / "report.html").read_text())
    assert report.h1 == "gdn-fuzz gate: FAIL: 1 new failure"
    failures = next(t for t in report.tables if "reproduction" in t)
    assert failures[failures.index("new") + 1 :][:2] == ["test_decode[flashinfer-pretranspose-fp32]", BUG[1]]
    targets = next(t for t in report.tables if t[:3] == ["target", "baseline", "candidate"])
    names = targets[3::3]
    assert CLEAN in names and all(n.startswith("flashinfer-") for n in names)  # only the family asked for
    drift = next(t for t in report.tables if "change" in t)
    rows = [drift[i : i + 8] for i in range(8, len(drift), 8)]
    clean = [r[2].replace(" of ", " / ").split(" / ") for r in rows if r[0] == CLEAN]
    assert clean and all(len(set(n)) == 1 for n in clean), rows  # every case shared, for each kind
    assert all(r[7] == "1.00x" for r in rows if r[0] == CLEAN)
    assert set(report.images) == {
        "Baseline vs candidate, per shared coordinate",
        "Error-to-bound ratios per path (shared coordinates)",
        "Worst error over T x state dtype (shared coordinates)",
        "Dispatch-bucket coverage (all examples)",
    }
    for name, src in report.images.items():
        header, _, data = src.partition(",")
        assert header == "data:image/png;base64"
        height, width, _ = matplotlib.image.imread(io.BytesIO(base64.b64decode(data))).shape
        assert 200 < height < 2000 and 400 < width < 2000, name


def test_fixed_failure_passes(tmp_path, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    assert run_gate(tmp_path, MUTANT, STANDIN) == 0
    statuses = {name: status for name, (status, _) in junit(tmp_path).items()}
    assert [s for n, s in statuses.items() if n.startswith(" ".join(BUG))] == ["fixed"]
    assert junit(tmp_path)["summary"][1].find("failure") is None
    assert "## gdn-fuzz gate: ✅ PASS: no new failure" in (tmp_path / "summary.md").read_text()
    [script] = (tmp_path / "scripts").iterdir()  # reproduces on the baseline: made with its mutant module
    assert script.name.startswith("fixed-1-flashinfer-pretranspose-fp32-UnwrittenOutput")
    assert "tests.mutants:padded_output_not_zeroed" in script.read_text()


def test_a_side_that_does_not_run_is_an_error(tmp_path, capsys):
    assert run_gate(tmp_path, STANDIN, STANDIN, baseline="/bin/false", candidate="/bin/false") == 2
    assert "The baseline run failed (pytest exit 1) on `/bin/false`" in capsys.readouterr().err
    assert (tmp_path / "summary.md").read_text().startswith("## gdn-fuzz gate: ⚠️ NOT RUN")
    assert junit(tmp_path)["summary"][1].find("error").get("message") == "a side could not be run"


def test_installations(tmp_path, capsys):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    (venv / "bin" / "python").chmod(0o755)
    sides = [gate_model.Side(n, Installation(n, str(p))) for n, p in (("baseline", venv), ("candidate", tmp_path))]
    assert sides[0].where.python == str(venv / "bin" / "python") and not sides[0].where.env
    assert sides[1].where.env["PYTHONPATH"].split(os.pathsep)[0] == str(tmp_path)
    with pytest.raises(SystemExit) as exit:
        gate.main(["--baseline", str(tmp_path / "missing"), "--candidate", str(venv)])
    assert exit.value.code == 2 and "expected a python executable, a venv or a directory" in capsys.readouterr().err


# ---- failure classification, on hand-built reports ---------------------------------------------------------------

FUZZ = "fuzz/test_decode.py::test_decode[t-a]"
OTHER = "fuzz/test_decode.py::test_decode[t-b]"
CORPUS = "fuzz/test_corpus.py::test_corpus[t-a:t-a-decode-OutputMismatch-0]"
CASE = "decode-B1-T1-H1-HV2-K8-V16-pool1-pad1-fp32state-bf16in-i32-vk-decay_mild-seed0-slots[-1]"
CASE2 = "decode-B2-T1-H1-HV2-K8-V16-pool3-pad0-fp32state-bf16in-i32-vk-decay_mild-seed5-slots[1,2]"


def failure(kind, cause, case=CASE, test=FUZZ, bucket="t-a:decode") -> FailureRecord:
    return FailureRecord(
        test, test.rpartition("[")[2][:-1], Failure(kind, Case.parse(case), cause, cause, bucket), 1.0, 0
    )


def side(name, failures=(), errors=(), ran=(FUZZ, OTHER, CORPUS), records=()) -> gate_model.Side:
    report = RunReport("gate", "cpu", failures=list(failures), errors=list(errors), records=list(records))
    return gate_model.Side(name, Installation(name, sys.executable), report=report, ran=set(ran))


def classified(baseline: gate_model.Side, candidate: gate_model.Side) -> list[tuple]:
    return [
        (
            r.status,
            r.finding.test,
            r.finding.kind,
            r.baseline and r.baseline.coordinate,
            r.candidate and r.candidate.coordinate,
        )
        for r in gate.compare(baseline, candidate)
    ]


def test_failures_are_the_same_by_test_kind_variant_and_cause():
    base = side(
        "baseline",
        [
            failure("StateMismatch", "state error above the bound", CASE2),
            failure("UnwrittenOutput", "output rows still hold poison"),
            failure("OutputMismatch", "output error above the bound", test=OTHER),
        ],
    )
    cand = side(
        "candidate",
        [
            failure("StateMismatch", "state error above the bound"),  # shrank elsewhere: same
            failure("UnwrittenOutput", "output rows still hold poison", bucket="t-a:decode:wide"),
            failure("OutputMismatch", "output error above the bound", CASE2, test=OTHER),
        ],
    )
    assert classified(base, cand) == [
        ("new", FUZZ, "UnwrittenOutput", None, CASE),  # another kernel variant: another failure
        ("fixed", FUZZ, "UnwrittenOutput", CASE, None),
        ("unchanged", FUZZ, "StateMismatch", CASE2, CASE),
        ("unchanged", OTHER, "OutputMismatch", CASE, CASE2),
    ]


def test_a_reworded_error_on_the_same_minimal_case_is_unchanged():
    base = side("baseline", [failure("RejectedValidInput", "ValueError: bad stride N")])
    cand = side(
        "candidate",
        [
            failure("RejectedValidInput", "ValueError: stride N is not supported"),
            failure("RejectedValidInput", "RuntimeError: other", CASE2),
        ],
    )
    rows = gate.compare(base, cand)
    assert [(r.status, r.candidate.cause) for r in rows] == [
        ("new", "RuntimeError: other"),
        ("unchanged", "ValueError: stride N is not supported"),
    ]
    assert rows[1].note == "same minimal case; cause was: ValueError: bad stride N"


def test_a_failure_on_a_test_the_candidate_did_not_run_is_untested_not_fixed():
    base = side("baseline", [failure("OutputMismatch", "output error above the bound", test=OTHER)])
    assert classified(base, side("candidate", ran=(FUZZ, CORPUS))) == [
        ("untested", OTHER, "OutputMismatch", CASE, None)
    ]


def test_a_strict_xpass_is_the_absence_of_a_known_bug():
    xpass = FailedTest(CORPUS, "call", "[XPASS(strict)] the known bug")
    assert [r[0] for r in classified(side("baseline"), side("candidate", errors=[xpass]))] == ["fixed"]
    assert [r[0] for r in classified(side("baseline", errors=[xpass]), side("candidate"))] == ["new"]
    assert [r[0] for r in classified(side("baseline", errors=[xpass]), side("candidate", errors=[xpass]))] == [
        "unchanged"
    ]
    assert [r[0] for r in classified(side("baseline", errors=[xpass]), side("candidate", ran=()))] == ["untested"]


def test_a_corpus_replay_failure_and_a_fuzz_tests_own_failure_line():
    replay = FailedTest(
        CORPUS, "call", f"/x/fuzz/run/result.py:77: fuzz.judge.failures.OutputMismatch: {CASE}: output error 3.5"
    )
    own = FailedTest(FUZZ, "call", "/x/plugin.py:194: Failed: 1 distinct failure(s) of t-a decode")
    found = gate.findings(side("candidate", [failure("NonFinite", "output not finite")], [replay, own]).report)
    assert [(f.test, f.kind, f.fuzz) for f in found] == [(FUZZ, "NonFinite", True), (CORPUS, "OutputMismatch", False)]
    assert found[1].cause.startswith("decode-BN-TN-") and found[1].cause.endswith(": output error N")


# ---- numerics drift, on hand-built records -----------------------------------------------------------------------

C = {
    name: CASE.replace("-seed0-", f"-seed{seed}-")
    for seed, name in enumerate(("c1", "c2", "c3", "only-baseline", "only-candidate"), 1)
}  # name -> coordinate


def record(name, ratios, test=FUZZ, target="t-a") -> ExampleRecord:
    return ExampleRecord(test, target, "decode", Case.parse(C[name]), "b", "pass", "generate", ratios)


def test_drift_is_over_the_coordinates_both_sides_judged():
    base = side(
        "baseline",
        records=[
            record("c1", {"output": 0.1, "state": 0.2}),
            record("c2", {"output": 0.2}),
            record("only-baseline", {"output": 0.9}),
            record("c3", {"output": 0.0}),
        ],
    )
    cand = side(
        "candidate",
        records=[
            record("c1", {"output": 0.4}),
            record("c2", {"output": 0.2}),
            record("only-candidate", {"output": 50.0}),
            record("c3", {"output": 0.0005}),
            record("c1", {"output": 0.3}),
        ],
    )  # checked twice: its worst counts
    output, state = gate.drift(base.report, cand.report)
    assert (output.target, output.kind, output.judged) == ("t-a", "output", (4, 4))
    assert sorted(output.shared) == sorted([(C["c1"], 0.1, 0.4), (C["c2"], 0.2, 0.2), (C["c3"], 0.0, 0.0005)])
    assert output.stats(0) == (0.1, 0.2) and output.stats(1) == (0.2, 0.4)
    assert output.change == pytest.approx(2.0)  # ratio of medians
    assert output.worst() == [(C["c1"], 0.1, 0.4, pytest.approx(4.0))]  # c3 grew below the floor: not growth
    assert (state.kind, state.judged, state.shared, state.stats(1), state.change) == ("state", (1, 0), [], None, None)
    assert gate.shared_coordinates(base.report, cand.report) == (4, 4, 3)


# ---- before anything runs: sides whose comparison would mean nothing ------------------------------------------------
def test_a_family_asked_for_that_loads_on_neither_side_is_one_line_and_exit_2(tmp_path, capsys):
    """FlashInfer missing from both sides used to run 28 failing tests on each and PASS them as "unchanged"."""
    code = gate.main(
        [
            "--baseline",
            sys.executable,
            "--candidate",
            sys.executable,
            "--families",
            "flashinfer",
            "--out",
            str(tmp_path / "out"),
            "--baseline-override",
            "flashinfer=no.such.module",
            "--candidate-override",
            f"flashinfer={STANDIN.split('=', 1)[1]}",
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "flashinfer is unavailable on the baseline" in err, err
    assert not (tmp_path / "out").exists()  # nothing ran


def gate_fla(tmp_path, baseline: str, candidate: str) -> int:
    """gdn-fuzz gate's exit status for the fla family between these two sides."""
    argv = ["--baseline", baseline, "--candidate", candidate, "--families", "fla"]
    return gate.main([*argv, "--out", str(tmp_path / "out")])


def test_an_empty_directory_or_the_same_build_on_both_sides_is_one_line_and_exit_2(tmp_path, capsys):
    """An empty --baseline directory used to fall through to the venv's own libraries: a release against itself."""
    (tmp_path / "empty").mkdir()
    assert gate_fla(tmp_path, str(tmp_path / "empty"), sys.executable) == 2
    assert "holds none of fla (it holds: nothing)" in capsys.readouterr().err
    assert gate_fla(tmp_path, sys.executable, sys.executable) == 2
    err = capsys.readouterr().err
    assert "both sides load the same build (fla " in err and "--allow-same" in err, err


def test_without_matplotlib_the_gate_says_so_before_either_side_runs(tmp_path, capsys, monkeypatch):
    """It used to run both sides to the end, then die in a traceback (exit 1, a finding's status) with no summary."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    assert gate.main(["--baseline", sys.executable, "--candidate", sys.executable, "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.strip() == (
        "gdn-fuzz gate: error: its report needs matplotlib: pip install 'gdn-fuzz[gate]'"
    )
    assert not (tmp_path / "out").exists()


def test_a_new_failure_on_a_contract_edge_is_counted_apart_and_passes_the_gate(tmp_path):
    """An edge finding (fuzz.model.engines.EDGES) is no bug: the gate lists it and its count apart, and passes."""
    from fuzz.cli.gate_report import markdown, write_junit

    edge = failure("OutputMismatch", "output error above the bound", CASE2 + "-edge_slot_zero")
    rows = gate.compare(side("baseline"), side("candidate", [edge]))
    plan = gate.Plan("ci", ("flashinfer",))
    result = gate.Result([side("baseline"), side("candidate", [edge])], plan, rows, [], (0, 0, 0), tmp_path)
    assert [r.status for r in rows] == ["new"] and rows[0].finding.edge == "slot-zero"
    assert result.passed and not result.of("new") and result.of("new", edges=True) == rows
    text = markdown(result)
    assert text.startswith("## gdn-fuzz gate: ✅ PASS: no new failure\n"), text
    assert "| fuzz failures | 0 | 0 | 0 | 0 |" in text and "| contract edges (not bugs) | 1 | 0 | 0 | 0 |" in text
    assert "### Contract edges (not bugs; they never fail the gate)" in text
    write_junit(tmp_path / "gate.xml", result, "summary")
    assert ET.parse(tmp_path / "gate.xml").getroot().get("failures") == "0"


def test_a_second_gate_into_the_same_out_keeps_the_first_ones_results(tmp_path, capsys):
    """A second gate into the same --out (the default gate-out/) used to delete the first one's summary, JUnit, HTML
    report, scripts and logs: now they move aside, into OUT/gate-TIME, and the gate says so in one line."""
    (tmp_path / "notes.txt").write_text("mine")  # not the gate's: it stays where it is
    assert run_gate(tmp_path, STANDIN, STANDIN, baseline="/bin/false", candidate="/bin/false") == 2
    first = (tmp_path / "summary.md").read_text()
    capsys.readouterr()
    assert run_gate(tmp_path, STANDIN, STANDIN, baseline="/bin/false", candidate="/bin/false") == 2
    [aside] = tmp_path.glob("gate-*")
    assert (aside / "summary.md").read_text() == first
    assert {"gate.xml", "baseline.log", "candidate.log"} <= {p.name for p in aside.iterdir()}
    assert (tmp_path / "summary.md").exists() and (tmp_path / "notes.txt").read_text() == "mine"
    said = [line for line in capsys.readouterr().err.splitlines() if "earlier gate" in line]
    assert said == [f"gdn-fuzz gate: --out {tmp_path} held an earlier gate's results " + said[0].split("results ")[1]]
    assert said[0].endswith(f"moved them to {aside}")


def test_an_out_that_is_a_file_is_one_line_before_any_work(tmp_path, capsys):
    """It used to be a FileExistsError traceback with exit 1, the gate's own "new failure" status."""
    (out := tmp_path / "out").write_text("")
    with pytest.raises(SystemExit) as exit_:
        gate.main(["--baseline", sys.executable, "--candidate", sys.executable, "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and err == [
        f"gdn-fuzz gate: error: --out {out}: a file, not a directory (see gdn-fuzz gate --help)"
    ], err


def test_a_family_names_its_own_targets_only():
    """`--families sglang` selected SGLang's glue too: "sglang-" is a prefix of every sglang-glue target; a family now
    leaves out the targets of a family whose name extends its own, and `--families sglang-glue,vllm` gates the engines'
    glue alone (an SGLang or vLLM upgrade gated like a FlashInfer one)."""
    from fuzz.targets.registry import FAMILIES

    sglang = gate.Plan("ci", ("sglang",), known=tuple(FAMILIES))
    assert sglang.selection == "((sglang- and not sglang-glue-))"
    assert sglang.asked("sglang-packed") and not sglang.asked("sglang-glue-triton")
    engines = gate.Plan("ci", ("sglang-glue", "vllm"), "test_decode", known=tuple(FAMILIES))
    assert engines.selection == "(sglang-glue- or vllm-) and (test_decode)"
    assert engines.asked("sglang-glue-fi-sm90") and engines.asked("vllm-mtp") and not engines.asked("sglang-recurrent")
