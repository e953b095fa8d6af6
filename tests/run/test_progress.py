"""Progress of the pytest runs gdn-fuzz starts: the plugin's event files (--gdn-events, fuzz.run.events) from a real
CPU fuzz run, plain and under pytest-xdist; the campaign's progress with -q among the user's pytest arguments; the
live table and the running line at 80 columns (fuzz.run.progress), from events written by hand."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from fuzz.cli import campaign
from fuzz.run import events, progress
from fuzz.run.events import Event, EventLog
from fuzz.run.progress import Progress, Watch
from fuzz.suite.live import LiveProgress

ROOT = Path(__file__).resolve().parents[2]
DECODE = "fuzz/test_decode.py::test_decode"


def fuzz_run(*args, tests: str = "fuzz/test_decode.py") -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            tests,
            "--hypothesis-profile=ci",
            "-q",
            "-p",
            "no:cacheprovider",
            "--gdn-examples=3",
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )


def read(base: Path) -> dict[str, list[Event]]:
    """File name -> its events, each line read back through Event.from_json."""
    return {
        p.name: [Event.from_json(json.loads(line)) for line in p.read_text().splitlines()] for p in events.files(base)
    }


def test_an_event_file_records_the_start_counts_and_finish_of_a_fuzz_run(tmp_path):
    base = tmp_path / "run-events.jsonl"
    proc = fuzz_run("-k", "sglang-recurrent", f"--gdn-events={base}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    [(name, written)] = read(base).items()
    assert name == base.name
    session, start, *counts, finish = written
    test = f"{DECODE}[sglang-recurrent]"
    assert (session.kind, session.tests) == ("session", 1)
    assert (start.kind, start.test, start.target, start.op) == ("start", test, "sglang-recurrent", "decode")
    assert counts and all(c.kind == "count" and c.test == test and 1 <= c.examples <= 3 for c in counts)
    assert all(b.at - a.at >= 0.9 for a, b in zip(counts, counts[1:])), counts  # about one a second, at most
    assert (finish.kind, finish.test, finish.outcome, finish.examples, finish.failures, finish.stop) == (
        "finish",
        test,
        "PASSED",
        3,
        0,
        "done",
    )
    assert finish.seconds > 0


def test_a_chain_test_starts_under_its_own_operation(tmp_path):
    """A verify -> commit chain is labelled a chain in the events (and so in campaign and gate progress), not a
    serving sequence."""
    base = tmp_path / "run-events.jsonl"
    proc = fuzz_run("-k", "sglang-glue-fi-sm90", "--gdn-examples=1", f"--gdn-events={base}", tests="fuzz/test_chain.py")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    [(_, written)] = read(base).items()
    start = next(e for e in written if e.kind == "start")
    assert (start.test, start.target, start.op) == (
        "fuzz/test_chain.py::test_chain[sglang-glue-fi-sm90]",
        "sglang-glue-fi-sm90",
        "chain",
    )


def test_each_xdist_worker_writes_its_own_event_file(tmp_path):
    base = tmp_path / "run-events.jsonl"
    proc = fuzz_run("-n", "2", "-k", "sglang-recurrent or sglang-packed", f"--gdn-events={base}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    written = read(base)
    assert written and all(re.fullmatch(r"run-events\.jsonl\.gw[01]", name) for name in written), written  # not
    finished = {e.test: e for es in written.values() for e in es if e.kind == "finish"}  # the controller's own
    assert set(finished) == {f"{DECODE}[sglang-recurrent]", f"{DECODE}[sglang-packed]"}
    assert all(e.outcome == "PASSED" and e.examples == 3 for e in finished.values())
    assert all(es[0].kind == "session" and es[0].tests == 2 for es in written.values())


def test_campaign_progress_survives_q_among_the_pytest_arguments(tmp_path, capsys):
    """The progress lines used to be parsed from pytest -v output: a -q from the user silenced them."""
    out = tmp_path / "campaign"
    argv = "sglang-recurrent --profile ci --test-seconds 60 --masks release".split()
    code = campaign.main([*argv, "--out", str(out), "--pytest", *"-q -k test_decode --gdn-examples=3".split()])
    printed = capsys.readouterr().out
    assert code == 0, printed
    line = rf"^installed-sglang-recurrent \[1/1 \d:\d\d\] PASSED {re.escape(DECODE)}\[sglang-recurrent\]: 3 examples$"
    assert re.search(line, printed, re.M), printed


# ---- the display, from events written by hand --------------------------------------------------------------------
class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture
def running():
    """A process that runs until the test ends: what a Watch watches."""
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait()


LONG = f"{DECODE}[flashinfer-pretranspose-fp32-bf16state-strided-pool-int64-shard12]"


def write(log: EventLog, kind: str, at: float, **fields) -> None:
    log.write(Event(kind, at, **fields))


def test_the_live_table_fits_80_columns_and_names_the_test_in_flight(tmp_path, running):
    watch = Watch.of("candidate", tmp_path)
    log = EventLog(watch.events)
    write(log, "session", 0.0, tests=11)  # an earlier run's, before the run began: not read
    assert watch.poll() == [] and watch.total is None
    watch.begin(running)
    write(log, "start", 100.0, test=f"{DECODE}[sglang-recurrent]", target="sglang-recurrent", op="decode")
    write(log, "finish", 101.0, test=f"{DECODE}[sglang-recurrent]", outcome="PASSED", examples=7, stop="done")
    write(log, "start", 102.0, test=LONG, target="flashinfer-pretranspose-fp32", op="decode")
    write(log, "count", 112.0, test=LONG, examples=120, failures=1)
    worker = EventLog(events.path_for(watch.events, "gw1"))  # an xdist worker's file
    write(worker, "start", 103.0, test=f"{DECODE}[fla-recurrent]", target="fla-recurrent", op="decode")
    [(finished, done)] = watch.poll()
    assert (finished.test, done, watch.total, watch.examples, watch.failures) == (
        f"{DECODE}[sglang-recurrent]",
        1,
        11,
        127,
        1,
    )
    shown = Terminal()
    with Progress([Watch.of("baseline", tmp_path / "none"), watch], shown) as live:
        screen = io.StringIO()
        Console(file=screen, width=80).print(live.table(80))
    lines = screen.getvalue().splitlines()
    assert max(map(len, lines)) <= 80, lines
    [flight] = [ln for ln in lines if "test_decode[flashinfer-" in ln]
    assert (
        flight.startswith("candidate: test_decode[flashinfer-")
        and "…" in flight
        and flight.endswith("shard12]: 120 examples, 12.0/s")
    ), flight  # the function and both ends of the parameter id
    assert any(ln.startswith("candidate: test_decode[fla-recurrent]: 0 examples") for ln in lines), lines
    assert any("waiting" in ln for ln in lines) and "\x1b[" in shown.getvalue()  # redrawn in place


def test_without_a_terminal_a_running_test_gets_a_line_of_its_own(tmp_path, running, monkeypatch):
    """Nothing used to be printed while a test ran: only its finish."""
    watch = Watch.of("baseline", tmp_path)
    log = EventLog(watch.events)
    watch.begin(running)
    write(log, "session", 100.0, tests=3)
    write(log, "start", 100.0, test=LONG, target="flashinfer-pretranspose-fp32", op="decode")
    write(log, "count", 104.0, test=LONG, examples=10)
    monkeypatch.setattr(progress, "PLAIN_EVERY", 0.0)
    stream = io.StringIO()
    Progress([watch], stream).update()
    [line] = stream.getvalue().splitlines()
    assert len(line) <= 80 and re.fullmatch(
        r"baseline \[0/3 0:00\] running test_decode\[flashinf\S*…\S*shard12\]: "
        r"10 examples, 2\.5/s",
        line,
    ), line
    write(log, "finish", 105.0, test=LONG, outcome="FAILED", examples=12, failures=2, stop="time box")
    stream.truncate(0)
    stream.seek(0)
    Progress([watch], stream).update()
    assert stream.getvalue() == f"baseline [1/3 0:00] FAILED {LONG}: 12 examples, 2 distinct failures\n"


class FuzzTarget:
    """What a HypoFuzz worker's Reporter sees of a HypoFuzz FuzzTarget: its node id, run_one and whether it failed."""

    def __init__(self, nodeid: str, fails_at: int | None = None):
        self.nodeid, self.fails_at, self.runs = nodeid, fails_at, 0

    def run_one(self) -> None:
        self.runs += 1

    @property
    def has_found_failure(self) -> bool:
        return self.fails_at is not None and self.runs >= self.fails_at


