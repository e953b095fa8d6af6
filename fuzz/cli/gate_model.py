"""The gate's values, shared by the gate (fuzz.cli.gate: it runs the sides and classifies their failures) and its
reports (fuzz.cli.gate_report: it renders them): what both sides run (Plan), a side and its report (Side), one
failure of one side (Finding), a failure as the gate classifies it (Row), the numerics drift of a target and judged
kind (Drift) and everything the reports show (Result)."""

from __future__ import annotations

import statistics
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from fuzz.model.case import Case
from fuzz.run.failure_key import FailureKey
from fuzz.run.installation import Installation
from fuzz.run.progress import events_file
from fuzz.run.report import FailureRecord, RunReport
from fuzz.run.report import load as load_report

SIDES = ("baseline", "candidate")
STATUSES = ("new", "fixed", "unchanged", "untested")
SEED = 0
FLOOR = 1e-3  # error/bound ratios below this (0: bitwise exact) count as this in changes and growths


@dataclass(frozen=True)
class Plan:
    """What both sides run."""

    profile: str = "ci"
    families: tuple[str, ...] = ()
    keywords: str = ""  # -k, and-ed with the families
    examples: int | None = None
    extra: tuple[str, ...] = ()  # more pytest arguments
    known: tuple[str, ...] = ()  # every family's name: "sglang-" names the sglang family, not sglang-glue's targets

    def _longer(self, family: str) -> list[str]:
        return [g for g in self.known if g != family and g.startswith(f"{family}-")]

    @property
    def selection(self) -> str:
        terms = [" and ".join([f"{f}-", *(f"not {g}-" for g in self._longer(f))]) for f in self.families]
        families = " or ".join(f"({t})" if " and " in t else t for t in terms)
        return " and ".join(f"({e})" for e in (families, self.keywords) if e)

    def asked(self, target: str) -> bool:
        return not self.families or any(
            target.startswith(f"{f}-") and not any(target.startswith(f"{g}-") for g in self._longer(f))
            for f in self.families
        )


@dataclass
class Side:
    name: str  # "baseline" or "candidate"
    where: Installation
    overrides: dict[str, str] = field(default_factory=dict)  # family -> module[:attr], passed as --gdn-target
    returncode: int | None = None
    report: RunReport | None = None  # the side's --gdn-report (None: it wrote none)
    ran: set = field(default_factory=set)  # test ids it ran (not skipped)
    seconds: float = 0.0  # its pytest run's wall time

    def pytest_args(self, out: Path, plan: Plan) -> list[str]:
        # Both sides see the same case stream: a fixed seed, an empty example database of their own, and the masks of
        # every known bug (--gdn-masks=all; the corpus replay tracks those bugs).
        # -v for the log's reader: the progress comes from the events, whatever verbosity plan.extra asks for
        return [
            "-v",
            "-p",
            "no:cacheprovider",
            f"--hypothesis-profile={plan.profile}",
            f"--hypothesis-seed={SEED}",
            "--gdn-masks=all",
            f"--gdn-db={out / f'{self.name}-examples'}",
            *([f"--gdn-examples={plan.examples}"] if plan.examples else []),
            f"--gdn-report={out / f'{self.name}.json'}",
            f"--junitxml={out / f'{self.name}.xml'}",
            f"--gdn-live-log={out / f'{self.name}-failures.jsonl'}",
            f"--gdn-events={events_file(out, self.name)}",
            *(["-k", plan.selection] if plan.selection else []),
            *([f"--gdn-require={','.join(plan.families)}"] if plan.families else []),
            *(f"--gdn-target={family}={module}" for family, module in self.overrides.items()),
            *plan.extra,
        ]

    def read(self, out: Path) -> None:
        """Read back the side's report from `out` and the tests it ran (its JUnit XML's and its report's); nothing
        when it wrote no report."""
        if (path := out / f"{self.name}.json").exists():
            self.report = load_report(path)
            self.ran = ran_tests(out / f"{self.name}.xml") | set(self.report.tests)

    def override(self, family: str) -> str | None:
        return self.overrides.get(family)

    @property
    def overrides_text(self) -> str:
        """The overrides as the command line gave them ('' for none), for the reports."""
        return ", ".join(f"{family}={module}" for family, module in self.overrides.items())

    def versions(self, plan: Plan) -> list[str]:
        return sorted(
            {
                f"{name} {t.version}"
                for name, t in self.report.targets.items()
                if self.report.examples_of(name) and t.version and plan.asked(name)
            }
        )


