"""The rounds engine: how one test of the suite spends its examples and its time, whatever a round runs.

A test runs in rounds (`run_rounds`). Each round is one Hypothesis run with its own seed, sized to the examples and
the seconds left (`round_size`: the time box over the cost per example so far, `Plan.first` examples before that cost
is known). Hypothesis stops generating soon after a round's first failure and shrinks what it found; the round's
shrunk failures are reported, and the next round carries on generating, raising only failures whose key (kind x
dispatch bucket x cause, fuzz.run.failure_key) no earlier round reported (`TestRun.raises`). So an easy early bug does
not hide the others, and each distinct failure is shrunk on its own. The loop ends when the examples are spent, when
the time box (or the profile's bound) is over, or after a round that drew nothing new (its search space is exhausted).

What a round runs is its driver's, given once as a `Plan`: a fuzz test's body (fuzz.suite.session) or the serving
state machine (fuzz.suite.serving), and what the test makes of a round's new failures. The engine does the rest: it
builds each round's settings and seed, runs Hypothesis, and sorts what the run raised into findings.

Before its first round a test may check a fixed list of cases (`Plan.planned`: a fuzz test's threshold plan, cases on
both sides of its release's dispatch thresholds), each recorded under the stage "plan", its failures shrunk outside
Hypothesis and reported like the rounds' (`Plan.settle`), so a failure there is found in a test's first seconds. The
example database's stored failures come before the plan still: a test with a plan first runs a round that only
replays them (`_replay`), as the first round of a test without one does.

`TestRun` keeps the accounts every round reads: the time box, examples drawn and checked, first hits and hits per
failure key, the keys reported, and the run report they go to. The time box (--gdn-test-seconds) bounds a test's wall
time: no round starts after it, a round is sized to end by it, and past it no case or call is checked (`may_check`),
except to shrink a failure of the round for --gdn-shrink-seconds more.
"""

from __future__ import annotations

import hashlib
import math
import time
import unittest
from collections.abc import Callable
from dataclasses import dataclass, field

import hypothesis
from hypothesis import given, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import run_state_machine_as_test

from fuzz.run.failure_key import FailureKey
from fuzz.run.report import FailureRecord, FinishedTest, RunReport
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
    planning: bool = False  # checking the planned cases, before the first round (the report's stage "plan")
    drawn: int = 0  # examples drawn in generation (cached or checked; not shrink steps): the examples budget
    checked: int = 0  # of them, checked (not cached), and the planned cases checked before them
    seconds_checking: float = 0.0
    rounds: int = 0  # Hypothesis runs that drew (generation rounds)
    replayed: bool = False  # a round that only replayed the example database ran first (`_replay`)
    boxed: bool = False  # the time box (or the profile's bound) stopped it
    shrink_seconds: float = 120.0
    cap: float | None = None  # the profile's bound, where no time box is given (monotonic)
    box: float | None = None  # the time box in seconds (the run report's), where one is given
    bound: float | None = None  # the profile's bound in seconds (the run report's), where no time box is given
    report: RunReport | None = None  # where its failures and, at the end, its summary go

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

    def new_round(self, replay: bool = False) -> None:
        """A Hypothesis run starts: a generation round, or (`replay`) the replay of the example database."""
        if replay:
            self.replayed = True
        else:
            self.rounds += 1
        self.round_failed_at = None

    def failure_record(self, failure: Failure, minimal: bool, reproduced: bool | None = None) -> FailureRecord:
        """The run report's record of a distinct failure of this test: when it was first hit, and how often."""
        seconds, before = self.first_hits.get(failure.key, (time.monotonic() - self.started, self.checked))
        return FailureRecord(
            self.nodeid,
            self.target.name,
            failure,
            seconds,
            before,
            self.hits.get(failure.key, 1),
            minimal=minimal,
            reproduced_on_rerun=reproduced,
        )

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


@dataclass(frozen=True)
class Plan:
    """What each round of a test runs, from its driver: one Hypothesis run of `body` (a test body taking `data` and
    `args`, run as a @given test) or of `machine` (a rule-based state machine of at most `steps` steps per example),
    and `found(failures, ran)`, what the test makes of the new distinct failures a round raised (the first raise of
    each key no earlier round reported, in order) given the settings it `ran` under; the rounds return what it
    returns."""

    examples: int  # the test's budget of examples drawn in generation (a serving test's: sequences)
    first: int  # examples in a time-boxed test's first round, before its cost per example is known
    found: Callable[[list[Failure], settings], list]
    body: Callable | None = None
    args: dict = field(default_factory=dict)
    machine: type | None = None
    steps: int | None = None
    seed: int | None = None  # the first round's seed; each later round takes the next (None: unseeded)
    base: settings | None = None  # the settings each round narrows (None: the active profile's)
    shrink: bool = True  # False: no shrink phase (--gdn-no-shrink)
    explain: bool = True  # False: no explain phase
    # Cases checked before the first round, in order (a fuzz test's threshold plan: fuzz.generate.threshold_plan), by
    # `settle`: it checks one as the body would and makes what `found` makes of a new failure of it, shrunk outside
    # Hypothesis (fuzz.run.reduce); the rounds return that too.
    planned: tuple = ()
    settle: Callable[[object], list] | None = None


