"""Pinned outputs: what the gate and the campaign render from fixed, fabricated run reports (tests/data/pinned/:
a baseline report as older runs wrote it, a candidate as today's, their JUnit XML; a campaign job's merged report and
killed run's live log, and a job that left only its workers' parts). A change of these outputs is a behaviour change;
`PIN_OUTPUTS=1` rewrites the pins (then review their diff)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from fuzz.cli import campaign, gate
from fuzz.cli.campaign_tables import Settings
from fuzz.cli.campaign_tables import markdown as campaign_markdown
from fuzz.cli.gate_report import markdown, write_html, write_junit
from fuzz.run.installation import Installation
from fuzz.suite.session import resumable

DATA = Path(__file__).resolve().parents[1] / "data" / "pinned"
PINS = DATA / "outputs"
OUT = Path("/pinned/out")  # where the gate's reports say they are
PNG = re.compile(r"data:image/png;base64,[A-Za-z0-9+/=]+")


def pinned(name: str, text: str) -> None:
    """`text` equals the pin `name` (PIN_OUTPUTS=1: becomes it)."""
    path = PINS / name
    if os.environ.get("PIN_OUTPUTS") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{name} changed (PIN_OUTPUTS=1 rewrites it)"


@pytest.fixture(scope="module")
def result() -> gate.Result:
    sides = [gate.Side(name, Installation(name, ""), {"flashinfer": f"fuzz.standins.{name}"}) for name in gate.SIDES]
    for s in sides:
        s.where.spec = f"/pinned/{s.name}"  # a path of no machine's
        s.returncode, s.seconds = 1, 12.5
        s.read(DATA / "gate")
    rows = gate.compare(*sides)
    plan = gate.Plan("ci", ("flashinfer",), "decode", 20, ("--gdn-isolate",))
    return gate.Result(
        sides,
        plan,
        rows,
        gate.drift(sides[0].report, sides[1].report),
        gate.shared_coordinates(sides[0].report, sides[1].report),
        OUT,
    )


def test_gate_classification(result):
    rows = [
        {
            "status": r.status,
            "note": r.note,
            "failing_side": r.failing_side,
            **{
                name: f
                and {
                    "test": f.test,
                    "kind": f.kind,
                    "cause": f.cause,
                    "detail": f.detail,
                    "variant": f.variant,
                    "case": f.coordinate,
                    "target": f.target,
                    "fuzz": f.fuzz,
                }
                for name, f in (("baseline", r.baseline), ("candidate", r.candidate))
            },
        }
        for r in result.rows
    ]
    drift = [
        {
            "target": d.target,
            "kind": d.kind,
            "judged": d.judged,
            "shared": d.shared,
            "change": d.change,
            "worst": d.worst(),
        }
        for d in result.drift
    ]
    sides = [{"name": s.name, "ran": sorted(s.ran), "versions": s.versions(result.plan)} for s in result.sides]
    pinned(
        "gate-values.json",
        json.dumps({"rows": rows, "drift": drift, "shared": result.shared, "sides": sides}, indent=1) + "\n",
    )


def test_gate_reports(result, tmp_path):
    pinned("gate-summary.md", markdown(result))
    write_junit(tmp_path / "gate.xml", result, markdown(result))
    pinned("gate.xml", (tmp_path / "gate.xml").read_text())
    write_html(tmp_path / "report.html", result)
    html = (tmp_path / "report.html").read_text()
    assert len(PNG.findall(html)) == 4  # the plots' pixels are matplotlib's: not pinned
    pinned("gate-report.html", PNG.sub("data:image/png;base64,PNG", html))


def test_campaign_summary():
    where = Installation("installed", "")
    runs = [
        campaign.job_result(campaign.Job(where, family, DATA / "campaign"), 61.04, code, killed, own)
        for family, code, killed, own in (("flashinfer-", -9, True, True), ("fla-", 1, False, False))
    ]
    pinned("campaign-summary.json", json.dumps(runs, indent=1) + "\n")
    settings = Settings("h200", 60.0, "none", "2", ("flashinfer-", "fla-"), ("-x",))
    pinned("campaign-summary.md", campaign_markdown(runs, settings))
    pinned("campaign-render-old.md", campaign_markdown(json.loads(json.dumps(runs)), settings, stored=False))
    assert campaign.exit_code(runs) == 3


def test_resumable():
    live = DATA / "campaign" / "installed-flashinfer-failures.jsonl"
    found = {
        f"{t} {op}": {str(k): repr(c) for k, c in resumable(live, t, op).items()}
        for t, op in (("flashinfer-mtp-fp32", "verify"), ("flashinfer-bf16", "decode"), ("", ""))
    }
    pinned("resumable.json", json.dumps(found, indent=1) + "\n")
