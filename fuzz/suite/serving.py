"""Serving sequences as a test: the state machine (fuzz.generate.serving) over one target, its calls run and judged by
fuzz.run.serving, in rounds by the engine the fuzz tests use (fuzz.suite.rounds), into the run report.

Its budget is the fuzz tests' in calls: --gdn-examples (else the profile's max_examples) calls, in sequences of up to
STEPS. Each round is one Hypothesis run of the machine with its own seed, sized to the time left; it stops generating
at its first failure and shrinks it, and the next round draws on, raising only failure keys no earlier round reported.

The time box (--gdn-test-seconds) stops generation: no round starts after it, a round is sized to end by it, and past
it no call is checked (its steps are drawn, not run), except to shrink a failure of the round for --gdn-shrink-seconds
and to replay shrunk failures; deleting a failure's unneeded calls gets --gdn-shrink-seconds more at most. A round
never ends a sequence early: Hypothesis requires the same choices to draw the same way, checked or not.

Sequences run in pytest's process (the pool lives across calls), also under --gdn-isolate: a kernel that kills the
process ends the run there, visibly, and the run report (rewritten after every test) keeps what the finished tests
found. A failing call of the installed library is still re-run alone in a fresh worker process (fuzz.run.serving.Alone).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import hypothesis
import pytest
from hypothesis import settings

from fuzz.generate.profiles import Budget
from fuzz.generate.serving import STEPS, Step, serving_machine
from fuzz.run.report import FailureRecord, FinishedTest, RunReport
from fuzz.run.result import CheckResult, Failure
from fuzz.run.serving import Alone, ServingRun, final_replay, shortest
from fuzz.suite.rounds import Plan, TestRun, run_rounds
from fuzz.suite.session import FuzzSession
from fuzz.targets.base import Target
from fuzz.targets.unsupported import UnsupportedHere

OP = "serving"  # the operation name of serving tests in the run report
FIRST_ROUND = 4  # sequences in a time-boxed test's first round, before its cost per sequence is known


@dataclass
class ServingTest(TestRun):
    """A serving test's accounts, as a fuzz test's (fuzz.suite.rounds.TestRun: time box, rounds, hits, reported keys),
    counting sequences as its examples, plus the calls checked. fuzz.run.serving keeps them through its `Accounts`
    methods."""

    calls: int = 0  # calls checked in generation
    last: dict = field(default_factory=dict)  # key -> (Failure, steps, fails alone) of its last raise this round

    @classmethod
    def start(
        cls,
        nodeid: str,
        target: Target,
        report: RunReport | None = None,
        box: float | None = None,
        shrink_seconds: float = 120.0,
        bound: float | None = None,
        op: str = OP,
    ) -> ServingTest:
        """`box`: the time box (--gdn-test-seconds); `bound`: the profile's bound where no box is given; `op`: the
        operation name of the test in the run report (fuzz.suite.chain's chains keep these accounts too)."""
        return super().start(nodeid, target, op, box, shrink_seconds, bound, report=report)

    def may_check_now(self) -> bool:
        """Inside the box, or shrinking a failure of this round for shrink_seconds more; a final replay always."""
        return final_replay() or self.may_check(time.monotonic())

    @property
    def stage(self) -> str:
        return "final" if final_replay() else "shrink" if self.round_failed_at is not None else "generate"

    def example(self) -> None:
        if self.stage == "generate":
            self.drawn += 1

    def recorded(self, result: CheckResult, seconds: float, first: bool) -> None:
        stage = self.stage
        if stage == "generate":
            self.calls += 1
            self.checked += first
            self.seconds_checking += seconds
        if self.report is not None:
            self.report.record(self.nodeid, self.op, result, seconds, stage)

    def hit(self, failure: Failure, steps: tuple, reproduced: bool | None) -> bool:
        """A step failed with `failure` after `steps` (`reproduced`: whether the call fails alone; None: not run
        alone). Whether it fails the Hypothesis run: not when an earlier round reported its key."""
        self.record_hit(failure.key, time.monotonic())
        if not self.raises(failure.key):
            return False
        self.last[failure.key] = (failure, steps, reproduced)
        return True

    def new_round(self, replay: bool = False) -> None:
        super().new_round(replay)
        self.last = {}

    def summary(self) -> FinishedTest:
        return replace(super().summary(), calls=self.calls)


@dataclass(frozen=True)
class SequenceFailure:
    """A distinct failure of a serving test: its record (for the run report) and its shortest sequence of calls."""

    record: FailureRecord
    steps: tuple[Step, ...]


def run_serving(
    target: Target,
    budget: Budget,
    bugs: tuple,
    device: str,
    test: ServingTest,
    examples: int,
    steps: int = STEPS,
    base: settings | None = None,
    seed_: int | None = None,
    shrink: bool = True,
    timeout: float | None = None,
) -> list[SequenceFailure]:
    """Run the serving machine on `target` for `examples` sequences of up to `steps` calls, in rounds
    (fuzz.suite.rounds: each round one Hypothesis run, sized to the time box, raising only failure keys no earlier
    round reported); settings from `base` (default the active profile's). Returns each distinct failure with its
    shortest sequence. shrink=False: neither Hypothesis' shrinking nor the deletion of unneeded calls (`shortest`),
    as --gdn-no-shrink."""
    alone = Alone(target, device, timeout)
    machine = serving_machine(target, budget, bugs, lambda: ServingRun(target, device, test, alone=alone))
    return run_rounds(
        test,
        Plan(
            examples=examples,
            first=FIRST_ROUND,
            machine=machine,
            steps=steps,
            seed=seed_,
            base=base,
            shrink=shrink,
            # no explain phase: it replays variations of a shrunk sequence without a stall limit and says nothing a
            # list of calls does not
            explain=False,
            found=lambda failures, ran: _sequences(test, failures, ran, shrink, alone, device),
        ),
    )


def _sequences(
    test: ServingTest, failures: list[Failure], ran: settings, shrink: bool, alone: Alone, device: str
) -> list[SequenceFailure]:
    """A round's new distinct failures, reported, each with its calls deleted where it can."""
    found, end = [], time.monotonic() + test.shrink_seconds  # deleting calls: shrink_seconds more at most
    # Each failure's last raise is its smallest: the shrinker only tries smaller ones, then replays the smallest.
    minimal = hypothesis.Phase.shrink in ran.phases and test.may_check(time.monotonic())  # shrinking ran to its end
    for key in (f.key for f in failures):
        failure, sequence, reproduced = (
            shortest(test.target, device, test.last[key], alone, lambda: time.monotonic() < end)
            if shrink
            else test.last[key]
        )
        record = test.reported[key] = test.failure_record(failure, minimal, reproduced)
        if test.report is not None:
            test.report.add_failure(record)
        found.append(SequenceFailure(record, sequence))
    return found


# ---- the pytest test -------------------------------------------------------------------------------------------
def serving_test():
    """The pytest test of fuzz/test_serving.py; fuzz.suite.plugin parametrizes `target` over the registry, with the
    run's session beside it (`gdn_session`), where it sees the gdn_serving attribute. Seeded from the test id, as fuzz
    tests are, unless --hypothesis-seed is given."""

    def test_serving(target: Target, gdn_session: FuzzSession, request) -> None:
        session = gdn_session  # the target is available: fuzz.suite.plugin skips the others
        options, nodeid = session.options, request.node.nodeid
        test = ServingTest.start(
            nodeid, target, session.report, options.test_seconds, options.shrink_seconds, options.bound_seconds
        )
        calls = options.examples or settings.default.max_examples
        bugs = target.serving_bugs(options.masks)  # single-call known bugs masked under every policy
        try:
            found = run_serving(
                target,
                session.budget,
                bugs,
                session.budget.device,
                test,
                examples=max(1, calls // STEPS),
                shrink=options.shrink,
                timeout=options.timeout,
                seed_=session.first_seed(nodeid),
            )
        except UnsupportedHere as e:  # the library does not support this device: unavailable, not a finding
            pytest.skip(session.unsupported_here(target, str(e)))
        found = [f for f in found if options.fails_test(f.record.failure.key)]
        if found:
            lines = [f"{len(found)} distinct failure(s) of {target.name} in serving sequences (kind x bucket x cause):"]
            for f in found:
                failure, cut = f.record.failure, "" if f.record.minimal else " (not minimal: shrinking was cut off)"
                lines.append(f"  {failure.kind}{cut}: {failure.message.splitlines()[0][:600]}")
                lines += [f"    {line}" for note in failure.notes for line in note.splitlines()[:12]]
            pytest.fail("\n".join(lines), pytrace=False)

    test_serving.gdn_serving, test_serving.gdn_op = True, OP
    return test_serving


__all__ = ["OP", "SequenceFailure", "ServingTest", "run_serving", "serving_test"]