def run_rounds(test: TestRun, plan: Plan) -> list:
    """Run rounds of the plan until its examples are drawn, the time is up or a round draws nothing new; record the
    test in its report. Returns what the plan found in the rounds' failures, in order."""
    # Hypothesis's pytest plugin gives each parametrized test its own database key the same way.
    (plan.body or plan.machine)._hypothesis_internal_add_digest = test.nodeid.encode()
    base = plan.base or settings.default
    found = []
    if plan.planned and base.database is not None and hypothesis.Phase.reuse in base.phases:
        found = _replay(test, plan, base)
    found += _planned(test, plan)
    while plan.examples - test.drawn > 0 and test.running(time.monotonic()):
        drawn = test.drawn
        examples = round_size(test, plan.examples - test.drawn, plan.first)
        round_seed = None if plan.seed is None else plan.seed + test.rounds
        found += _round(test, plan, settings(base, max_examples=examples), round_seed)
        if test.drawn == drawn:  # a round that drew nothing new (its search space is exhausted)
            break
    if not test.running(time.monotonic()) and test.drawn < plan.examples:
        test.boxed = True  # the time, not the examples budget, ended it
    if test.report is not None:
        test.report.tests[test.nodeid] = test.summary()
    return found


def _round(test: TestRun, plan: Plan, narrowed: settings, round_seed: int | None, replay: bool = False) -> list:
    """One Hypothesis run of the plan under the base settings `narrowed` (its examples), in the phases of the test's
    next round (only replaying ones where `replay`); what the plan made of the new distinct failures it raised."""
    chosen = phases(narrowed, test, plan.shrink, plan.explain)
    ran = settings(
        narrowed,
        phases=[p for p in chosen if not replay or p not in DRAWING],
        **({} if plan.machine is None else {"stateful_step_count": plan.steps}),
    )
    test.new_round(replay)
    raised = []
    try:
        if plan.machine is None:  # settings outermost: @seed applied last would turn the example database off
            ran(_seeded(given(data=st.data())(plan.body), round_seed))(**plan.args)
        else:
            run_state_machine_as_test(_seeded(plan.machine, round_seed), settings=ran)
    except unittest.SkipTest:  # Hypothesis ran no example: only where the replay found nothing stored
        if not replay:
            raise
    except Exception as error:  # findings are sorted out here, anything else is re-raised
        if not (raised := failures_in(error)):
            raise
    new: dict[FailureKey, Failure] = {}  # the first raise of each key no earlier round reported
    for failure in raised:
        if failure.key not in test.reported:
            new.setdefault(failure.key, failure)
    return plan.found(list(new.values()), ran)


DRAWING = (hypothesis.Phase.generate, hypothesis.Phase.target)


def _replay(test: TestRun, plan: Plan, base: settings) -> list:
    """A round that only replays what the example database holds for the test (shrinking what still fails), before
    the planned cases: a stored failure is checked first, as in a test without a plan. It replays as many stored cases
    as the first round would have (Hypothesis's tenth of the round's examples, at least 2) and draws nothing."""
    first = round_size(test, plan.examples, plan.first)
    return _round(test, plan, settings(base, max_examples=max(2, math.ceil(first / 10))), None, replay=True)


def _planned(test: TestRun, plan: Plan) -> list:
    """The planned phase: each planned case in order, while the time box lasts, settled under the stage "plan" (its
    checks count as the test's, so a failure's first hit there is its first seconds and examples); what the settling
    found. It draws nothing: the rounds after it draw what they would without it."""
    found = []
    for case in plan.planned:
        if not test.running(time.monotonic()):
            break
        test.planning = True
        try:
            found += plan.settle(case)
        finally:
            test.planning, test.round_failed_at = False, None
    return found


def _seeded(test, round_seed: int | None):
    return test if round_seed is None else seed(round_seed)(test)


def round_size(test: TestRun, left: int, first: int) -> int:
    """Examples for a test's next round: what fits in the time left at its cost so far (`first` before that is
    known), at least one, at most `left`."""
    if test.deadline is None:
        return left
    per = test.seconds_per_example
    if per is None:
        return min(left, first)
    return max(1, min(left, int((test.deadline - time.monotonic()) / max(per, 1e-3))))


# A renamed fuzz test keeps its case stream: its seed comes from the node id it had (verify's file was
# fuzz/test_mtp_verify.py until 2026-12-06).
FORMER_NAMES = (("fuzz/test_verify.py::test_verify[", "fuzz/test_mtp_verify.py::test_mtp_verify["),)


def seed_of(nodeid: str, profile: str) -> int:
    """A test's first round's seed, from its node id (its former one if renamed) and profile (--hypothesis-seed
    replaces it): the same cases every run; each later round takes the next seed."""
    for name, former in FORMER_NAMES:
        if nodeid.startswith(name):
            nodeid = former + nodeid[len(name) :]
    return int.from_bytes(hashlib.sha256(f"{profile}:{nodeid}".encode()).digest()[:4], "big")


def phases(base: settings, test: TestRun, shrink: bool, explain: bool = True) -> list:
    """The phases of the test's next round: the explicit examples and the database's in its first Hypothesis run
    only (a replay round's, else the first round's), shrinking unless turned off (--gdn-no-shrink), the explain phase
    unless `explain` is False."""
    replayed = (hypothesis.Phase.explicit, hypothesis.Phase.reuse)
    return [
        p
        for p in base.phases
        if (test.rounds == 0 and not test.replayed or p not in replayed)
        and (explain or p is not hypothesis.Phase.explain)
        and (shrink or p is not hypothesis.Phase.shrink)
    ]
