"""Live progress of the pytest runs `gdn-fuzz campaign` and `gdn-fuzz gate` start, read from the --gdn-events files
each run writes (fuzz.run.events), so it does not depend on pytest's verbosity (-q among the user's arguments). A plain
pytest run shows its own, from the same events and in the same words (fuzz.suite.live).

On a terminal a table redrawn in place (rich): each run's elapsed time, tests finished of selected, examples checked,
distinct failures, failed tests and state, then one line per test in flight with its examples and examples per
second, all within the terminal's width. Otherwise (a CI log, a pipe) lines: one per finished test, and one every
`PLAIN_EVERY` seconds per test still running.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from fuzz.run import events
from fuzz.run.events import Event

PLAIN_EVERY = 30.0  # seconds between two lines about one running test, without a terminal
FAILED = ("FAILED", "ERROR", "XPASS")


def events_file(out: Path, name: str) -> Path:
    """The --gdn-events file of a gate side or campaign job named `name`, in its output directory."""
    return out / f"{name}-events.jsonl"


class _Tail:
    """The complete lines a growing file gained since the last read (a line being written waits for its end)."""

    def __init__(self, path: Path):
        self.path, self.offset, self._rest = path, 0, b""

    def lines(self) -> list[str]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        data = self._rest + data
        cut = data.rfind(b"\n") + 1
        self._rest = data[cut:]
        return data[:cut].decode(errors="replace").splitlines()


@dataclass(frozen=True)
class InFlight:
    """A test started and not finished: its start event and its last count."""

    start: Event
    count: Event | None = None

    @property
    def examples(self) -> int:
        return self.count.examples if self.count else 0

    @property
    def failures(self) -> int:
        return self.count.failures if self.count else 0

    @property
    def shrinking(self) -> bool:
        return self.count is not None and self.count.phase == "shrink"

    @property
    def rate(self) -> float | None:
        """Examples per second since the test started, by the writer's clock."""
        seconds = self.count.at - self.start.at if self.count else 0.0
        return self.count.examples / seconds if seconds > 0 else None


@dataclass
class Watch:
    """One pytest run as its event files show it (FILE, and FILE.gwN under pytest-xdist)."""

    name: str
    events: Path
    proc: subprocess.Popen | None = None
    started: float | None = None
    ended: float | None = None
    total: int | None = None  # tests selected
    finished: dict = field(default_factory=dict)  # node id -> its finish Event, in finishing order
    running: dict = field(default_factory=dict)  # node id -> InFlight
    _tails: dict = field(default_factory=dict)

    @classmethod
    def of(cls, name: str, out: Path) -> Watch:
        return cls(name, events_file(out, name))

    def begin(self, proc: subprocess.Popen) -> None:
        self.proc, self.started = proc, time.monotonic()

    @property
    def exit(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def elapsed(self) -> float:
        return 0.0 if self.started is None else (self.ended or time.monotonic()) - self.started

    def poll(self) -> list[tuple[Event, int]]:
        """Read what the event files gained; return each test finished since, with the tests finished then."""
        if self.proc is None:  # not started: its files are an earlier run's, if any
            return []
        if self.exit is not None and self.ended is None:
            self.ended = time.monotonic()
        news = []
        for path in events.files(self.events):
            for line in self._tails.setdefault(path, _Tail(path)).lines():
                event = Event.from_json(json.loads(line))
                if self.add(event):
                    news.append((event, len(self.finished)))
        return news

    def add(self, event: Event) -> bool:
        """Take one event of the run into account; whether it is a test's finish."""
        if event.kind == "session":
            self.total = max(self.total or 0, event.tests)  # each xdist worker selects them all
        elif event.kind == "start":
            self.running[event.test] = InFlight(event)
        elif event.kind == "count" and event.test in self.running:
            self.running[event.test] = replace(self.running[event.test], count=event)
        elif event.kind == "finish":
            self.running.pop(event.test, None)
            self.finished[event.test] = event
            return True
        return False

    @property
    def examples(self) -> int:
        return sum(e.examples for e in self.finished.values()) + sum(f.examples for f in self.running.values())

    @property
    def failures(self) -> int:
        return sum(e.failures for e in self.finished.values()) + sum(f.failures for f in self.running.values())

    @property
    def failed_tests(self) -> int:
        return sum(e.outcome in FAILED for e in self.finished.values())


def short(nodeid: str, room: int | None = None) -> str:
    """The test function and its parameter id, without the path: 'test_decode[flashinfer-bf16]'. Past `room`
    characters the middle of the parameter id gives way to '…', so both of its ends stay; the function stays whole."""
    name = nodeid.rpartition("::")[2]
    if room is None or len(name) <= room:
        return name
    function, bracket, param = name.partition("[")
    keep = room - len(function) - 2  # of the parameter id and its "]", beside "[" and "…"
    if not bracket:
        return name
    return (
        f"{function}[…]" if keep < 4 else f"{function}[{param[: keep // 2]}…{param[len(param) - (keep - keep // 2) :]}"
    )


def in_flight(prefix: str, test: str, flight: InFlight, width: int) -> str:
    """'PREFIX test_decode[sglang-recurrent]: 120 examples, 96 distinct, 4.1/s, shrinking', the test's name shortened
    to fit `width`: a shrink checks few examples a second, and says so rather than look like a stall."""
    numbers = (
        f": {flight.examples} examples"
        + (f", {flight.count.distinct} distinct" if flight.count and flight.count.distinct else "")
        + (f", {flight.rate:.1f}/s" if flight.rate is not None else "")
        + (", shrinking" if flight.shrinking else "")
    )
    return f"{prefix}{short(test, width - len(prefix) - len(numbers))}{numbers}"


def head(watch: Watch, done: int) -> str:
    """'baseline [3/11 0:42]': the run, tests finished of selected, elapsed (a run of no name: the brackets alone)."""
    return f"{watch.name} [{done}/{watch.total or '?'} {_clock(watch.elapsed())}]".lstrip()


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60)}:{int(seconds % 60):02d}"


