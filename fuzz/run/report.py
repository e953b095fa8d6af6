"""The run report: what ran on which target, every distinct failure with its minimal case, and one record per
checked example. One RunReport per pytest process; under pytest-xdist each worker sends its report to the
controller, which merges them (`merge`), so the summary and `--gdn-report` cover the whole run.

JSON (schema 2): {"schema", "profile", "device", "environment", "targets": {name: TargetRow}, "tests": {nodeid:
FinishedTest}, "failures": [FailureRecord], "errors": [FailedTest], "records": [ExampleRecord], ...}: each value's
to_json spells its keys.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from fuzz.model.case import Case
from fuzz.model.engines import EDGES
from fuzz.run.events import Stop
from fuzz.run.failure_key import FailureKey
from fuzz.run.result import CheckResult, CrashAttribution, Failure

SCHEMA = 2
XPASS = "XPASS(strict)"  # a corpus entry's expected failure did not happen: the finding is the bug's absence
_CRASH_LINE = re.compile(r"\S+:\d+: (?:[\w.]+\.)?(\w+): ?(.*)", re.S)


@dataclass(frozen=True)
class FailedTest:
    """A failed test that is no fuzz finding (a corpus replay, a strict xfail that passed, an error in a fixture, a
    crashed xdist worker's test), as pytest reported it (fuzz.suite.summary.RunSummary)."""

    test: str  # node id
    when: str  # the phase it failed in: setup, call or teardown
    message: str  # pytest's crash line: 'path:line: module.Class: text', '[XPASS(strict)] reason', ...

    def parsed(self) -> tuple[str, str]:
        """(failure class, detail) from the crash line. The one reading of pytest's text: such a failure may come
        from outside the harness (a raise in pytest or in a fixture), so its line is all the report holds of it."""
        if self.message.startswith(f"[{XPASS}]"):
            return XPASS, self.message.removeprefix(f"[{XPASS}]").strip()
        m = _CRASH_LINE.match(self.message)
        return (m[1], m[2]) if m else ("error", self.message)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> FailedTest:
        return cls(d["test"], d["when"], d["message"])


@dataclass(frozen=True)
class ExampleRecord:
    """One checked example: its test, target, operation and case, the dispatch bucket it ran in, its outcome and
    stage, and the error-to-bound ratio of each judged kind."""

    test: str  # node id (the target's name where no test ran it)
    target: str
    op: str
    case: Case
    bucket: str  # its dispatch bucket (fuzz.run.harness.dispatch_bucket)
    outcome: str  # "pass", its failure kind, or "unjudged" (the device ran out of memory)
    stage: str  # "plan" (the threshold plan), "generate", "shrink" or "final" (Hypothesis's last replay)
    ratios: Mapping[str, float] = field(default_factory=dict, hash=False)  # judged kind -> error / bound
    seconds: float = 0.0

    @property
    def coordinate(self) -> tuple[str, Case]:
        """(test, case): what the gate compares a side's ratios by."""
        return self.test, self.case

    def to_json(self) -> dict:
        case = self.case
        return {
            "test": self.test,
            "target": self.target,
            "op": self.op,
            "case": repr(case),
            "T": case.T,
            "state_dtype": case.state_dtype,
            "input_dtype": case.input_dtype,
            "bucket": self.bucket,
            "outcome": self.outcome,
            "stage": self.stage,
            "ratios": dict(self.ratios),
            "seconds": round(self.seconds, 4),
        }

    @classmethod
    def from_json(cls, d: dict) -> ExampleRecord:
        """T, state_dtype and input_dtype (absent in reports written before it) are the case's own."""
        return cls(
            d["test"],
            d["target"],
            d["op"],
            Case.parse(d["case"]),
            d["bucket"],
            d["outcome"],
            d["stage"],
            d["ratios"],
            d["seconds"],
        )


@dataclass
class FailureRecord:
    """One distinct failure (a failure key) of one test: the minimal case Hypothesis shrank it to, when and how
    often it was hit."""

    test: str
    target: str
    failure: Failure
    first_hit_seconds: float  # from the start of its test
    examples_before: int | None  # examples the test checked before the first hit (None: a summary row without it)
    hits: int = 1
    minimal: bool = False  # shrunk (False: the first case seen, e.g. when the shrink was cut off)
    reproduced_on_rerun: bool | None = None  # the minimal case checked again at the end (None: not re-run);
    # False: its outcome depends on earlier calls (a compile cache, state) or the kernel is nondeterministic
    corpus: str | None = None  # the corpus entry written for it

    def to_json(self) -> dict:
        f = self.failure
        return {
            "test": self.test,
            "target": self.target,
            "key": f.key.to_json(),
            "kind": f.kind,
            "case": repr(f.case),
            "detail": f.detail,
            "cause": f.cause,
            "bucket": f.bucket,
            "notes": list(f.notes),
            "first_hit_seconds": round(self.first_hit_seconds, 3),
            "examples_before": self.examples_before,
            "hits": self.hits,
            "minimal": self.minimal,
            "reproduced_on_rerun": self.reproduced_on_rerun,
            "corpus": self.corpus,
            "attribution": f.attribution.to_json() if f.attribution else None,
            "before": [repr(c) for c in f.before],
        }

    @classmethod
    def from_json(cls, d: dict) -> FailureRecord:
        """A report's record, or a campaign summary's row of one (fuzz.cli.campaign_tables.FailureRow). What one
        written before it lacks: no attribution (before crashes were attributed), no earlier calls (before sequences
        were kept); a summary row without its key, cause, bucket, notes or count of the examples before it: the key's
        cause and bucket, else its detail as the cause and no bucket, no notes, no count."""
        crash = d.get("attribution")
        key = FailureKey.from_json(d["key"]) if d.get("key") else None
        failure = Failure(
            d["kind"],
            Case.parse(d["case"]),
            d["detail"],
            d.get("cause", key.cause if key else d["detail"]),
            d.get("bucket", key.bucket if key else ""),
            tuple(d.get("notes", ())),
            CrashAttribution.from_json(crash) if crash else None,
            tuple(Case.parse(c) for c in d.get("before", ())),
        )
        return cls(
            d["test"],
            d["target"],
            failure,
            d["first_hit_seconds"],
            d.get("examples_before"),
            d["hits"],
            d["minimal"],
            d.get("reproduced_on_rerun"),
            d.get("corpus"),
        )


@dataclass(frozen=True)
class FinishedTest:
    """A fuzz or serving test as it finished: its target and operation, its rounds and examples checked, its wall
    time, what bounded it and whether that stopped it, and the failure keys it reported."""

    target: str
    op: str
    rounds: int = 0
    checked: int = 0  # examples (a serving test: call sequences) checked
    seconds: float = 0.0
    box: float | None = None  # its --gdn-test-seconds time box (None: none)
    bound: float | None = None  # its profile's time bound, where it had no box
    boxed: bool = False  # the time, not the examples budget, ended it
    failures: tuple[FailureKey, ...] = ()
    calls: int | None = None  # a serving test's calls (None: a fuzz test)

    @property
    def stop(self) -> Stop:
        """What ended it: done, its time box or its profile's bound."""
        return "done" if not self.boxed else "time box" if self.box else "bound"

    @property
    def stopped(self) -> str:
        """What stopped it before its examples budget, as the summary says it."""
        if self.box:
            return f" (stopped by its {self.box:g} s time box)"
        return f" (stopped by the profile's {self.bound:g} s bound)" if self.bound else " (stopped by its time bound)"

    def to_json(self) -> dict:
        return {
            "target": self.target,
            "op": self.op,
            "rounds": self.rounds,
            "checked": self.checked,
            **({} if self.calls is None else {"calls": self.calls}),
            "seconds": self.seconds,
            "box": self.box,
            "bound": self.bound,
            "boxed": self.boxed,
            "failures": [key.to_json() for key in self.failures],
        }

    @classmethod
    def from_json(cls, d: dict) -> FinishedTest:
        """Reports written before a field was kept lack it: its default (bound: before profile bounds)."""
        return cls(
            d["target"],
            d["op"],
            d.get("rounds", 0),
            d.get("checked", 0),
            d.get("seconds", 0.0),
            d.get("box"),
            d.get("bound"),
            d.get("boxed", False),
            tuple(map(FailureKey.from_json, d.get("failures", ()))),
            d.get("calls"),
        )


@dataclass(frozen=True)
class LoggedFailure:
    """One line of the live failure log (--gdn-live-log): a failing example as it happened, before any shrink."""

    target: str
    case: Case
    key: FailureKey
    detail: str  # the first line of its detail

    @classmethod
    def of(cls, target: str, failure: Failure) -> LoggedFailure:
        return cls(target, failure.case, failure.key, failure.detail.splitlines()[0][:1000])

    @property
    def kind(self) -> str:
        return self.key.kind

    @property
    def failure(self) -> Failure:
        """The failure as far as the line holds it: its key's kind, cause and bucket, its case and first line."""
        return Failure(self.kind, self.case, self.detail, self.key.cause, self.key.bucket)

    def to_json(self) -> dict:
        return {
            "target": self.target,
            "kind": self.kind,
            "case": repr(self.case),
            "key": self.key.to_json(),
            "detail": self.detail,
        }

    @classmethod
    def from_json(cls, d: dict) -> LoggedFailure:
        return cls(d["target"], Case.parse(d["case"]), FailureKey.from_json(d["key"]), d.get("detail", ""))


def live_log(path: Path) -> list[LoggedFailure]:
    """The failures a live log holds, in the order they happened."""
    return [LoggedFailure.from_json(json.loads(line)) for line in path.read_text().splitlines() if line]


@dataclass(frozen=True)
class TargetRow:
    """One target of a run, as the report's targets table holds it: why it could not run (None or '': it could),
    where its API came from and the release that API reports, the operations a known bug's mask turned off and the
    large-pool buckets this device's memory left out (op -> why); in a summary (RunReport.target_summary), the
    examples and distinct cases checked per operation (the report itself counts them: RunReport.examples)."""

    unavailable: str | None = None
    origin: str | None = None  # "installed" or "override MODULE"
    version: str | None = None
    ops_off: Mapping[str, str] = field(default_factory=dict, hash=False)
    large_off: Mapping[str, str] = field(default_factory=dict, hash=False)
    examples: Mapping[str, int] = field(default_factory=dict, hash=False)
    distinct: Mapping[str, int] = field(default_factory=dict, hash=False)
    # per operation, what its library calls beneath it (Target.beneath): (the semantics path that library's known bugs
    # are recorded on, its release), which triage reads besides `version`
    beneath: Mapping[str, tuple[str, str]] = field(default_factory=dict, hash=False)

    def to_json(self) -> dict:
        return {
            "unavailable": self.unavailable,
            "origin": self.origin,
            "version": self.version,
            "ops_off": dict(self.ops_off),
            **({"large_off": dict(self.large_off)} if self.large_off else {}),
            "examples": dict(self.examples),
            "distinct": dict(self.distinct),
            **({"beneath": {op: list(under) for op, under in self.beneath.items()}} if self.beneath else {}),
        }

    @classmethod
    def from_json(cls, d: dict) -> TargetRow:
        return cls(
            d.get("unavailable"),
            d.get("origin"),
            d.get("version"),
            d.get("ops_off", {}),
            d.get("large_off", {}),
            d.get("examples", {}),
            d.get("distinct", {}),
            {op: tuple(under) for op, under in d.get("beneath", {}).items()},
        )


@dataclass
class RunReport:
    profile: str
    device: str
    environment: dict = field(default_factory=dict)
    targets: dict = field(default_factory=dict)  # name -> TargetRow (its examples and distinct: counted here)
    examples: Counter = field(default_factory=Counter)  # (target, op) -> examples checked
    distinct: dict = field(default_factory=lambda: defaultdict(set))  # (target, op) -> case coordinates
    tests: dict = field(default_factory=dict)  # nodeid -> FinishedTest
    failures: list = field(default_factory=list)  # FailureRecord
    errors: list = field(default_factory=list)  # FailedTest: failed tests that are not fuzz findings
    records: list = field(default_factory=list)  # ExampleRecord: one per checked example
    phases: dict = field(default_factory=lambda: defaultdict(Counter))  # target -> phase -> seconds
    isolation: Counter = field(default_factory=Counter)  # --gdn-isolate workers: calls, starts, crashes, hangs, ...
    kernel_cache: str = ""  # where compiled kernels are kept (fuzz.run.kernel_cache.KernelCache.describe)
    warm: str = ""  # whether the plan this run drew from was compiled ahead (fuzz.run.warm.status); GPU profiles
    time_box: str = ""  # each fuzz test's time box and shrinking bound, and where they came from

    # ---- filling ---------------------------------------------------------------------------------------------
    def record(self, test: str, op: str, result: CheckResult, seconds: float, stage: str) -> None:
        """One checked example. stage: "plan", "generate", "shrink" or "final" (Hypothesis's last replay)."""
        key = (result.target, op)
        self.examples[key] += 1
        self.distinct[key].add(repr(result.case))
        for name, s in result.phases.items():
            self.phases[result.target][name] += s
        self.records.append(
            ExampleRecord(
                test,
                result.target,
                op,
                result.case,
                result.bucket,
                result.outcome,
                stage,
                {c.kind: c.ratio for c in result.comparisons},
                seconds,
            )
        )

    def add_failure(self, record: FailureRecord) -> None:
        self.failures.append(record)

    def unavailable_here(self, name: str, origin: str, reason: str) -> None:
        """The library said at a call that it does not support this device: the target is unavailable, why."""
        self.targets[name] = replace(self.targets.get(name) or TargetRow(origin=origin), unavailable=reason)

    def large_left_out(self, name: str, op: str, why: str) -> None:
        """Large-pool buckets of `op` that this device's memory leaves out, and why."""
        row = self.targets.get(name) or TargetRow()
        self.targets[name] = replace(row, large_off={**row.large_off, op: why})

    # ---- reading ---------------------------------------------------------------------------------------------
    def examples_of(self, target: str) -> dict[str, int]:
        """Examples checked per operation of `target`, by operation name."""
        return {op: self.examples[(target, op)] for op in sorted(op for name, op in self.examples if name == target)}

    def target_summary(self, name: str) -> TargetRow:
        """A target as the JSON holds it: its row with its examples and distinct cases per operation."""
        examples = self.examples_of(name)
        return replace(
            self.targets[name], examples=examples, distinct={op: len(self.distinct[(name, op)]) for op in examples}
        )

    def summary_lines(self) -> list[str]:
        lines = [f"gdn-fuzz profile '{self.profile}' on {self.device}:"]
        lines += [f"  {line}" for line in (self.time_box, self.kernel_cache, self.warm) if line]
        for name, t in self.targets.items():
            if t.unavailable:
                lines.append(f"  {name:34s} UNAVAILABLE: {t.unavailable}")
                continue
            runs = [
                f"{op} {n} ({len(self.distinct[(name, op)])} distinct)"
                + "".join(
                    dict.fromkeys(
                        info.stopped
                        for info in self.tests.values()  # each reason once
                        if info.target == name and info.op == op and info.boxed
                    )
                )
                for (tn, op), n in sorted(self.examples.items())
                if tn == name
            ]
            lines.append(
                f"  {name:34s} ran ({t.origin}, {t.version or 'no version'}): "
                f"{', '.join(runs) or 'no examples (not selected)'}"
            )
            lines += [f"  {name:34s} UNAVAILABLE for {op}: {why}" for op, why in sorted(t.ops_off.items())]
            lines += [f"  {name:34s} large pools, {op}: {why}" for op, why in sorted(t.large_off.items())]
        if self.isolation:
            s = self.isolation
            per = f", {s['start_seconds'] / s['starts']:.2f} s per start" if s["starts"] else ""
            per += f", {s['first_seconds'] / s['firsts']:.2f} s from start to first example" if s["firsts"] else ""
            lines.append(
                f"  isolated in worker processes: {s['calls']} calls, {s['starts']} starts ({s['restarts']} "
                f"restarts{per}), {s['crashes']} crashes, {s['hangs']} hangs"
            )
        if unjudged := Counter(r.target for r in self.records if r.outcome == "unjudged"):
            lines.append(
                "  not judged (the device ran out of memory; no verdict, not a finding): "
                + ", ".join(f"{name} {n}" for name, n in sorted(unjudged.items()))
            )
        bugs = [f for f in self.failures if not f.failure.key.edge]
        if bugs:
            lines.append(f"  {len(bugs)} distinct failure(s):")
            lines += [f"    {_failure_line(f)}" for f in bugs]
        if edges := [f for f in self.failures if f.failure.key.edge]:
            lines.append(f"  {len(edges)} contract edge(s) (not bugs: calls the engine's contract leaves undefined):")
            for edge in dict.fromkeys(EDGES[f.failure.key.edge] for f in edges):  # each edge's text once
                lines.append(f"    {edge.id} ({', '.join(edge.engines)}): {edge.contract}")
                lines += [f"      {_failure_line(f)}" for f in edges if f.failure.key.edge == edge.id]
        return lines

    # ---- JSON ------------------------------------------------------------------------------------------------
    def to_json(self) -> dict:
        return {
            "schema": SCHEMA,
            "profile": self.profile,
            "device": self.device,
            "environment": self.environment,
            "targets": {name: self.target_summary(name).to_json() for name in self.targets},
            "tests": {test: info.to_json() for test, info in self.tests.items()},
            "failures": [f.to_json() for f in self.failures],
            "errors": [e.to_json() for e in self.errors],
            "records": [r.to_json() for r in self.records],
            "isolation": dict(self.isolation),
            "phases": {t: dict(p) for t, p in self.phases.items()},
            "kernel_cache": self.kernel_cache,
            "warm": self.warm,
            "time_box": self.time_box,
        }

    @classmethod
    def from_json(cls, d: dict) -> RunReport:
        report = cls(d["profile"], d["device"], d.get("environment", {}))
        for name, t in d["targets"].items():
            row = TargetRow.from_json(t)
            report.targets[name] = replace(row, examples={}, distinct={})  # the report counts them
            for op, n in row.examples.items():
                report.examples[(name, op)] = n
        report.records = [ExampleRecord.from_json(r) for r in d["records"]]
        for r in report.records:
            report.distinct[(r.target, r.op)].add(repr(r.case))
        report.tests = {test: FinishedTest.from_json(info) for test, info in d.get("tests", {}).items()}
        report.failures = [FailureRecord.from_json(f) for f in d.get("failures", [])]
        report.errors = [FailedTest.from_json(e) for e in d.get("errors", [])]
        for t, p in d.get("phases", {}).items():
            report.phases[t].update(p)
        report.isolation.update(d.get("isolation", {}))
        report.kernel_cache = d.get("kernel_cache", "")  # absent in reports written before the cache option
        report.warm = d.get("warm", "")  # absent before gdn-fuzz warm
        report.time_box = d.get("time_box", "")  # absent before default time boxes
        return report

    def write(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=1) + "\n")

    def merge(self, other: RunReport) -> None:
        """Add another process's report (an xdist worker's) to this one."""
        self.environment = self.environment or other.environment
        for name, t in other.targets.items():
            mine = self.targets.setdefault(name, t)
            if mine.unavailable and not t.unavailable:  # a worker that collected no test of it knows less
                self.targets[name] = t
        self.examples.update(other.examples)
        for key, cases in other.distinct.items():
            self.distinct[key] |= cases
        self.tests.update(other.tests)
        self.failures += other.failures
        self.errors += other.errors
        self.records += other.records
        for t, p in other.phases.items():
            self.phases[t].update(p)
        self.isolation.update(other.isolation)