def test_a_hypofuzz_worker_reports_each_test_it_fuzzes_as_hypofuzz_switches_to_it(tmp_path, running, monkeypatch):
    """HypoFuzz's workers printed no progress: its loop runs the tests outside pytest's, so no test started, counted
    or finished (README said so). Each worker now writes its own events, which the launcher shows as a campaign's."""
    from fuzz.cli.hypofuzz import Reporter

    monkeypatch.setattr(events, "COUNT_INTERVAL", 0.0)
    watch = Watch.of("worker 0", tmp_path)
    watch.begin(running)
    reporter = Reporter(EventLog(watch.events), tests=2)
    passing, failing = FuzzTarget(f"{DECODE}[sglang-recurrent]"), FuzzTarget(LONG, fails_at=3)
    for target in (passing, failing, passing):  # HypoFuzz switches back and forth, batch by batch
        reporter.follow(target)
        for _ in range(5):
            target.run_one()
    assert (passing.runs, failing.runs) == (10, 5)
    [(finished, done)] = watch.poll()
    assert (finished.test, finished.outcome, finished.examples, finished.failures, done) == (LONG, "FAILED", 3, 1, 1)
    assert (watch.total, list(watch.running), watch.running[passing.nodeid].examples) == (2, [passing.nodeid], 10)
    stream = io.StringIO()
    monkeypatch.setattr(progress, "PLAIN_EVERY", 0.0)
    Progress([watch], stream).update()
    [line] = stream.getvalue().splitlines()
    assert re.fullmatch(
        r"worker 0 \[1/2 0:00\] running test_decode\[sglang-\S*current\]: 10 examples(, [\d.]+/s)?", line
    ), line  # a fast machine's rate (10000.7/s) leaves the 80 columns no room for the whole id: its middle gives way