def ran_tests(junit: Path) -> set[str]:
    """Test ids a pytest JUnit XML file holds as run: passed, failed, errored or xfailed (skips are not runs)."""
    if not junit.exists():
        return set()
    ran = set()
    for case in ET.parse(junit).getroot().iter("testcase"):
        skipped = case.find("skipped")
        if skipped is None or skipped.get("type") == "pytest.xfail":
            ran.add(f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}")
    return ran


@dataclass(frozen=True)
class Finding:
    """One failure of one side: a distinct fuzz failure (`record`: the report's), or a failed test that is no fuzz
    finding (a corpus replay, an error: `record` None)."""

    test: str
    key: FailureKey
    detail: str = ""
    case: Case | None = None  # the minimal coordinate (None when there is none)
    record: FailureRecord | None = field(default=None, hash=False, compare=False)

    @property
    def identity(self) -> tuple[str, FailureKey]:
        return self.test, self.key

    @property
    def fuzz(self) -> bool:
        return self.record is not None

    # its key's parts
    edge = property(lambda self: self.key.edge)  # a contract edge's finding ('' for none): counted apart from bugs
    kind = property(lambda self: self.key.kind)
    cause = property(lambda self: self.key.cause)
    variant = property(lambda self: self.key.variant)
    target = property(lambda self: self.key.target)

    @property
    def coordinate(self) -> str:
        """The minimal coordinate's text ('' when there is none)."""
        return repr(self.case) if self.case else ""


@dataclass
class Row:
    """One failure as the gate classifies it; `baseline` and `candidate` are each side's finding (None: absent)."""

    status: str
    baseline: Finding | None
    candidate: Finding | None
    note: str = ""
    script: Path | None = None
    script_error: str = ""

    @property
    def finding(self) -> Finding:
        return self.candidate or self.baseline

    @property
    def failing_side(self) -> str:
        """The side a reproduction script reproduces on: the candidate for a new failure, else the baseline."""
        return "candidate" if self.status == "new" else "baseline"


@dataclass
class Drift:
    """The error-to-bound ratios of one target and judged kind over the coordinates both sides judged."""

    target: str
    kind: str
    judged: tuple[int, int]  # coordinates each side judged for this kind
    shared: list[tuple[str, float, float]]  # (coordinate, baseline ratio, candidate ratio)

    def _side(self, i: int) -> list[float]:
        return [s[1 + i] for s in self.shared]

    def stats(self, i: int) -> tuple[float, float] | None:
        """(median, max) of side i (0 baseline, 1 candidate) over the shared coordinates."""
        xs = self._side(i)
        return (statistics.median(xs), max(xs)) if xs else None

    @property
    def change(self) -> float | None:
        """Candidate median / baseline median, each floored at FLOOR."""
        b, c = self.stats(0), self.stats(1)
        return max(c[0], FLOOR) / max(b[0], FLOOR) if b and c else None

    def worst(self, n: int = 3) -> list[tuple[str, float, float, float]]:
        """The n coordinates whose ratio grew most: (coordinate, baseline, candidate, growth), growth > 1 only."""
        grown = [(c, b, a, max(a, FLOOR) / max(b, FLOOR)) for c, b, a in self.shared]
        return sorted((g for g in grown if g[3] > 1), key=lambda g: -g[3])[:n]


@dataclass
class Result:
    """Everything the gate's reports show."""

    sides: list[Side]
    plan: Plan
    rows: list[Row]
    drift: list[Drift]
    shared: tuple[int, int, int]
    out: Path

    def of(self, status: str, fuzz: bool | None = None, edges: bool = False) -> list[Row]:
        """The rows of a status (of fuzz failures or other failed tests); `edges`: those on a contract edge instead
        of the others (fuzz.model.engines.EDGES: no bugs, counted apart)."""
        return [
            r
            for r in self.rows
            if r.status == status and (fuzz is None or r.finding.fuzz == fuzz) and bool(r.finding.edge) == edges
        ]

    @property
    def passed(self) -> bool:
        """No new failure but on a contract edge."""
        return not self.of("new")