def _failure_line(f: FailureRecord) -> str:
    """One distinct failure in the summary: kind, target, how minimal, when first hit, and its message's first line."""
    state = "minimal" if f.minimal else "NOT minimal (shrink cut off)"
    alone = "; did NOT reproduce when re-run: depends on earlier calls" if f.reproduced_on_rerun is False else ""
    return (
        f"{f.failure.kind} on {f.target} ({state}, first hit after {f.first_hit_seconds:.1f} s, "
        f"{f.hits} hit(s){alone}): {f.failure.message.splitlines()[0][:300]}"
    )


def parts(path: str | Path) -> dict[str, Path]:
    """The per-worker parts an xdist run writes beside its report (REPORT.gwN), by worker id."""
    path = Path(path)
    return {p.suffix.removeprefix("."): p for p in sorted(path.parent.glob(f"{path.name}.gw*"))}


def merge_parts(
    report: RunReport, path: str | Path, skip: set[str] = frozenset(), errors: bool = True
) -> dict[str, Path]:
    """Merge into `report` the parts of the workers not in `skip` (errors=False: without their failed-test errors,
    which a controller has already seen); return every part found, by worker id."""
    found = parts(path)
    for worker, part in found.items():
        if worker not in skip:
            data = RunReport.from_json(json.loads(part.read_text()))
            if not errors:
                data.errors = []
            report.merge(data)
    return found


def load(path: str | Path) -> RunReport | None:
    """A run's report: the merged one, or, from a run killed before it merged (pytest-xdist), its workers' parts
    merged here; None when there is neither."""
    path = Path(path)
    if path.exists():
        return RunReport.from_json(json.loads(path.read_text()))
    found = parts(path)
    if not found:
        return None
    first = RunReport.from_json(json.loads(next(iter(found.values())).read_text()))
    merge_parts(first, path, skip={next(iter(found))})
    return first