class Progress:
    """Live progress of pytest runs (gate sides, campaign jobs): a table on a terminal, lines otherwise."""

    def __init__(self, watches: Iterable[Watch], stream=None):
        self.watches, self.stream = list(watches), stream or sys.stdout
        self._live = None
        self._told: dict[tuple[str, str], float] = {}  # (run, test) -> when a line last said it runs (monotonic)
        if self.stream.isatty():
            try:
                from rich.console import Console
                from rich.live import Live
            except ImportError:  # without the gate extra: lines, as in a log
                pass
            else:
                self._live = Live(console=Console(file=self.stream), auto_refresh=False, redirect_stderr=False)

    def __enter__(self) -> Progress:
        if self._live is not None:
            self._live.start()
        return self

    def __exit__(self, *exc) -> None:
        self.update()
        if self._live is not None:
            self._live.stop()

    def until(self, done: Callable[[], bool], interval: float = 0.5) -> None:
        while not done():
            self.update()
            time.sleep(interval)

    def update(self) -> None:
        now = time.monotonic()
        for watch in self.watches:
            for event, done in watch.poll():
                if self._live is None and event.outcome != "SKIPPED":  # a skip is an unavailable target: no news
                    print(self.line(watch, event, done), file=self.stream, flush=True)
            for test, flight in watch.running.items() if self._live is None else ():
                if now - self._told.setdefault((watch.name, test), now) >= PLAIN_EVERY:
                    self._told[watch.name, test] = now
                    print(
                        in_flight(f"{head(watch, len(watch.finished))} running ", test, flight, 80),
                        file=self.stream,
                        flush=True,
                    )
        if self._live is not None:
            self._live.update(self.table(self._live.console.width), refresh=True)

    @staticmethod
    def line(watch: Watch, event: Event, done: int) -> str:
        """'baseline [3/11 0:42] PASSED fuzz/test_decode.py::test_decode[flashinfer-bf16]: 168 examples'."""
        found = f": {event.examples} examples" if event.stop else ""  # a fuzz or serving test
        if event.failures:
            found += f", {event.failures} distinct failure{'s' if event.failures > 1 else ''}"
        return f"{head(watch, done)} {event.outcome} {event.test}{found}"

    def table(self, width: int):
        """The runs' table, then a line per test in flight; nothing wider than `width`."""
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        table = Table(box=None, header_style="bold", pad_edge=False, width=width)
        widths = {"tests": 16}  # "━━━━━━━━━━ 12/345"
        for column in ("run", "elapsed", "tests", "examples", "failures", "failed", "state"):
            table.add_column(
                column,
                justify="left" if column in ("run", "tests", "state") else "right",
                no_wrap=True,
                overflow="ellipsis",
                min_width=max(len(column), widths.get(column, 0)),
            )
        flights = []
        for w in self.watches:
            if w.started is None:
                table.add_row(w.name, "-", "", "", "", "", "waiting")
                continue
            done, total = len(w.finished), w.total
            state = f"exit {w.exit}" if w.exit is not None else "[dim]collecting[/]" if total is None else "running"
            bar = _bar(done / total) + " " if total else ""
            table.add_row(
                w.name,
                _clock(w.elapsed()),
                f"{bar}{done}/{total or '?'}",
                str(w.examples),
                f"[red]{w.failures}[/]" if w.failures else "0",
                f"[red]{w.failed_tests}[/]" if w.failed_tests else "0",
                state,
            )
            flights += [
                Text(in_flight(f"{w.name}: ", test, flight, width), no_wrap=True, overflow="ellipsis")
                for test, flight in w.running.items()
            ]
        return Group(table, *flights)


def _bar(fraction: float, width: int = 10) -> str:
    full = round(max(0.0, min(fraction, 1.0)) * width)
    return f"[green]{'━' * full}[/][dim]{'━' * (width - full)}[/]"
