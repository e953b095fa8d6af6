"""The pytest hooks that write --gdn-events (fuzz.run.events). fuzz.suite.plugin registers one `TestEvents` per run, in
the process that runs the tests: a plain run, or each xdist worker (the controller runs none). The `count` events come
from the session itself (FuzzSession.example), as a fuzz test checks its examples."""

from __future__ import annotations

import pytest

from fuzz.suite.session import FuzzSession
from fuzz.targets.base import Target


class TestEvents:
    __test__ = False  # not a test class, whatever its name

    def __init__(self, config: pytest.Config, session: FuzzSession):
        self.config, self.session = config, session
        self._outcomes: dict[str, str] = {}  # node id -> its outcome so far, as pytest -v words it
        self._seconds: dict[str, float] = {}  # node id -> its phases' durations so far

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.session.events.emit("session", tests=len(session.items))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> None:
        target = getattr(getattr(item, "callspec", None), "params", {}).get("target")
        fn = getattr(item, "obj", None)
        op = spec.op if (spec := getattr(fn, "gdn", None)) else getattr(fn, "gdn_op", "")  # or serving, chain
        fuzzed = isinstance(target, Target)
        self.session.events.emit(
            "start", test=item.nodeid, target=target.name if fuzzed else "", op=op if fuzzed else ""
        )

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        _, _, word = self.config.hook.pytest_report_teststatus(report=report, config=self.config)
        word = word[0] if isinstance(word, tuple) else word
        if word and self._outcomes.get(report.nodeid) != "FAILED":  # a teardown error after a failure: FAILED
            self._outcomes[report.nodeid] = word
        self._seconds[report.nodeid] = self._seconds.get(report.nodeid, 0.0) + report.duration

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        info = self.session.report.tests.get(nodeid)  # a fuzz or serving test's: its examples and what stopped it
        self.session.events.emit(
            "finish",
            test=nodeid,
            outcome=self._outcomes.pop(nodeid, "PASSED"),
            examples=info.checked if info else 0,
            failures=len(info.failures) if info else 0,
            seconds=round(self._seconds.pop(nodeid, 0.0), 3),
            stop=info.stop if info else "",
        )
