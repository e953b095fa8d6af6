"""A fuzz run: the profile's budget, the run's options, the report, and how one fuzz test spends its time.

A fuzz test is a Hypothesis test (`fuzz_test`) run in rounds (`FuzzSession.run_test`) by the suite's rounds engine
(fuzz.suite.rounds): each round is one Hypothesis run of the test body with its own seed, sized to the examples and
seconds left, raising only failures whose key no earlier round reported, so each distinct failure is shrunk on its
own. Control runs one way: the plugin's pytest_pyfunc_call -> `FuzzSession.run_test`, which hands the engine a
`Plan` (the body, its seed, what a round's new failures become: `_reported`; the threshold plan's cases and how one is
settled: `_settle`) -> `run_rounds`, which settles each planned case, then runs each round -> the body: draw a Case,
`example` (cached, time-boxed) -> `check` (fuzz.run.harness, or an isolated worker) -> CheckResult.

Past the time box (--gdn-test-seconds) a case not checked before is not checked (Hypothesis finishes the round on
draws alone). Results are cached per case, so a case Hypothesis replays (its final replay of a shrunk failure, or a
case drawn again) is not run twice and gives the same verdict.

The session is kept on pytest's config (fuzz.suite.plugin.session_of); the plugin hands it to each fuzz test beside
its target (the `gdn_session` parameter), so a test body takes no pytest fixture and HypoFuzz can run it as it is.

Before its rounds, a test given an earlier run's live log (--gdn-resume) finishes the shrinks that run's time box cut
off: each failure it logged on the test's target and operation and did not report minimal is reduced from its
smallest logged case (fuzz.run.reduce) and reported, so no finding stays unshrunk for want of being found again.

Under HypoFuzz, or called directly, the same test body runs without rounds or time box: every failure raises.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import hypothesis
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.control import current_build_context
from hypothesis.errors import InvalidArgument

from fuzz.generate.profiles import Budget, sized
from fuzz.generate.strategies import cases, large_buckets
from fuzz.generate.threshold_plan import threshold_cases
from fuzz.model.case import Case
from fuzz.model.known_bugs import masked_reason
from fuzz.run import warming
from fuzz.run.events import EventLog
from fuzz.run.failure_key import FailureKey
from fuzz.run.harness import check
from fuzz.run.reduce import reduce
from fuzz.run.report import FailureRecord, LoggedFailure, RunReport, TargetRow, live_log
from fuzz.run.report import load as load_report
from fuzz.run.result import CheckResult, Failure
from fuzz.run.worker import WorkerPool, attributed
from fuzz.suite.options import Options
from fuzz.suite.rounds import Plan, TestRun, run_rounds, seed_of
from fuzz.targets.base import Target
from fuzz.targets.unsupported import UnsupportedHere

CACHE_SIZE = 20_000  # results kept per session (a coordinate and a small result each)
FIRST_ROUND = 10  # examples in a time-boxed test's first round, before its cost per example is known


class FuzzSession:
    def __init__(self, profile: str, budget: Budget, options: Options = Options()):  # noqa: B008 (frozen)
        self.profile, self.budget, self.options = profile, sized(budget), options
        self.report = RunReport(profile, budget.device)
        self.report.kernel_cache = options.kernel_cache.describe() if options.kernel_cache else ""
        self.unavailable: dict[str, str | None] = {}
        self.new_corpus: list[str] = []
        self.corpus_elsewhere: list[str] = []
        self.nothing_ran = False  # fuzz tests were selected, no example was checked
        self.events: EventLog | None = None  # --gdn-events, in the process that runs the tests
        self.workers = WorkerPool()  # --gdn-isolate: the worker processes its checks run in
        self._cache: OrderedDict = OrderedDict()
        self._test: TestRun | None = None
        self._drawing: tuple = (None, self.budget)  # ((test, round), the budget its cases are drawn in)

    # ---- targets -------------------------------------------------------------------------------------------------
    def reason_unavailable(self, target: Target) -> str | None:
        if target.name not in self.unavailable:
            self.unavailable[target.name] = target.unavailable_reason(self.budget.device)
            self.report.targets[target.name] = TargetRow(
                unavailable=self.unavailable[target.name],
                origin=_origin(target, self.budget.device),
                version=None if self.unavailable[target.name] else target.family.version(),
                beneath={} if self.unavailable[target.name] else target.beneath(self.budget.device),
                ops_off={
                    op: why
                    for op in sorted(target.support.ops)
                    if not self.unavailable[target.name] and (why := self.masked_reason(target, op))
                },
            )
        return self.unavailable[target.name]

    def unsupported_here(self, target: Target, reason: str) -> str:
        """The library said at a call that it does not support this device (fuzz.targets.unsupported): the target is
        unavailable from now on, with that reason, in this run's report too. Returns the skip message."""
        self.unavailable[target.name] = reason
        self.report.unavailable_here(target.name, _origin(target, self.budget.device), reason)
        return f"{target.name} unavailable: {reason}"

    def bugs(self, target: Target):
        return target.known_bugs(self.options.masks)

    def masked_reason(self, target: Target, op: str) -> str | None:
        return target.op_unavailable(op, self.budget.device) or masked_reason(self.bugs(target), op)

    def large_unavailable(self, target: Target, op: str) -> str | None:
        """Why the large-pool test of `op` cannot run on `target` (no pool on this release, or no large case fits
        this device's memory), or None; buckets left out for memory are noted in the targets table."""
        sup = target.declared(self.bugs(target))
        if not sup.pool:
            return "this release takes no slot-addressed pool (identity slots): no slot offsets to overflow"
        if not sup.wide_offsets:
            masking = [b for b in self.bugs(target) if b.mask.get("wide_offsets") is False]
            return "; ".join(f"known bug {b.id} ({b.releases}): {b.summary} (corpus/ replays it)" for b in masking)
        fits, why = large_buckets(target, op, self.budget, self.bugs(target))
        if why:
            self.report.large_left_out(target.name, op, why)
        return None if fits else why

    def draw_budget(self, target: Target, op: str) -> Budget:
        """The budget the current round draws its cases in: the run's, narrowed to the planned buckets a warm-up
        running beside the run had compiled when the round began (fuzz.run.warming), so a run from an empty kernel
        cache fuzzes what is compiled while the rest compiles; the run's own where no warm-up runs."""
        test, cache = self._test, self.options.kernel_cache
        if test is None or not self.budget.plan_size or cache is None:
            return self.budget
        if self._drawing[0] != (test.nodeid, test.rounds):
            ready = warming.compiled(cache.directories.values(), self.profile, self.options.masks, target.name, op)
            narrowed = self.budget if ready is None else dataclasses.replace(self.budget, compiled=ready)
            self._drawing = ((test.nodeid, test.rounds), narrowed)
        return self._drawing[1]

    # ---- one example ---------------------------------------------------------------------------------------------
    def example(self, target: Target, op: str, case: Case) -> CheckResult | None:
        """The test body's check: a cached result, a new one, or None when the time box says not to check. Without
        rounds (HypoFuzz, a direct call) every case is checked: HypoFuzz reads coverage from the checks."""
        test = self._test
        stage = _stage(test)
        if stage == "generate" and test is not None:
            test.drawn += 1
        key = (target.name, repr(case))
        if test is not None and key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        now = time.monotonic()
        if test is not None and not test.may_check(now):
            return None
        result = self.check(target, case)
        seconds = time.monotonic() - now
        self._cache[key] = result
        if len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        self.report.record(test.nodeid if test else target.name, op, result, seconds, stage)
        if test is not None:
            if stage in ("generate", "plan"):
                test.checked += 1
                test.seconds_checking += seconds
            if result.failure is not None:
                test.record_hit(result.failure.key, now)
            if self.events is not None:
                distinct = len(self.report.distinct[(target.name, op)])
                self.events.count(test.nodeid, test.checked, len(test.hits), distinct, stage)
        if result.failure is not None:
            self._log(target, result.failure)
        return result

    def check(self, target: Target, case: Case) -> CheckResult:
        device = self.budget.device
        return (
            self.workers.check(target, case, device, self.options.timeout)
            if self.options.isolate
            else check(target, case, device)
        )

    def raises(self, failure: Failure) -> bool:
        """Does this failure fail the current Hypothesis run? Not when an earlier round reported its key."""
        return self._test is None or self._test.raises(failure.key)

    def _log(self, target: Target, failure: Failure) -> None:
        if self.options.live_log:
            with open(self.options.live_log, "a") as f:
                f.write(json.dumps(LoggedFailure.of(target.name, failure).to_json()) + "\n")

    # ---- one fuzz test: rounds -----------------------------------------------------------------------------------
    def run_test(self, nodeid: str, target: Target, op: str, test_fn) -> list[FailureRecord]:
        """Run the fuzz test `test_fn` (fuzz_test's) in rounds (fuzz.suite.rounds); return its distinct shrunk
        failures."""
        if self.options.isolate:  # the worker's start (interpreter, torch, CUDA) is not the test's time
            self.workers.worker_for(self.budget.device, self.options.timeout).ensure_started()
        # the threshold plan reads the release, which may import the library: not the test's time either
        planned = () if test_fn.gdn.large else threshold_cases(target, op, self.budget, self.bugs(target))
        planned = shard_share(planned, nodeid, self.options.shards)
        options = self.options
        test = self._test = TestRun.start(
            nodeid, target, op, options.test_seconds, options.shrink_seconds, options.bound_seconds, report=self.report
        )
        try:
            self._resume(test)
            run_rounds(
                test,
                Plan(
                    examples=options.examples or settings.default.max_examples,
                    first=FIRST_ROUND,
                    body=test_fn.gdn.inner,
                    args={"target": target, "gdn_session": self},
                    seed=self.first_seed(nodeid),
                    shrink=options.shrink,
                    found=lambda failures, _: [self._reported(test, failure) for failure in failures],
                    planned=planned,
                    settle=lambda case: self._settle(test, case),
                ),
            )
        finally:
            self._test = None
        return list(test.reported.values())

    def first_seed(self, nodeid: str) -> int:
        """The seed of a test's first round: --hypothesis-seed, else one of its node id and the profile."""
        return self.options.seed if self.options.seed is not None else seed_of(nodeid, self.profile)

    def _reported(self, test: TestRun, failure: Failure) -> FailureRecord:
        """Report a distinct failure: its minimal case re-checked, and an isolated crash attributed to the call that
        makes it (fuzz.run.worker.attributed: fresh workers, CUDA_LAUNCH_BLOCKING=1)."""
        if self.options.isolate and failure.kind == "KernelCrash":
            failure = attributed(test.target, failure, self.budget.device, self.options.timeout)
        record = test.failure_record(failure, minimal=self.options.shrink)
        record.reproduced_on_rerun = self.check(test.target, failure.case).failure is not None
        test.reported[failure.key] = record
        self.report.add_failure(record)
        return record

    def _settle(self, test: TestRun, case: Case) -> list[FailureRecord]:
        """One case of the test's threshold plan: checked as the body checks a drawn one (cached, recorded as the stage
        "plan"); a failure whose key the test has not reported is reduced from it (fuzz.run.reduce, as a resumed shrink
        is) and reported. Returns what it reported."""
        result = self.example(test.target, test.op, case)
        if result is not None and result.unavailable:
            raise UnsupportedHere(self.unsupported_here(test.target, result.unavailable))  # a SkipTest, as the body's
        failure = None if result is None else result.failure
        if failure is None or failure.key in test.reported:
            return []
        self._finish_shrink(test, failure.key, case, "a case of the threshold plan", inside=True)
        return [test.reported[failure.key]] if failure.key in test.reported else []

    def _resume(self, test: TestRun) -> None:
        """Finish the shrinks an earlier run cut off (--gdn-resume), before the rounds: each failure it logged on this
        test's target and operation and did not report minimal. Their checks are a round's shrink steps
        (round_failed_at set): cached, recorded and logged, outside the examples budget."""
        if self.options.resume is None:
            return
        for key, logged in resumable(self.options.resume, test.target.name, test.op).items():
            self._finish_shrink(test, key, logged, "an earlier run's cut-off shrink")
        test.round_failed_at = None

    def _finish_shrink(self, test: TestRun, key: FailureKey, logged: Case, origin: str, inside: bool = False) -> None:
        """Reduce a failure found outside Hypothesis (`origin` says where) with this session's check, for at most
        --gdn-shrink-seconds, and report it; the failure key must stay the same, and with `inside` (a kernel target's
        threshold plan) each step inside what the target declares. A case that no longer fails so is left to the
        rounds."""

        sup = test.target.declared(self.bugs(test.target)) if inside else None

        def failure_of(case: Case) -> Failure | None:
            if sup is not None and not sup.admits(case):  # the target's refusal of it would be no finding
                return None
            result = self.example(test.target, test.op, case)
            failure = None if result is None else result.failure
            return failure if failure is not None and failure.key == key else None

        test.round_failed_at = time.monotonic()
        deadline = test.round_failed_at + self.options.shrink_seconds
        if failure_of(logged) is None:
            return
        smallest, checks = reduce(
            logged, lambda case: failure_of(case) is not None, lambda: time.monotonic() < deadline
        )
        finished = time.monotonic() < deadline  # its last pass accepted nothing, before the cap
        self._reported(
            test,
            failure_of(smallest).with_notes(
                f"shrunk by fuzz.run.reduce from {logged!r} ({origin}): {checks} checks"
                + ("" if finished else ", cut off by --gdn-shrink-seconds")
            ),
        )
        test.reported[key].minimal = finished  # the reducer's shrink, which --gdn-no-shrink does not turn off


