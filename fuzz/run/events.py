"""The progress events of a pytest run (--gdn-events FILE.jsonl): one JSON line each, written by the process that runs
the tests and read by `gdn-fuzz campaign` and `gdn-fuzz gate` while the run goes (fuzz.run.progress).

Four kinds: `session` (the tests selected), `start` (a test begins: its node id, and for a fuzz test its target and
operation), `count` (a fuzz test's examples checked, distinct failure keys hit and distinct cases of its target and
operation so far, and its phase: generate, shrink once a round found a failure, final for Hypothesis's last replay; at
most one a second per test) and `finish` (its outcome as pytest -v words it, examples, distinct failures reported,
seconds, and what stopped a fuzz test: done, its time box or its profile's bound). Each line is written whole in
one append and flushed, so a reader never sees half a line except the one being written. Under pytest-xdist each
worker writes a file of its own, FILE.jsonl.gwN (no two processes append to one file); `files` lists what a run
wrote. The same events go to a listener in the process where one is given (the plain pytest run's live line:
fuzz.suite.live), with or without a file.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

Kind = Literal["session", "start", "count", "finish"]
KINDS = ("session", "start", "count", "finish")
Stop = Literal["done", "time box", "bound", ""]  # what ended a fuzz test (finish.stop); "" for other tests
COUNT_INTERVAL = 1.0  # seconds between two count events of one test


@dataclass(frozen=True)
class Event:
    kind: Kind
    at: float  # wall-clock time it was written (time.time())
    test: str = ""  # node id (not for `session`)
    tests: int = 0  # session: tests selected
    target: str = ""  # start: a fuzz test's target ("" for other tests)
    op: str = ""  # start: its operation
    examples: int = 0  # count, finish: examples checked
    failures: int = 0  # count: distinct failure keys hit; finish: distinct failures reported
    distinct: int = 0  # count: distinct cases of the test's target and operation checked
    phase: Literal["generate", "shrink", "final", ""] = ""  # count: what the fuzz test is doing
    outcome: str = ""  # finish: PASSED, FAILED, SKIPPED, ERROR, XFAIL or XPASS
    seconds: float = 0.0  # finish: the test's wall time
    stop: Stop = ""  # finish: what ended a fuzz test

    def to_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v or k in ("kind", "at")}

    @classmethod
    def from_json(cls, data: dict) -> Event:
        if data.get("kind") not in KINDS:
            raise ValueError(f"not a gdn-fuzz event: {data!r}")
        return cls(**data)


class EventLog:
    """Appends the events of this process to its file (where `path` is given) and hands each to `listener` (where
    one is given); `count` is throttled to one a second per test."""

    def __init__(self, path: Path | None, listener: Callable[[Event], None] | None = None):
        self.path, self.listener = path, listener
        self._counted: dict[str, float] = {}  # test -> when its last count was written (monotonic)

    def write(self, event: Event) -> None:
        if self.path is not None:
            with open(self.path, "a") as f:
                f.write(json.dumps(event.to_json()) + "\n")
        if self.listener is not None:
            self.listener(event)

    def emit(self, kind: Kind, **fields) -> None:
        self.write(Event(kind, round(time.time(), 3), **fields))

    def count(self, test: str, examples: int, failures: int, distinct: int = 0, phase: str = "") -> None:
        now = time.monotonic()
        if now - self._counted.get(test, -COUNT_INTERVAL) >= COUNT_INTERVAL:
            self._counted[test] = now
            self.emit("count", test=test, examples=examples, failures=failures, distinct=distinct, phase=phase)


def path_for(base: Path, worker: str | None) -> Path:
    """The file this process writes: FILE itself, or FILE.gwN in an xdist worker."""
    return base.with_name(f"{base.name}.{worker}") if worker else base


def files(base: Path) -> list[Path]:
    """The files a run given --gdn-events=base wrote (or is writing)."""
    return [p for p in (base, *sorted(base.parent.glob(f"{base.name}.gw*"))) if p.is_file()]


def clear(base: Path) -> None:
    """Remove the event files an earlier run left under this name."""
    for path in files(base):
        path.unlink()
