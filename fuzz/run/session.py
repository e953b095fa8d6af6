"""Run-wide state of one pytest session: the profile's budget, and what ran on which target."""
from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.control import current_build_context

from fuzz.judge import verdict
from fuzz.case import Case
from fuzz.run.harness import check, dispatch_bucket
from fuzz.generate.profiles import Budget
from fuzz.generate.strategies import cases
from fuzz.targets.base import Target, Unavailable
from fuzz.run.worker import DEFAULT_TIMEOUT, check_isolated


@dataclass
class FuzzSession:
    profile: str
    budget: Budget
    required: frozenset  # families whose failure to load is an error, not a skip
    examples: Counter = field(default_factory=Counter)  # (target, op) -> examples run
    unavailable: dict = field(default_factory=dict)  # target name -> reason
    records: list = field(default_factory=list)  # one dict per fuzz example (see record()), for --gdn-report
    new_corpus: list = field(default_factory=list)  # corpus files written by --gdn-corpus-out
    corpus_elsewhere: list = field(default_factory=list)  # corpus entries for releases other than the installed one
    isolate: bool = False  # --gdn-isolate: checks run in a restartable worker process (fuzz.run.worker)
    timeout: float = DEFAULT_TIMEOUT  # --gdn-timeout: seconds per isolated call before KernelHang
    test_seconds: float | None = None  # --gdn-test-seconds: time box per fuzz test
    started: dict = field(default_factory=dict)  # test node id -> time of its first example
    failed: set = field(default_factory=set)  # test node ids with a failing example (their shrink runs on)
    boxed: set = field(default_factory=set)  # (target, op) whose test the time box stopped

    def reason_unavailable(self, target: Target) -> str | None:
        if target.name not in self.unavailable:
            self.unavailable[target.name] = target.unavailable_reason(self.budget.device)
        return self.unavailable[target.name]

    def must_run(self, target: Target) -> bool:
        """A required family's targets fail instead of skipping when the family itself cannot be loaded."""
        if target.family.name not in self.required:
            return False
        try:
            target.family.api()
        except Unavailable:
            return True
        return False

    def summary_lines(self, targets) -> list[str]:
        lines = [f"gdn-fuzz profile '{self.profile}' on {self.budget.device}:"]
        for t in targets:
            reason = self.reason_unavailable(t)
            origin = f"override {t.family.override}" if t.overridden else "installed"
            if reason:
                lines.append(f"  {t.name:34s} UNAVAILABLE: {reason}")
            else:
                runs = ", ".join(f"{op} {n}" + (f" (stopped by the {self.test_seconds:g} s time box)"
                                                 if (name, op) in self.boxed else "")
                                 for (name, op), n in sorted(self.examples.items()) if name == t.name)
                lines.append(f"  {t.name:34s} ran ({origin}, {t.family.version() or 'no version'}): "
                             f"{runs or 'no examples (not selected)'}")
                sem = t.semantics()
                lines += [f"  {t.name:34s} UNAVAILABLE for {op}: {sem.masked_reason(op)}"
                          for op in sorted(t.support.ops) if sem.masked_reason(op)]
        if self.isolate:
            from fuzz.run.worker import stats

            s = stats()
            cost = f", {sum(s.start_seconds) / len(s.start_seconds):.2f} s per start" if s.start_seconds else ""
            lines.append(f"  isolated in worker processes (timeout {self.timeout:g} s): {s.calls} calls, "
                         f"{s.starts} starts ({s.restarts} restarts{cost}), {s.crashes} crashes, {s.hangs} hangs")
        return lines

    def time_boxed(self, test: str, target: Target, op: str) -> bool:
        """Has this test spent its --gdn-test-seconds? Never once it has failed, so that Hypothesis can finish
        shrinking (its minimal example is not lost). Later examples are still drawn (data generation stays stable)
        but not checked or counted; the summary says which tests the time box stopped."""
        if self.test_seconds is None or test in self.failed:
            return False
        if time.monotonic() - self.started.setdefault(test, time.monotonic()) < self.test_seconds:
            return False
        self.boxed.add((target.name, op))
        return True

    def log_failure(self, target: Target, error: Exception) -> None:
        """Append each failing example to $GDN_FUZZ_LIVE_LOG as it happens (survives a killed run); read it back
        with logged_failures()."""
        if path := os.environ.get("GDN_FUZZ_LIVE_LOG"):
            with open(path, "a") as f:
                f.write(f"{target.name}\t{type(error).__name__}\t{str(error).splitlines()[0][:1000]}\n")

    def record(self, test: str, target: Target, case: Case, outcome: str) -> None:
        """One example's numerics (error-to-bound ratio per judged kind; none under --gdn-isolate, where the
        verdict runs in the worker) and outcome. `final`: Hypothesis's last replay of a shrunk failure."""
        self.records.append({
            "test": test, "target": target.name, "op": case.op, "case": repr(case), "T": case.T,
            "state_dtype": case.state_dtype, "bucket": dispatch_bucket(target, case),
            "ratios": {c["kind"]: c["ratio"] for c in verdict.COMPARED}, "outcome": outcome,
            "final": current_build_context().is_final})

    def write_report(self, path: str, targets, failures: list[dict]) -> None:
        report = {
            "profile": self.profile, "device": self.budget.device,
            "targets": {t.name: {"unavailable": self.reason_unavailable(t),
                                 "version": None if self.reason_unavailable(t) else t.family.version(),
                                 "examples": {op: n for (name, op), n in self.examples.items() if name == t.name}}
                        for t in targets},
            "failures": failures,
            "time_boxed": sorted(f"{name} {op}" for name, op in self.boxed),
            "records": self.records,
        }
        Path(path).write_text(json.dumps(report, indent=1) + "\n")


def logged_failures(path: Path) -> list[tuple[str, str, Case]]:
    """(target, failure class, case) for each line FuzzSession.log_failure wrote; a message starts with the
    failing case's coordinate."""
    lines = path.read_text().splitlines() if path.exists() else []
    return [(target, kind, Case.parse(message.split(": ", 1)[0]))
            for target, kind, message in (line.split("\t", 2) for line in lines if line.count("\t") >= 2)]


def fuzz_test(op: str):
    """A Hypothesis test for one operation; conftest parametrizes `target` over the registry."""

    @given(data=st.data())
    def test(target: Target, data, gdn: FuzzSession, request) -> None:
        reason = gdn.reason_unavailable(target)
        if reason:  # reached only for a --gdn-require'd family
            pytest.fail(f"{target.name} is required but unavailable: {reason}")
        case = data.draw(cases(target, op, gdn.budget), label="case")
        if gdn.time_boxed(request.node.nodeid, target, op):  # after the draw: data generation stays stable
            return
        gdn.examples[(target.name, op)] += 1
        try:
            if gdn.isolate:
                check_isolated(target, case, target.device(gdn.budget.device), gdn.timeout)
            else:
                check(target, case, target.device(gdn.budget.device))
        except Exception as e:
            gdn.failed.add(request.node.nodeid)
            gdn.log_failure(target, e)
            gdn.record(request.node.nodeid, target, case, type(e).__name__)
            raise
        gdn.record(request.node.nodeid, target, case, "pass")

    test.gdn_op = op
    return test