def resumable(live: Path, target: str, op: str) -> dict[FailureKey, Case]:
    """The failures an earlier run logged (--gdn-live-log) on `target` and `op` and did not report minimal: failure
    key -> its smallest logged case. The run's report, where it sits beside the log as a campaign names them
    (NAME.json beside NAME-failures.jsonl), says which it reported minimal; without one, every key is taken."""
    beside = live.with_name(live.name.removesuffix("-failures.jsonl") + ".json")
    report = load_report(beside) if live.name.endswith("-failures.jsonl") else None
    done = {f.failure.key for f in report.failures if f.minimal} if report else set()
    smallest: dict[FailureKey, Case] = {}
    for logged in live_log(live):
        case, key = logged.case, logged.key
        if (
            logged.target == target
            and case.op == op
            and key not in done
            and (key not in smallest or case.size_key() < smallest[key].size_key())
        ):
            smallest[key] = case
    return smallest


def logged_failures(path: Path) -> list[tuple[str, str, Case]]:
    """(target, failure class, case) for each line FuzzSession._log wrote (--gdn-live-log)."""
    return [(logged.target, logged.kind, logged.case) for logged in (live_log(path) if path.exists() else [])]


def _origin(target: Target, device: str) -> str:
    origin = f"override {target.family.override}" if target.overridden else "installed"
    where = target.where(device)
    return f"{origin}; {where}" if where else origin


