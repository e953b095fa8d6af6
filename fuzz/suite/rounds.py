"""The rounds engine: how one test of the suite spends its examples and its time, whatever a round runs.

A test runs in rounds (`run_rounds`). Each round is one Hypothesis run with its own seed, sized to the examples and
the seconds left (`round_size`: the time box over the cost per example so far, `first` examples before that cost is
known). Hypothesis stops generating soon after a round's first failure and shrinks what it found; the round's shrunk
failures are reported, and the next round carries on generating, raising only failures whose key (kind x dispatch
bucket x cause, fuzz.run.failure_key) no earlier round reported (`TestRun.raises`). So an easy early bug does not
hide the others, and each distinct failure is shrunk on its own. The loop ends when the examples are spent, when the
time box (or the profile's bound) is over, or after a round that drew nothing new (its search space is exhausted).

What a round runs is the caller's: a fuzz test's @given body (fuzz.suite.session) or the serving state machine
(fuzz.suite.serving). Both build their Hypothesis settings with `phases` and run them through `hypothesis_round`,
which turns what the run raised into its findings.

`TestRun` keeps the accounts every round reads: the time box, examples drawn and checked, first hits and hits per
failure key, the keys reported. The time box (--gdn-test-seconds) bounds a test's wall time: no round starts after
it, a round is sized to end by it, and past it no case or call is checked (`may_check`), except to shrink a failure of
the round for --gdn-shrink-seconds more.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field

import hypothesis
from hypothesis import settings

from fuzz.run.failure_key import FailureKey
from fuzz.run.report import FinishedTest, RunReport
from fuzz.run.result import Failure, failures_in
from fuzz.targets.base import Target


@dataclass
class TestRun:
    """The state of one test while its rounds run."""

    __test__ = False  # not a test class, whatever its name

    nodeid: str
    target: Target
    op: str
    started: float
    deadline: float | None  # end of the time box (monotonic)
    reported: dict = field(default_factory=dict)  # failure key -> FailureRecord, from earlier rounds
    first_hits: dict = field(default_factory=dict)  # failure key -> (seconds from start, examples before)
    hits: dict = field(default_factory=dict)  # failure key -> examples that hit it
    round_failed_at: float | None = None  # when the current round first failed
    drawn: int = 0  # examples drawn in generation (cached or checked; not shrink steps): the examples budget
    checked: int = 0  # of them, checked (not cached)
    seconds_checking: float = 0.0
    rounds: int = 0
    boxed: bool = False  # the time box (or the profile's bound) stopped it
    shrink_seconds: float = 120.0
    cap: float | None = None  # the profile's bound, where no time box is given (monotonic)
    box: float | None = None  # the time box in seconds (the run report's), where one is given
    bound: float | None = None  # the profile's bound in seconds (the run report's), where no time box is given

    @classmethod
    def start(
        cls,
        nodeid: str,
        target: Target,
        op: str,
        box: float | None = None,
        shrink_seconds: float = 120.0,
        bound: float | None = None,
        **more,
    ) -> TestRun:
        """`box`: the time box (--gdn-test-seconds); `bound`: the profile's bound, which counts only where no box is
        given."""
        now = time.monotonic()
        bound = None if box else bound
        return cls(
            nodeid,
            target,
            op,
            now,
            now + box if box else None,
            shrink_seconds=shrink_seconds,
            cap=now + bound if bound else None,
            box=box,
            bound=bound,
            **more,
        )

    def running(self, now: float) -> bool:
        """Before the end of its time box and of its profile's bound: another round may start."""
        return all(t is None or now < t for t in (self.deadline, self.cap))

    def may_check(self, now: float) -> bool:
        if self.cap is not None and now >= self.cap:
            self.boxed = True
            return False
        if self.deadline is None or now < self.deadline:
            return True
        self.boxed = True
        return self.round_failed_at is not None and now < self.round_failed_at + self.shrink_seconds

    @property
    def seconds_per_example(self) -> float | None:
        return self.seconds_checking / self.checked if self.checked else None

    def record_hit(self, key: FailureKey, at: float) -> None:
        """An example failed with `key` (`at`: when, monotonic)."""
        self.first_hits.setdefault(key, (at - self.started, self.checked))
        self.hits[key] = self.hits.get(key, 0) + 1

    def raises(self, key: FailureKey) -> bool:
        """Does a failure with this key fail the current Hypothesis run? Not when an earlier round reported it."""
        if key in self.reported:
            return False
        if self.round_failed_at is None:
            self.round_failed_at = time.monotonic()
        return True

    def new_round(self) -> None:
        self.rounds += 1
        self.round_failed_at = None

    def summary(self) -> FinishedTest:
        """The run report's record of the test (RunReport.tests)."""
        return FinishedTest(
            self.target.name,
            self.op,
            self.rounds,
            self.checked,
            round(time.monotonic() - self.started, 2),
            self.box,
            self.bound,
            self.boxed,
            tuple(self.reported),
        )


def round_size(test: TestRun, left: int, first: int) -> int:
    """Examples for a test's next round: what fits in the time left at its cost so far (`first` before that is
    known), at least one, at most `left`."""
    if test.deadline is None:
        return left
    per = test.seconds_per_example
    if per is None:
        return min(left, first)
    return max(1, min(left, int((test.deadline - time.monotonic()) / max(per, 1e-3))))


def seed_of(nodeid: str, profile: str) -> int:
    """A test's first round's seed, from its node id and profile (--hypothesis-seed replaces it): the same cases every
    run; each later round takes the next seed."""
    return int.from_bytes(hashlib.sha256(f"{profile}:{nodeid}".encode()).digest()[:4], "big")


def run_rounds(test: TestRun, examples: int, first: int, one_round, report: RunReport | None = None) -> list:
    """Run rounds of `one_round(size)` (one Hypothesis run of `size` examples, returning what it reports) until
    `examples` are drawn, the time is up or a round draws nothing new; record the test in `report`. Returns what the
    rounds returned, in order."""
    found = []
    while examples - test.drawn > 0 and test.running(time.monotonic()):
        drawn = test.drawn
        found += one_round(round_size(test, examples - test.drawn, first))
        if test.drawn == drawn:  # a round that drew nothing new (its search space is exhausted)
            break
    if not test.running(time.monotonic()) and test.drawn < examples:
        test.boxed = True  # the time, not the examples budget, ended it
    if report is not None:
        report.tests[test.nodeid] = test.summary()
    return found


def phases(base: settings, test: TestRun, shrink: bool, explain: bool = True) -> list:
    """The phases of the test's next round: the explicit examples and the database's in its first round only,
    shrinking unless turned off (--gdn-no-shrink), the explain phase unless `explain` is False."""
    replayed = (hypothesis.Phase.explicit, hypothesis.Phase.reuse)
    return [
        p
        for p in base.phases
        if (test.rounds == 0 or p not in replayed)
        and (explain or p is not hypothesis.Phase.explain)
        and (shrink or p is not hypothesis.Phase.shrink)
    ]


def hypothesis_round(test: TestRun, run) -> list[Failure]:
    """Start the test's next round and call `run()`, one Hypothesis run; the failures it raised (anything else it
    raises is re-raised)."""
    test.new_round()
    try:
        run()
    except Exception as error:  # findings are sorted out by the caller, anything else is re-raised
        found = failures_in(error)
        if not found:
            raise
        return found
    return []
