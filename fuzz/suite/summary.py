"""The run's report and its summary: --gdn-report rewritten after every test, failed tests that are not fuzz findings
kept as the report's errors, pytest-xdist workers' reports merged by the controller, exit 5 when fuzz tests were
selected and no example was checked (a green run means something ran), and the targets table at the end.

fuzz.suite.plugin registers one `RunSummary` beside the run's session as it configures a run of the fuzz suites, so
these hooks hold the session themselves and never run in a run that is not ours."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import pytest

from fuzz.run.report import FailedTest, RunReport, merge_parts
from fuzz.suite.session import FuzzSession

NOTHING_RAN = 5  # pytest's "no tests collected" status: fuzz tests were selected, none checked an example


@dataclass(eq=False)  # a plugin: pluggy tells plugins apart by identity
class RunSummary:
    """The pytest hooks of the run's report and summary, for one session."""

    session: FuzzSession
    fuzz_tests: int = 0  # xdist controller: fuzz tests its workers collected (each worker's sessionfinish says)
    merged: set[str] = field(default_factory=set)  # xdist controller: the workers whose final report it merged

    def pytest_runtest_logreport(self, report):
        """Failed tests that are not fuzz findings (corpus replays, strict xfails that passed, errors, a crashed xdist
        worker's test) go into the run report's errors, so the gate and the campaign see them."""
        if report.failed:
            self.session.report.errors.append(
                FailedTest(
                    report.nodeid, report.when, str(getattr(report.longrepr, "reprcrash", report.longrepr))[:2000]
                )
            )

    def pytest_runtest_teardown(self, item):
        """--gdn-report is rewritten after every test, so a run killed later still leaves what its finished tests
        found. An xdist worker writes its own part beside it (REPORT.gwN), which the controller's merged report
        replaces at the end and fuzz.run.report.load merges when a killed run left no merged report."""
        if path := self.session.options.report:
            worker = getattr(item.config, "workerinput", {}).get("workerid")
            complete(self.session).write(f"{path}.{worker}" if worker else path)

    def pytest_sessionfinish(self, session, exitstatus):
        config, run = session.config, self.session
        report = complete(run)
        fuzz_tests = sum(getattr(getattr(i, "obj", None), "gdn", None) is not None for i in session.items)
        if hasattr(config, "workerinput"):  # an xdist worker: the controller merges and reports
            config.workeroutput["gdn_report"] = json.dumps(report.to_json())
            config.workeroutput["gdn_fuzz_tests"] = fuzz_tests
            return
        path = run.options.report
        # a worker that died or sent nothing back: its last per-test part stands in for its final report
        found = merge_parts(report, path, skip=self.merged, errors=False) if path else {}
        if run.budget.plan_size and run.options.kernel_cache:  # a GPU profile: was its plan compiled ahead?
            from fuzz.run.warm import status

            ran = defaultdict(set)
            for target, op in report.examples:
                ran[target].add(op)
            report.warm = status(
                ran, run.options.kernel_cache.directories.values(), run.profile, run.budget, run.options.masks
            )
        if path:
            report.write(path)
            for part in found.values():
                part.unlink()
        fuzz_tests += self.fuzz_tests  # under xdist the controller collects nothing itself
        if exitstatus == 0 and not config.option.collectonly and (fuzz_tests or report.tests) and not report.examples:
            run.nothing_ran = True
            session.exitstatus = NOTHING_RAN

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error):
        """xdist controller: merge each worker's report."""
        output = getattr(node, "workeroutput", {})
        self.fuzz_tests += output.get("gdn_fuzz_tests", 0)
        if data := output.get("gdn_report"):
            worker = RunReport.from_json(json.loads(data))
            worker.errors = []  # the controller's pytest_runtest_logreport saw the same failed reports (and crashes)
            self.session.report.merge(worker)
            self.merged.add(node.gateway.id)

    def pytest_terminal_summary(self, terminalreporter, config):
        if hasattr(config, "workerinput"):
            return
        run = self.session
        report = run.report
        terminalreporter.section("gdn-fuzz targets")
        for line in report.summary_lines():
            terminalreporter.write_line(line)
        for entry in run.corpus_elsewhere:
            terminalreporter.write_line(f"  corpus entry not replayed: {entry}")
        for path in run.new_corpus:
            terminalreporter.write_line(f"  new corpus entry: {path}")
        if run.nothing_ran:
            why = (
                "each one stopped before its first example (time box?)"
                if report.tests
                else "every selected target is unavailable or masked, see above"
            )
            terminalreporter.write_line(
                f"gdn-fuzz: fuzz tests were selected but no example ran ({why}): exit status 5", red=True
            )


def complete(session: FuzzSession) -> RunReport:
    """The report with every registry target listed (those no test asked about too) and the environment."""
    from fuzz.run.environment import environment
    from fuzz.targets.registry import TARGETS

    for target in TARGETS:
        session.reason_unavailable(target)
    if not session.report.environment:
        session.report.environment = environment()
    # this process ran isolated checks (an xdist controller never does: it merges)
    if (s := session.workers.stats()).calls:
        session.report.isolation = Counter(
            calls=s.calls,
            starts=s.starts,
            restarts=s.restarts,
            crashes=s.crashes,
            hangs=s.hangs,
            start_seconds=round(sum(s.start_seconds), 2),
            first_seconds=round(sum(s.first_seconds), 2),
            firsts=len(s.first_seconds),
        )
    return session.report
