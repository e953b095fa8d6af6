"""`gdn-fuzz gate`: the kernel-upgrade gate. Runs the corpus replay plus a derandomized fuzz budget (pytest on the
fuzz suites) against a baseline and a candidate installation of the target libraries, then compares them:

    gdn-fuzz gate --baseline venv-0.7.4 --candidate venv-0.8.0 --profile b200 --families flashinfer --parallel \\
        -- --gdn-isolate

Failures: each side's distinct fuzz failures (with their minimal coordinates) and its failed tests that are no fuzz
finding (a corpus replay that failed, or passed where it expects a failure: XPASS(strict); an error). Two sides'
failures are the same one when test id and failure key (kind, target, operation, kernel variant, cause:
fuzz.run.failure_key) agree, or when test, kind and variant agree and both shrank to the same minimal coordinate (the
library reworded its error). new: the candidate's only
(also a known bug whose corpus entry passed on the baseline and fails again on the candidate); fixed: the baseline's
only, on a test the candidate ran; untested: the baseline's only, on a test the candidate did not run (a target
unavailable there): no verdict; unchanged: both. Each new or fixed failure with a coordinate gets a standalone
reproduction script (scripts/), to run with either side's python.

Numerics drift: per target and judged kind, the error-to-bound ratios of the coordinates both sides judged (both
draw the same cases: a fixed seed, an empty example database each, every known-bug mask; a test that fails on one
side draws other cases after its first failure, so fewer of its cases are shared): median and max per side, the
change (candidate median / baseline median, each floored at FLOOR) and the coordinates whose ratio grew most.

Writes into --out: summary.md (also --markdown FILE, and appended to $GITHUB_STEP_SUMMARY when set), gate.xml
(JUnit), report.html, scripts/, and each side's --gdn-report JSON, log, JUnit XML, live failure log and progress
events (NAME-events.jsonl, fuzz.run.events); an earlier gate's results there move aside first, into OUT/gate-TIME
(fuzz.cli.earlier). Exit status: 1 on any new failure, 2 when a side could not be run, else 0.

An installation is a python executable (a venv's bin/python, or the venv directory itself) or a directory put first
on PYTHONPATH (`pip install --no-deps --target DIR lib==X`). Both sides run this gdn-fuzz's fuzz suites.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import sys
from pathlib import Path

from fuzz.cli.earlier import keep_results
from fuzz.cli.gate_model import SIDES, STATUSES, Drift, Finding, Plan, Result, Row, Side
from fuzz.cli.parser import Parser
from fuzz.judge.failures import normalized
from fuzz.model.case import Case
from fuzz.run import events
from fuzz.run.failure_key import FailureKey
from fuzz.run.installation import Installation
from fuzz.run.paths import unwritable_dir, unwritable_file
from fuzz.run.progress import Progress, Watch
from fuzz.run.report import XPASS, RunReport

_CORPUS_TEST = re.compile(r"::test_corpus\[([^\]:]+):(.+)\]$")


def run_sides(sides: list[Side], out: Path, plan: Plan, parallel: bool) -> None:
    """Run each side's pytest, showing progress; read back each side's report and the tests it ran."""
    watches = [Watch.of(side.name, out) for side in sides]
    for side, watch in zip(sides, watches):  # an earlier gate's
        for stale in (out / f"{side.name}.json", out / f"{side.name}-failures.jsonl", out / f"{side.name}.xml"):
            stale.unlink(missing_ok=True)
        events.clear(watch.events)
        shutil.rmtree(out / f"{side.name}-examples", ignore_errors=True)
    with Progress(watches) as progress:
        for side, watch in zip(sides, watches):
            watch.begin(side.where.pytest(side.pytest_args(out, plan), out / f"{side.name}.log"))
            if not parallel:
                progress.until(lambda w=watch: w.exit is not None)
        progress.until(lambda: all(w.exit is not None for w in watches))
    for side, watch in zip(sides, watches):
        side.returncode, side.seconds = watch.exit, watch.elapsed()
        if side.returncode in (0, 1):  # 0 passed, 1 some failed
            side.read(out)


# ---- failures ----------------------------------------------------------------------------------------------------


def findings(report: RunReport) -> list[Finding]:
    found = [Finding(f.test, f.failure.key, f.failure.detail, f.failure.case, f) for f in report.failures]
    fuzzed = {f.test for f in report.failures}
    for e in report.errors:
        if e.test in fuzzed:  # the fuzz test's own failure line, already one finding per distinct failure
            continue
        kind, detail = e.parsed()
        if e.when != "call":
            kind = f"{kind} at {e.when}"
        target, case = _corpus_case(e.test)
        found.append(
            Finding(
                e.test,
                FailureKey(kind, target, case.op if case else "", "", normalized(detail)),
                detail.splitlines()[0][:300] if detail else "",
                case,
            )
        )
    return found


def _corpus_case(test: str) -> tuple[str, Case | None]:
    """(target, case) of a corpus replay test's entry, ('', None) for another test or an entry not found. Read from
    the test id (fuzz/test_corpus.py's parametrization, TARGET:ENTRY), the one link a failed test's report line has
    to its entry; the entry's file holds the case as a value."""
    from fuzz.run import corpus

    m = _CORPUS_TEST.search(test)
    if not m:
        return "", None
    try:
        entry = corpus.load(corpus.default_dir() / f"{m[2]}.json")
    except corpus.CorpusError:
        return "", None
    return (entry.target, entry.case) if entry.target == m[1] else ("", None)


def compare(baseline: Side, candidate: Side) -> list[Row]:
    base = {f.identity: f for f in findings(baseline.report)}
    cand = {f.identity: f for f in findings(candidate.report)}
    rows = [Row("unchanged", base.pop(k), cand.pop(k)) for k in sorted(base.keys() & cand.keys())]
    by_case = {(f.test, f.kind, f.variant, f.case): k for k, f in base.items() if f.case}
    for k, f in sorted(cand.items()):
        if (b := by_case.get((f.test, f.kind, f.variant, f.case))) is not None and b in base:
            rows.append(Row("unchanged", base.pop(b), cand.pop(k), f"same minimal case; cause was: {b[1].cause}"))
    for f in cand.values():
        if f.kind == XPASS:  # the known bug no longer reproduces
            rows.append(
                Row("fixed", None, f, "the corpus entry's known bug does not reproduce on the candidate")
                if f.test in baseline.ran
                else Row("untested", None, f, "the baseline did not run this test")
            )
        else:
            rows.append(Row("new", None, f, "" if f.test in baseline.ran else "the baseline did not run this test"))
    for f in base.values():
        if f.test not in candidate.ran:
            rows.append(Row("untested", f, None, "the candidate did not run this test"))
        elif f.kind == XPASS:
            rows.append(
                Row("new", f, None, "the corpus entry's known bug reproduces on the candidate, not on the baseline")
            )
        else:
            rows.append(Row("fixed", f, None))
    return sorted(rows, key=lambda r: (STATUSES.index(r.status), r.finding.test, r.finding.kind))


def export_scripts(rows: list[Row], sides: list[Side], directory: Path) -> None:
    """A standalone reproduction script per new or fixed failure that has a coordinate; an export error is noted on
    its row, not raised."""
    from fuzz.export.script import export_script
    from fuzz.targets.registry import TARGETS

    family = {t.name: t.family.name for t in TARGETS}
    by_name = {s.name: s for s in sides}
    for n, row in enumerate((r for r in rows if r.status in ("new", "fixed") and r.finding.case), 1):
        f, side = row.finding, by_name[row.failing_side]
        other = next(s for s in sides if s is not side)
        note = (
            f"gdn-fuzz gate: {row.status} failure {f.kind} of {f.test}; it reproduces on the {side.name} "
            f"({side.where.spec}), not on the {other.name} ({other.where.spec}): run it with each side's python."
        )
        try:
            text = export_script(f.case, f.target, library_module=side.override(family.get(f.target, "")), note=note)
        except Exception as e:  # noqa: BLE001 - one failed export must not fail the gate
            row.script_error = f"{type(e).__name__}: {e}"
            continue
        directory.mkdir(parents=True, exist_ok=True)
        row.script = directory / re.sub(r"[^\w.-]+", "_", f"{row.status}-{n}-{f.target}-{f.kind}.py")
        row.script.write_text(text)


# ---- numerics drift ----------------------------------------------------------------------------------------------


def _ratios(report: RunReport) -> dict[tuple[str, str], dict[tuple[str, Case], float]]:
    """(target, kind) -> {(test, case): error/bound}; a case checked twice keeps its worst ratio."""
    found: dict = {}
    for r in report.records:
        for kind, ratio in r.ratios.items():
            per = found.setdefault((r.target, kind), {})
            per[r.coordinate] = max(per.get(r.coordinate, 0.0), ratio)
    return found


def drift(baseline: RunReport, candidate: RunReport) -> list[Drift]:
    base, cand = _ratios(baseline), _ratios(candidate)
    rows = []
    for key in sorted(base.keys() | cand.keys()):
        b, c = base.get(key, {}), cand.get(key, {})
        shared = sorted(b.keys() & c.keys(), key=lambda k: (k[0], repr(k[1])))
        rows.append(Drift(*key, (len(b), len(c)), [(repr(k[1]), b[k], c[k]) for k in shared]))
    return rows


def shared_coordinates(baseline: RunReport, candidate: RunReport) -> tuple[int, int, int]:
    """Coordinates (test, case) judged by the baseline, by the candidate, by both."""
    judged = [{r.coordinate for r in side.records if r.ratios} for side in (baseline, candidate)]
    return len(judged[0]), len(judged[1]), len(judged[0] & judged[1])


# What a gate writes in --out: its reports, scripts, and each side's report, logs and events (NAME*)
RESULTS = ("summary.md", "gate.xml", "report.html", "scripts", *(f"{side}*" for side in SIDES))


def main(argv: list[str]) -> int:
    """`gdn-fuzz gate ARGV`: check the sides, run them, compare them, write the reports; the exit status the module
    docstring gives."""
    parser = _parser()
    args = parser.parse_args(argv)
    sides, plan = _checked(parser, args)
    if why := _unrunnable(sides, plan, args.allow_same):
        print(f"gdn-fuzz gate: error: {why}", file=sys.stderr)
        return 2
    out = _fresh(args.out)
    run_sides(sides, out, plan, args.parallel)
    if any(not s.report for s in sides):
        return _not_run(sides, out, args.markdown)
    rows = compare(*sides)
    export_scripts(rows, sides, out / "scripts")
    result = Result(
        sides,
        plan,
        rows,
        drift(sides[0].report, sides[1].report),
        shared_coordinates(sides[0].report, sides[1].report),
        out,
    )
    _write(result, args.markdown)
    return 0 if result.passed else 1


def _parser() -> Parser:
    """The gate's arguments: two installations, each with its overrides, and what both sides run."""
    parser = Parser(prog="gdn-fuzz gate", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name in SIDES:
        parser.add_argument(f"--{name}", required=True, metavar="PYTHON_OR_DIR")
        parser.add_argument(
            f"--{name}-override",
            action="append",
            default=[],
            metavar="FAMILY=module[:attr]",
            help=f"--gdn-target for the {name} side only",
        )
    parser.add_argument("--profile", default="ci", help="ci (CPU, the default), or h200 / b200 on a GPU host")
    parser.add_argument(
        "--families",
        default="",
        metavar="FAMILY,...",
        help="fuzz and replay only these families (fla, sglang, sglang-glue, vllm, flashinfer); they must be available",
    )
    parser.add_argument("-k", default="", metavar="EXPR", help="pytest -k expression, and-ed with --families")
    parser.add_argument(
        "--examples",
        type=int,
        default=None,
        help="examples per test (default: the profile's)",
    )
    parser.add_argument("--parallel", action="store_true", help="run both sides at once")
    parser.add_argument("--out", type=Path, default=Path("gate-out"))
    parser.add_argument(
        "--markdown",
        type=Path,
        default=None,
        metavar="FILE",
        help="also write the markdown summary here (it always goes to OUT/summary.md)",
    )
    parser.add_argument(
        "--allow-same",
        action="store_true",
        help="run even when both sides load the same build of every family (a self-check)",
    )
    parser.add_argument("pytest_args", nargs="*", help="after --: more pytest arguments for both sides")
    return parser


def _checked(parser: Parser, args: argparse.Namespace) -> tuple[list[Side], Plan]:
    """The two sides and what both run, or a one-line usage error (exit 2): an installation that is none, a
    malformed override, an unknown profile or family, an --out or --markdown it could not write."""
    if why := unwritable_dir(args.out):
        parser.error(f"--out {args.out}: {why}")
    if args.markdown and (why := unwritable_file(args.markdown)):
        parser.error(f"--markdown {args.markdown}: {why}")
    from fuzz.targets.registry import FAMILIES, parse_overrides

    try:
        sides = [
            Side(
                name,
                Installation(name, getattr(args, name)),
                parse_overrides(getattr(args, f"{name}_override"), f"--{name}-override"),
            )
            for name in SIDES
        ]
    except ValueError as e:
        parser.error(str(e))
    from fuzz.generate.profiles import PROFILES, unknown_profile

    if args.profile not in PROFILES:
        parser.error(f"--profile {args.profile}: {unknown_profile(args.profile)}")
    families = tuple(f for f in args.families.split(",") if f)
    if unknown := [f for f in families if f not in FAMILIES]:
        parser.error(f"--families: {', '.join(unknown)} is no target family; expected some of {', '.join(FAMILIES)}")
    return sides, Plan(args.profile, families, args.k, args.examples, tuple(args.pytest_args), tuple(FAMILIES))


def _unrunnable(sides: list[Side], plan: Plan, allow_same: bool) -> str | None:
    """Why the gate stops before two sides run for nothing: its report could not be drawn, or the sides' verdict
    could mean nothing (preflight)."""
    if importlib.util.find_spec("matplotlib") is None:  # the HTML report's plots
        return "its report needs matplotlib: pip install 'gdn-fuzz[gate]'"
    return preflight(sides, plan.families, allow_same)


def _fresh(out: Path) -> Path:
    """The --out directory, made and resolved, an earlier gate's results moved aside (never deleted: a second gate
    into the default gate-out/ used to delete the first one's reports, scripts and logs)."""
    out.mkdir(parents=True, exist_ok=True)
    out = out.resolve()
    keep_results(out, RESULTS, "gate")
    return out


def _not_run(sides: list[Side], out: Path, also: Path | None) -> int:
    """A side that could not be run: no verdict, its log's end in the summary and the JUnit XML; exit 2."""
    from fuzz.cli.gate_report import not_run_markdown, write_junit

    text = not_run_markdown(sides, out)
    _publish(text, out, also)
    write_junit(out / "gate.xml", None, text)
    print(text, file=sys.stderr)
    return 2


def _write(result: Result, also: Path | None) -> None:
    """The verdict's reports: the markdown summary, the JUnit XML and the HTML report, and where they are."""
    from fuzz.cli.gate_report import markdown, write_html, write_junit

    out = result.out
    text = markdown(result)
    _publish(text, out, also)
    write_junit(out / "gate.xml", result, text)
    write_html(out / "report.html", result)
    print(text, f"report: {out / 'report.html'}, JUnit: {out / 'gate.xml'}, summary: {out / 'summary.md'}", sep="\n")


def preflight(sides: list[Side], families: tuple[str, ...], allow_same: bool) -> str | None:
    """Why no verdict could mean anything, in one line, before either side runs: a family the gate was asked for
    that does not load on a side (each of its tests would fail the same way on both, and pass the gate as
    "unchanged"); a side's directory that holds none of the families (its python would load its own); both sides
    loading the same build of every family (unless allow_same). None when the sides can be compared, or when a side's
    python cannot even say (its run reports why)."""
    from fuzz.targets.registry import FAMILIES

    asked = list(families) or list(FAMILIES)
    found = {}
    for side in sides:
        if (libraries := side.where.libraries(asked, side.overrides)) is None:
            return None
        found[side.name] = libraries
    for family in families:
        for side in sides:
            if why := found[side.name][family].get("why"):
                return (
                    f"{family} is unavailable on the {side.name} ({side.where.spec}): {why}; the gate compares it "
                    "on both sides"
                )
    for side in sides:
        if side.where.env and not side.overrides:  # a directory put first on PYTHONPATH
            home = str(Path(side.where.spec).resolve())
            if not any(lib.get("where", "").startswith(home) for lib in found[side.name].values()):
                held = sorted(p.name for p in Path(home).iterdir())[:8]
                return (
                    f"the {side.name} directory {side.where.spec} holds none of {', '.join(asked)} (it holds: "
                    f"{', '.join(held) or 'nothing'}), so its python would load its own"
                )
    loaded = [f for f in asked if all("why" not in found[s.name][f] for s in sides)]
    same = [f for f in loaded if len({json.dumps(found[s.name][f], sort_keys=True) for s in sides}) == 1]
    if loaded and same == loaded and not allow_same:
        what = ", ".join(
            f"{f} {found[sides[0].name][f].get('version') or ''} from "
            f"{found[sides[0].name][f].get('override') or found[sides[0].name][f].get('where')}"
            for f in same
        )
        return f"both sides load the same build ({what}): the gate would compare it with itself (--allow-same runs it)"
    return None


def _publish(text: str, out: Path, also: Path | None) -> None:
    """The markdown summary into OUT/summary.md, --markdown and a GitHub Actions step summary."""
    for path in filter(None, (out / "summary.md", also)):
        path.write_text(text)
    if step := os.environ.get("GITHUB_STEP_SUMMARY"):
        with open(step, "a") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
