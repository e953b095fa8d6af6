"""The plain pytest run's progress (the README's fuzz command ran 16-27 minutes with pytest's dots alone, up to 300 s
without a line inside a test). From the same events campaign and gate read (fuzz.run.events), in the same words
(fuzz.run.progress): on a terminal a live line under the fuzz test in flight, rewritten in place as its counts come
(examples, distinct cases, examples per second, "shrinking" once a round found a failure: a shrink checks few examples
a second and must not look like a stall), kept as the test's last line when it ends; without a terminal (a CI log) a
line per finished fuzz test, and one every PLAIN_EVERY seconds per fuzz test still running.

Not in a pytest-xdist worker (its output does not reach the terminal: --gdn-events, `gdn-fuzz campaign` show such
runs), nor without pytest's terminal reporter. Writes bypass pytest's output capture, as its own live logging does."""

from __future__ import annotations

import os
import shutil
import time
from contextlib import nullcontext
from pathlib import Path

import pytest

from fuzz.run import progress
from fuzz.run.events import Event
from fuzz.run.progress import Progress, Watch, head, in_flight


class LiveProgress:
    """An EventLog listener, and the pytest hook that ends the live line before pytest writes the test's outcome."""

    def __init__(self, reporter, capture):
        self.reporter, self.capture = reporter, capture
        self.watch = Watch("", Path(os.devnull))  # fed in process (`add`), never polled from a file
        self.watch.started = time.monotonic()
        self.terminal = reporter.isatty
        self._shown: str | None = None  # the node id whose live line is on screen
        self._told: dict[str, float] = {}  # node id -> when a log line last said it runs (monotonic)

    @classmethod
    def of(cls, config: pytest.Config) -> LiveProgress | None:
        """The run's live progress, registered as a plugin; None where it shows none."""
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or hasattr(config, "workerinput"):
            return None
        live = cls(reporter, config.pluginmanager.get_plugin("capturemanager"))
        config.pluginmanager.register(live, "gdn_fuzz_live")
        return live

    def add(self, event: Event) -> None:
        """The EventLog's listener: one event of this process."""
        finished = self.watch.add(event)
        if finished and event.stop and not self.terminal:  # a fuzz or serving test's end, in a log
            self._write(Progress.line(self.watch, event, len(self.watch.finished)))
        if event.kind != "count" or (flight := self.watch.running.get(event.test)) is None:
            return
        if self.terminal:
            if self._shown is None:
                self._raw("\n")  # below the line pytest is writing
            self._shown = event.test
            width = shutil.get_terminal_size().columns - 1
            self._raw_rewrite(in_flight(f"{head(self.watch, len(self.watch.finished))} ", event.test, flight, width))
        elif time.monotonic() - self._told.setdefault(event.test, time.monotonic()) >= progress.PLAIN_EVERY:
            self._told[event.test] = time.monotonic()
            self._write(in_flight(f"{head(self.watch, len(self.watch.finished))} running ", event.test, flight, 120))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """The live line stays as the test's last count; pytest's outcome goes on the next line."""
        if self._shown == report.nodeid and report.when == "call":
            self._shown = None
            self._raw("\n")

    def _write(self, line: str) -> None:
        """`line` on a line of its own: after the file's dots (pytest ends their line where it wrote the file's
        path; under -q, where it wrote none, this does)."""
        with self._uncaptured():
            if not self.reporter.currentfspath:
                self.reporter.write("\n")
            self.reporter.write_line(line)

    def _raw(self, text: str) -> None:
        with self._uncaptured():
            self.reporter.write(text, flush=True)

    def _raw_rewrite(self, line: str) -> None:
        with self._uncaptured():
            self.reporter.rewrite(line, erase=True)
            self.reporter.flush()

    def _uncaptured(self):
        return self.capture.global_and_fixture_disabled() if self.capture else nullcontext()