def shard_share(planned: tuple, nodeid: str, shards: int) -> tuple:
    """A shard's part of its test's threshold plan (--gdn-shards: the plugin names shard k `TARGET-shardK`): every
    shards-th case from its own index, so the shards of a test split the plan instead of each checking all of it."""
    found = re.search(r"-shard(\d+)\]", nodeid) if shards > 1 else None
    return planned[int(found.group(1)) :: shards] if found else planned


def _stage(test: TestRun | None) -> str:
    """The stage of the example being checked: Hypothesis's final replay, a shrink step (a round failed: its shrink,
    or a reduction outside Hypothesis), a planned case, else generation."""
    if _is_final():
        return "final"
    if test is not None and test.round_failed_at:
        return "shrink"
    return "plan" if test is not None and test.planning else "generate"


def _is_final() -> bool:
    try:
        return current_build_context().is_final
    except InvalidArgument:  # outside a Hypothesis test
        return False


def fuzz_test(op: str, large: bool = False):
    """The Hypothesis test for one operation; fuzz.suite.plugin parametrizes `target` over the registry, with the run's
    session beside it (`gdn_session`). It takes no pytest fixture, so HypoFuzz can run it as it is. `large`: pools
    whose top slot offsets pass int32 (8 GiB on a GPU), in a test of their own so they are drawn often and hold GPU
    memory one at a time."""

    def test(target: Target, gdn_session: FuzzSession, data) -> None:
        session = gdn_session
        case = data.draw(cases(target, op, session.draw_budget(target, op), session.bugs(target), large), label="case")
        result = session.example(target, op, case)
        if result is None:  # past the time box: drawn, not checked
            return
        if result.unavailable:  # the library does not support this device: no verdict, the test is skipped
            raise UnsupportedHere(session.unsupported_here(target, result.unavailable))  # a SkipTest
        if result.unjudged:  # the device could not hold it: no verdict either way (the report counts these)
            hypothesis.event(f"unjudged: {result.unjudged}")
            hypothesis.reject()
        for text in result.events:
            hypothesis.event(text)
        if result.comparisons:
            hypothesis.target(min(result.worst_ratio, 1e6))  # unlabelled: HypoFuzz buckets it (log2)
        if result.failure is not None and session.raises(result.failure):
            raise result.failure.exception()

    wrapped = given(data=st.data())(test)
    wrapped.gdn = FuzzTest(op, test, large)  # one attribute: pytest -k matches attribute names as keywords
    return wrapped


@dataclass(frozen=True)
class FuzzTest:
    """What fuzz_test made: the operation, the undecorated test body (the rounds wrap it anew) and the pool size."""

    op: str
    inner: object
    large: bool = False
