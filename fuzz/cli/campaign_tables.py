"""The campaign's tables: per installation, every distinct failure (kind, target and operation, minimal coordinate,
time to first hit, hits) with its triage against the known-bug records (fuzz.targets.triage: the records that
explain it, or NEW; an argument TypeError is ADAPTER ERROR, a defect of gdn-fuzz; a failure on a contract edge of a
serving engine is CONTRACT EDGE, no bug: fuzz.model.engines.EDGES), then the same failures rolled up per known bug."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from fuzz.model.case import Case
from fuzz.model.engines import EDGES
from fuzz.run.report import FailedTest, FailureRecord, LoggedFailure, TargetRow
from fuzz.run.result import Failure
from fuzz.targets import triage

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # reports written before failures dropped the DSL's colour codes
ADAPTER_ERROR = re.compile(r"TypeError: .*(unexpected keyword argument|missing \w+ required|positional argument)")


@dataclass(frozen=True)
class Settings:
    """What a campaign was run with: stored in its summary.json, so --render titles it as it ran."""

    profile: str
    test_seconds: float
    masks: str
    workers: str
    families: tuple[str, ...] = ()
    pytest: tuple[str, ...] = ()  # the extra pytest arguments of every run

    @classmethod
    def of(cls, args) -> Settings:
        return cls(
            args.profile,
            args.test_seconds,
            args.masks,
            str(args.workers),
            tuple(args.families or ()),
            tuple(args.pytest or ()),
        )

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> Settings:
        return cls(
            d["profile"],
            float(d["test_seconds"]),
            d["masks"],
            str(d["workers"]),
            tuple(d.get("families", ())),
            tuple(d.get("pytest", ())),
        )


@dataclass(frozen=True)
class FailureRow:
    """One distinct failure of a run, as the campaign's summary.json holds it: a report's failure record, or
    (`record` None) the smallest logged case of a failure whose shrink was cut off (fuzz.cli.campaign.unfinished: the
    live log's line, with no test, first hit or hits)."""

    target: str
    failure: Failure
    record: FailureRecord | None = field(default=None, hash=False)

    @classmethod
    def from_json(cls, d: dict) -> FailureRow:
        """A row with a first hit is a report's record; one without, the live log's line."""
        if d["first_hit_seconds"] is None:
            logged = LoggedFailure.from_json(d)
            return cls(logged.target, logged.failure)
        record = FailureRecord.from_json(d)
        return cls(record.target, record.failure, record)

    @property
    def test(self) -> str | None:
        return self.record.test if self.record else None

    @property
    def first_hit_seconds(self) -> float | None:
        return self.record.first_hit_seconds if self.record else None

    @property
    def hits(self) -> int | None:
        return self.record.hits if self.record else None

    @property
    def minimal(self) -> bool:
        return bool(self.record and self.record.minimal)

    @property
    def cause(self) -> str:
        """Its key's cause (a summary written before failures carried their key: its detail)."""
        return _ANSI.sub("", self.failure.cause)

    @property
    def edge(self) -> str:
        """The contract edge it was found on ('' for none: fuzz.model.engines.EDGES)."""
        return self.failure.key.edge

    @property
    def adapter_error(self) -> bool:
        """A TypeError about the call's arguments: a defect of gdn-fuzz, never a finding."""
        return bool(ADAPTER_ERROR.search(self.failure.detail))


@dataclass(frozen=True)
class RunRow:
    """One run (installation x family) of a campaign, as its summary.json holds it (fuzz.cli.campaign.job_result
    writes it)."""

    installation: str
    family: str
    seconds: float
    exit: int
    killed: bool
    examples: int  # checks of the family's targets
    distinct: int  # distinct cases among them
    buckets: int  # dispatch buckets among them
    failures: tuple[FailureRow, ...]
    errors: tuple[FailedTest, ...]
    environment: Mapping = field(default_factory=dict, hash=False)
    targets: Mapping[str, TargetRow] = field(default_factory=dict, hash=False)  # the report's target summaries
    db_per_run: bool | None = None  # None: a summary written before runs said

    @classmethod
    def from_json(cls, d: dict) -> RunRow:
        plain = ("installation", "family", "seconds", "exit", "killed", "examples", "distinct", "buckets")
        return cls(
            *(d[name] for name in plain),
            tuple(map(FailureRow.from_json, d["failures"])),
            tuple(map(FailedTest.from_json, d["errors"])),
            d["environment"],
            {name: TargetRow.from_json(t) for name, t in d["targets"].items()},
            d.get("db_per_run"),
        )

    @property
    def broken(self) -> bool:
        """It ran nothing, broke, or was cut off without a report."""
        return self.exit not in (0, 1) or not self.examples


def markdown(runs: list[dict], settings: Settings, stored: bool = True) -> str:
    """The campaign's tables, from the runs of its summary.json; `stored`: the settings are the summary's own (else
    given on --render's command line, for a summary.json written before campaigns stored them)."""
    given = "" if stored else " (settings from the command line: this summary.json does not hold them)"
    lines = [
        f"# gdn-fuzz campaign: profile {settings.profile}, {settings.test_seconds:g} s per fuzz test, masks "
        f"{settings.masks}, {settings.workers} worker(s) per run{given}",
        "",
    ]
    if settings.pytest:
        lines += [f"pytest arguments of every run: `{' '.join(settings.pytest)}`", ""]
    for r in map(RunRow.from_json, runs):
        env = r.environment
        lines += [
            f"## {r.installation}: {r.family} ({r.seconds} s{', KILLED' if r.killed else ''}, "
            f"pytest exit {r.exit}; {env.get('gpu') or 'no GPU'}, torch {env.get('torch', '?')}"
            f"{_database(r.db_per_run)})",
            "",
        ]
        minutes = max(r.seconds, 1) / 60  # a run that broke at once took 0 s: its summary, not a ZeroDivisionError
        lines += [
            f"{r.distinct} distinct cases ({r.examples} checks) in {r.seconds} s: "
            f"**{r.distinct / minutes:.0f} distinct cases per minute**; {r.buckets} compile buckets "
            f"covered ({10 * r.buckets / minutes:.0f} per 10 minutes)",
            "",
        ]
        for name, t in sorted(r.targets.items()):
            if t.unavailable:
                lines.append(f"- {name}: UNAVAILABLE: {t.unavailable}")
            else:
                runs = ", ".join(
                    f"{op} {n} ({_share(t.distinct.get(op, n), r.distinct, minutes)})" for op, n in t.examples.items()
                )
                lines.append(
                    f"- {name} {t.version or ''}: {runs or 'no examples'}"
                    + "".join(f"; {op} UNAVAILABLE: {why}" for op, why in t.ops_off.items())
                )
        lines += [
            "",
            "| # | kind | target / op | minimal coordinate | first hit | hits | note |",
            "|---|---|---|---|---|---|---|",
        ]
        for i, f in enumerate(r.failures, 1):
            hit = "-" if f.first_hit_seconds is None else f"{f.first_hit_seconds:.1f} s"
            case = f.failure.case
            lines.append(
                f"| {i} | {f.failure.kind} | {f.target} {case.op} | `{case!r}` | {hit} | {f.hits or '-'} | "
                f"{_note(f, r.targets.get(f.target))} |"
            )
        if not r.failures:
            lines.append("| - | none | | | | | |")
        if edges := sum(bool(f.edge) for f in r.failures):
            lines.append(f"\n{edges} of them on a contract edge (CONTRACT EDGE: not bugs, counted apart below)")
        lines += [
            f"- error (not a finding): {e.test}: {e.message[:300]}"
            for e in r.errors
            if not any(e.test == f.test for f in r.failures)
        ]
        lines += ["", *by_bug(r), ""]
    return "\n".join(lines)


def _share(distinct: int, total: int, minutes: float) -> str:
    """A target and operation's distinct cases, per minute of the run and as a share of all of the run's."""
    return f"{distinct} distinct, {distinct / minutes:.0f} per minute, {100 * distinct / max(total, 1):.0f}%"


def _database(own: bool | None) -> str:
    """Whether a run had an example database of its own (--db-per-run), so that its times to first hit are its own;
    nothing for a summary written before runs said."""
    return "" if own is None else "; its own example database" if own else "; no example database of its own"


def _note(f: FailureRow, row: TargetRow | None) -> str:
    """The triage column: an adapter error (ours), else the known bugs that explain the finding or NEW; then whether
    the shrink finished, and the library's first line (a KernelCrash: which call crashed, its attribution)."""
    first = " ".join(_ANSI.sub("", f.failure.detail).split())[:160]  # the DSL's error text starts on its second line
    if f.failure.attribution:
        first = f.failure.attribution.summary
    if f.adapter_error:
        return f"ADAPTER ERROR (ours) {first}"
    if f.edge:
        return f"CONTRACT EDGE {f.edge} ({EDGES[f.edge].contract}): {first}"
    known = triage.verdict(_explaining(f, row))
    return f"{known}{'' if f.minimal else '; not minimal (shrink cut off)'}: {first}"


def _explaining(f: FailureRow, row: TargetRow | None) -> tuple:
    """The known bugs that explain a failure of the summary (fuzz.targets.triage.explaining), by its cause: the
    target's own at the release its run reported, and those of a library it calls beneath (TargetRow.beneath: SGLang's
    FlashInfer glue over the installed FlashInfer)."""
    from fuzz.targets.registry import TARGETS

    path = next(t.path for t in TARGETS if t.name == f.target)
    releases = [(path, row.version if row else None)]
    if row and (under := row.beneath.get(f.failure.case.op)):
        releases.append(under)
    calls = (*f.failure.before, f.failure.case)
    found = {b.id: b for p, v in releases for b in triage.explaining(f.failure.kind, f.cause, calls, p, v)}
    return tuple(found.values())


def by_bug(r: RunRow) -> list[str]:
    """One run's failures rolled up per known bug (NEW: those no record explains; ADAPTER ERROR apart), in order of
    first hit: how many distinct failures, their kinds and targets, the earliest hit with the cases its test checked
    before it, and the smallest case. A failure without a first hit (the live log's, from a run cut off) or written
    before reports counted the cases before it shows "-"."""
    groups = defaultdict(list)
    for f in r.failures:
        if f.adapter_error or f.edge:
            groups["ADAPTER ERROR (ours)" if f.adapter_error else f"CONTRACT EDGE {f.edge}"].append(f)
            continue
        groups[" + ".join(b.id for b in _explaining(f, r.targets.get(f.target))) or "NEW"].append(f)
    if not groups:
        return []
    earliest = lambda fs: min((f.record for f in fs if f.record), key=lambda r: r.first_hit_seconds, default=None)
    lines = [
        "| known bug | distinct failures | kinds | targets | first hit | cases before | smallest case |",
        "|---|---|---|---|---|---|---|",
    ]
    order = lambda kv: (earliest(kv[1]) is None, earliest(kv[1]).first_hit_seconds if earliest(kv[1]) else 0)
    for name, fs in sorted(groups.items(), key=order):
        small = repr(min((f.failure.case for f in fs), key=Case.size_key))
        first = earliest(fs)
        hit, before = (first.first_hit_seconds, first.examples_before) if first else (None, None)
        lines.append(
            f"| {name} | {len(fs)} | {', '.join(sorted({f.failure.kind for f in fs}))} | "
            f"{', '.join(sorted({f.target for f in fs}))} | {'-' if hit is None else f'{hit:.1f} s'} | "
            f"{'-' if before is None else before} | "
            f"`{small if len(small) <= 130 else small[:127] + '...'}` |"
        )
    return lines
