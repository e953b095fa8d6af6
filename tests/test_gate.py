"""The kernel-upgrade gate (`gdn-fuzz gate`, fuzz.cli.gate) end to end on the CPU: each side is this interpreter or a
directory on PYTHONPATH, with the flashinfer family pointed at the CPU stand-in or at a mutant of it (a build
that stopped zeroing padded fp32 decode outputs). One target and 20 examples per test keep each gate run short."""
from __future__ import annotations

import base64
import io
import json
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import matplotlib.image
import pytest

from fuzz.cli import gate

STANDIN = "flashinfer=fuzz.standins.flashinfer_cpu"
MUTANT = "flashinfer=tests.mutants:padded_output_not_zeroed"
BUG = ("fuzz/test_decode.py::test_decode[flashinfer-pretranspose-fp32]", "UnwrittenOutput")


def run_gate(out, baseline_override, candidate_override, baseline=sys.executable, candidate=sys.executable) -> int:
    return gate.main(["gate", "--baseline", baseline, "--candidate", str(candidate), "--families", "flashinfer",
                      "-k", "pretranspose", "--baseline-override", baseline_override,
                      "--candidate-override", candidate_override, "--examples", "20", "--parallel", "--out", str(out)])


def statuses(out) -> dict:
    """JUnit testcase name -> its status (the classname's last part), the summary's failure message."""
    suite = ET.parse(out / "gate.xml").getroot()
    cases = {c.get("name"): c.get("classname").rpartition(".")[2] for c in suite.iter("testcase")}
    summary = next(c for c in suite.iter("testcase") if c.get("name") == "summary").find("failure")
    return {**cases, "summary": None if summary is None else summary.get("message")}


class Report(HTMLParser):
    def __init__(self, text: str):
        super().__init__()
        self.h1, self.cells, self.images, self._tag = "", [], {}, None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self._tag = tag
        if tag == "img":
            attrs = dict(attrs)
            self.images[attrs["alt"]] = attrs["src"]

    def handle_data(self, data):
        if self._tag == "h1":
            self.h1 += data
        elif self._tag in ("td", "th"):
            self.cells.append(data)

    def handle_endtag(self, tag):
        self._tag = None


def test_new_failure_fails_the_gate(tmp_path, capsys):
    site = tmp_path / "site"  # a candidate "installation" directory, put on PYTHONPATH
    site.mkdir()
    (site / "candidate_build.py").write_text("from tests.mutants import padded_output_not_zeroed as api\n")
    out = tmp_path / "out"
    assert run_gate(out, STANDIN, "flashinfer=candidate_build:api", candidate=site) == 1

    assert f"new failures: 1\n    {BUG[0]} {BUG[1]}: decode-" in capsys.readouterr().out
    assert statuses(out)[" ".join(BUG)] == "new"
    assert statuses(out)["summary"] == "1 new failures"

    report = Report((out / "report.html").read_text())
    assert report.h1 == "gdn-fuzz gate: FAIL: new failures"
    row = report.cells.index(BUG[0])
    assert report.cells[row - 1: row + 3][:3] == ["new", *BUG] and report.cells[row + 3].startswith("decode-B")
    assert set(report.images) == {"Error-to-bound ratios per path", "Worst error over T x state dtype",
                                  "Dispatch-bucket coverage"}
    for name, src in report.images.items():
        header, _, data = src.partition(",")
        assert header == "data:image/png;base64"
        png = base64.b64decode(data)
        (tmp_path / f"{name}.png").write_bytes(png)  # to look at: pytest --basetemp=DIR
        height, width, _ = matplotlib.image.imread(io.BytesIO(png)).shape
        assert 200 < height < 2000 and 400 < width < 2000, name

    records = json.loads((out / "baseline.json").read_text())["records"]
    assert records and {"test", "target", "op", "case", "T", "state_dtype", "bucket", "ratios", "outcome",
                        "final"} == set(records[0])
    assert all(0 <= ratio <= 1 for r in records for ratio in r["ratios"].values())  # the stand-in passes


def test_same_installation_passes(tmp_path, capsys):
    assert run_gate(tmp_path, STANDIN, STANDIN) == 0
    assert "new failures: 0\n  fixed failures: 0" in capsys.readouterr().out
    # The stand-in runs where the corpus expects FlashInfer 0.7.4's H200 rejection, and rejects the HV=3 that FlashInfer
    # accepts: strict xfails that pass, on both sides.
    corpus = "fuzz/test_corpus.py::test_corpus[flashinfer-pretranspose-fp32:flashinfer-pretranspose-fp32-decode-{}]"
    assert statuses(tmp_path) == {corpus.format("RejectedValidInput-0") + " XPASS(strict)": "unchanged",
                                  corpus.format("AcceptedInvalidInput-0") + " XPASS(strict)": "unchanged",
                                  "summary": None}
    assert Report((tmp_path / "report.html").read_text()).h1 == "gdn-fuzz gate: PASS: no new failures"


def test_fixed_failure_passes(tmp_path):
    assert run_gate(tmp_path, MUTANT, STANDIN) == 0
    assert statuses(tmp_path)[" ".join(BUG)] == "fixed"
    assert statuses(tmp_path)["summary"] is None


def test_a_side_that_does_not_run_is_an_error(tmp_path, capsys):
    assert run_gate(tmp_path, STANDIN, STANDIN, baseline="/bin/false", candidate="/bin/false") == 2
    assert "the baseline run failed (pytest exit 1)" in capsys.readouterr().err


def test_installations(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    assert gate.Side("baseline", str(venv)).python == str(venv / "bin" / "python")
    assert gate.Side("candidate", str(tmp_path)).env["PYTHONPATH"].split(":")[0] == str(tmp_path)
    with pytest.raises(ValueError, match="not a python executable"):
        gate.Side("baseline", str(tmp_path / "missing"))