# ---- the plain pytest run's own progress (fuzz.suite.live) -------------------------------------------------------
def test_a_plain_run_says_each_fuzz_test_it_finished_in_its_log(tmp_path):
    """The README's fuzz command printed pytest's dots alone, up to 300 s without a line inside a test."""
    proc = fuzz_run("-k", "sglang-recurrent")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert re.search(
        rf"^\[1/1 \d+:\d\d\] PASSED {re.escape(DECODE)}\[sglang-recurrent\]: 3 examples$", proc.stdout, re.M
    ), proc.stdout[-3000:]


def test_a_shrink_says_shrinking_with_its_distinct_cases():
    """A shrink in progress looked like a stall ('14 examples, 0.1/s' for 2 minutes)."""
    start = Event("start", 100.0, test=LONG, target="fla-recurrent", op="decode")
    count = Event("count", 240.0, test=LONG, examples=14, failures=1, distinct=12, phase="shrink")
    line = progress.in_flight("", LONG, progress.InFlight(start, count), 200)
    assert line.endswith(": 14 examples, 12 distinct, 0.1/s, shrinking"), line


class Reporter:
    """What LiveProgress uses of pytest's terminal reporter: what it was asked to write, in order."""

    isatty = True

    def __init__(self):
        self.written: list[str] = []

    def write(self, text, flush=False):
        self.written.append(text)

    def rewrite(self, line, erase=False):
        self.written.append("\r" + line)

    def write_line(self, line):
        self.written.append(line + "\n")

    def flush(self):
        pass


def test_on_a_terminal_a_fuzz_test_gets_a_live_line_kept_as_it_ends():
    live = LiveProgress(Reporter(), None)
    live.add(Event("session", 100.0, tests=2))
    live.add(Event("start", 100.0, test=f"{DECODE}[fla-recurrent]", target="fla-recurrent", op="decode"))
    live.add(Event("count", 101.0, test=f"{DECODE}[fla-recurrent]", examples=3, distinct=3, phase="generate"))
    live.add(Event("count", 104.0, test=f"{DECODE}[fla-recurrent]", examples=8, failures=1, phase="shrink"))
    live.pytest_runtest_logreport(SimpleNamespace(nodeid=f"{DECODE}[fla-recurrent]", when="call"))
    assert live.reporter.written == [
        "\n",
        "\r[0/2 0:00] test_decode[fla-recurrent]: 3 examples, 3 distinct, 3.0/s",
        "\r[0/2 0:00] test_decode[fla-recurrent]: 8 examples, 2.0/s, shrinking",
        "\n",
    ]
