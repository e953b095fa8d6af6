"""`gdn-fuzz campaign`: time-boxed fuzzing of target families on one or more installations at once, one pytest run
per (installation, family), then one table per installation of every distinct failure: its kind, target and
operation, minimal coordinate, time to first hit and hits. Known-bug masks are off unless asked (--masks): a
campaign hunts. A run cut off while shrinking still reports the smallest case of each failure its live log holds,
marked "not minimal"; a later campaign given its --out (--resume) finishes those shrinks first. A failure whose
cause is a TypeError about the call's arguments is flagged ADAPTER ERROR: it is a defect of gdn-fuzz, never a
finding. While the runs go, a terminal shows a live table of each (elapsed time, tests finished, examples, distinct
failures, the tests in flight: fuzz.run.progress, from each run's --gdn-events); a log gets one line per finished
test.

    gdn-fuzz campaign --profile h200 --test-seconds 60 --workers 2 --out campaign/ \\
        --installation 0.7.4=/tmp/site --installation 0.6.11=/tmp/site-fi0611 flashinfer-
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from fuzz.cli.campaign_tables import RunRow, Settings, markdown
from fuzz.cli.earlier import keep_results
from fuzz.cli.parser import Parser
from fuzz.generate.profiles import PROFILES
from fuzz.run import events, installation, warming
from fuzz.run.memory import MEMORY_DIR
from fuzz.run.paths import unwritable_dir
from fuzz.run.progress import Progress, Watch, events_file
from fuzz.run.report import LoggedFailure, RunReport, live_log
from fuzz.run.report import load as load_report
from fuzz.run.workers import resolve as resolve_workers
from fuzz.run.workers import shared


@dataclass
class Job:
    where: installation.Installation
    family: str
    out: Path
    xdist: tuple[str, ...] | None = None  # its pytest-xdist arguments (worker_args); None: from --workers alone

    @property
    def name(self) -> str:
        return f"{self.where.label}-{self.family.rstrip('-')}"


def selected(family: str, pytest_args: list[str]) -> tuple[str, list[str]]:
    """The run's -k: the family and-ed with each -k among the pytest arguments (pytest keeps only the last -k, so
    passing them on would replace the family); and the other arguments."""
    expressions, rest, args = [], [], iter(pytest_args)
    for arg in args:
        if arg == "-k":
            expressions.append(next(args, ""))
        elif arg.startswith("-k") and not arg.startswith("--"):
            expressions.append(arg[2:])
        else:
            rest.append(arg)
    return " and ".join(f"({e})" for e in (family, *expressions) if e), rest


def worker_args(workers: str, runs: int, profile: str) -> list[str]:
    """Each run's pytest-xdist arguments: a count as given (per run); `auto` resolved by the run itself when it runs
    alone, and shared among the runs when several run at once on the GPU (fuzz.run.workers.shared), so releases
    fuzzed side by side split one GPU's workers instead of each taking all of them."""
    if workers != "auto":
        return [f"-n{workers}"] if int(workers) > 1 else []
    if runs == 1:
        return ["--gdn-workers=auto"]
    total = resolve_workers("auto", PROFILES[profile].device)
    each = shared(total, runs)
    print(f"gdn-fuzz campaign: --workers auto: {total} for the GPU, {each} for each of {runs} runs", file=sys.stderr)
    return [f"-n{each}"] if each > 1 else []


def run_job(job: Job, args, watch: Watch | None = None) -> dict:
    report, live = job.out / f"{job.name}.json", job.out / f"{job.name}-failures.jsonl"
    progress = events_file(job.out, job.name)
    resume = args.resume / live.name if args.resume else None  # the same job's live log in an earlier campaign
    for stale in (report, live, *job.out.glob(f"{report.name}.gw*")):  # an earlier campaign's, in the same --out
        stale.unlink(missing_ok=True)
    events.clear(progress)
    selection, extra = selected(job.family, args.pytest)
    # -v for the log's reader: the progress comes from the events, whatever verbosity the extra arguments ask for
    cmd = [
        "-v",
        "-p",
        "no:cacheprovider",
        f"--hypothesis-profile={args.profile}",
        "-k",
        selection,
        f"--gdn-masks={args.masks}",
        f"--gdn-test-seconds={args.test_seconds:g}",
        f"--gdn-shrink-seconds={args.shrink_seconds:g}",
        f"--gdn-report={report}",
        f"--gdn-live-log={live}",
        f"--gdn-events={progress}",
        *(worker_args(str(args.workers), 1, args.profile) if job.xdist is None else job.xdist),
        *([f"--gdn-db={job.out / (job.name + '-db')}"] if args.db_per_run else []),
        *([f"--gdn-resume={resume}"] if resume and resume.is_file() else []),
        *extra,
    ]
    began = time.monotonic()
    proc = job.where.pytest(cmd, job.out / f"{job.name}.log")
    if watch is not None:
        watch.begin(proc)
    try:
        proc.wait(timeout=args.timeout)
        killed = False
    except subprocess.TimeoutExpired:  # cut off (while shrinking, usually): its xdist and isolated workers too
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        killed = True
    return job_result(job, time.monotonic() - began, proc.returncode, killed, args.db_per_run)


def job_result(job: Job, seconds: float, exit: int, killed: bool, db_per_run: bool) -> dict:
    """A finished (or killed) job's row of the campaign's summary.json, from the report and live log it left."""
    report, live = job.out / f"{job.name}.json", job.out / f"{job.name}-failures.jsonl"
    data = load_report(report) or RunReport("", "")  # none: the run died before its first test ended
    ours = [f for f in data.failures if f.target.startswith(job.family)]
    failures = [f.to_json() for f in ours]
    if killed:
        failures += unfinished(live, {(f.target, f.failure.kind) for f in ours}, job.family)
    records = [r for r in data.records if r.target.startswith(job.family)]
    return {
        "installation": job.where.label,
        "family": job.family,
        "seconds": round(seconds, 1),
        "exit": exit,
        "killed": killed,
        "db_per_run": db_per_run,
        "failures": failures,
        "errors": [e.to_json() for e in data.errors],
        "environment": data.environment,
        "examples": len(records),
        "distinct": len({(r.target, r.case) for r in records}),
        "buckets": len({r.bucket for r in records}),
        "targets": {n: data.target_summary(n).to_json() for n in data.targets if n.startswith(job.family)},
    }


def unfinished(live: Path, reported: set, family: str) -> list[dict]:
    """The smallest logged case of each (target, kind) of the family's targets that the report does not hold: its
    shrink was cut off."""
    smallest: dict[tuple[str, str], LoggedFailure] = {}
    for logged in live_log(live) if live.exists() else []:
        if not logged.target.startswith(family):  # the job's report rows are its family's; so are its unfinished
            continue
        key, case = (logged.target, logged.kind), logged.case
        if key not in reported and (key not in smallest or case.size_key() < smallest[key].case.size_key()):
            smallest[key] = logged
    return [
        {
            "target": f.target,
            "kind": f.kind,
            "case": repr(f.case),
            "detail": f.detail,
            "key": f.key.to_json(),
            "minimal": False,
            "first_hit_seconds": None,
            "hits": None,
            "test": None,
        }
        for _, f in sorted(smallest.items(), key=lambda kv: kv[0])
    ]


def _check(args, wheres: list[installation.Installation]) -> None:
    """Refuse what would run nothing or mix two runs' files up, before any run starts."""
    from fuzz.targets.registry import TARGETS

    for family in args.families:
        if not any(t.name.startswith(family) for t in TARGETS):
            raise ValueError(f"family {family!r} is the prefix of no target name (fla-, sglang-, flashinfer-...)")
    labels = [w.label for w in wheres]
    if twice := sorted({label for label in labels if labels.count(label) > 1}):
        raise ValueError(
            f"installation label {twice[0]!r} given twice: each run's files are named by it; give LABEL=PATH"
        )
    for name, value, ok, expected in (
        ("--test-seconds", args.test_seconds, args.test_seconds > 0, "> 0"),
        ("--shrink-seconds", args.shrink_seconds, args.shrink_seconds >= 0, ">= 0"),
        (
            "--workers",
            args.workers,
            args.workers == "auto" or str(args.workers).isdigit() and int(args.workers) >= 1,
            ">= 1 or auto",
        ),
        ("--timeout", args.timeout, args.timeout is None or args.timeout > 0, "> 0"),
        ("--warm-jobs", args.warm_jobs, args.warm_jobs >= 1, ">= 1"),
    ):
        if not ok:
            raise ValueError(f"{name} {value if isinstance(value, str) else f'{value:g}'}: expected {expected}")
    if why := unwritable_dir(args.out):
        raise ValueError(f"--out {args.out}: {why}")
    if args.resume and not args.resume.is_dir():
        raise ValueError(f"--resume {args.resume}: no such directory (an earlier campaign's --out)")
    if args.resume and args.resume.resolve() == args.out.resolve():
        raise ValueError(
            f"--resume {args.resume}: give the new campaign another --out (its runs would replace the "
            "live logs they resume)"
        )


def parser() -> Parser:
    """The command's arguments."""
    p = Parser(prog="gdn-fuzz campaign", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("families", nargs="*", help="target-name prefixes (flashinfer-, fla-, sglang-, sglang-glue-, vllm-)")
    p.add_argument(
        "--installation",
        action="append",
        default=[],
        metavar="[LABEL=]PYTHON_OR_DIR",
        help="run on this installation (several: each release at once); default: this interpreter",
    )
    p.add_argument("--profile", default="h200", choices=PROFILES)
    p.add_argument("--test-seconds", type=float, default=60.0, help="time box per fuzz test")
    p.add_argument("--shrink-seconds", type=float, default=120.0)
    p.add_argument(
        "--workers",
        default="1",
        help="pytest-xdist workers per run (-n), or auto: the count where distinct cases per minute peaked for the "
        "GPU (pytest's --gdn-workers auto, fuzz.run.workers), shared among the runs when several run at once",
    )
    p.add_argument("--masks", default="none", choices=("none", "release", "all"))
    p.add_argument("--timeout", type=float, default=None, help="seconds before a run is killed")
    p.add_argument(
        "--db-per-run",
        action="store_true",
        help="an example database per run (OUT/NAME-db) instead of the profile's shared one: no run replays "
        "what another found, so times to first hit are each run's own",
    )
    p.add_argument("--out", type=Path, default=Path("campaign"))
    p.add_argument(
        "--resume",
        type=Path,
        metavar="OLD_OUT",
        help="an earlier campaign's --out: each run first finishes the shrinks the same run there left cut "
        "off (pytest --gdn-resume OLD_OUT/NAME-failures.jsonl, where that file exists)",
    )
    p.add_argument(
        "--render",
        type=Path,
        metavar="SUMMARY_JSON",
        help="run nothing: print the tables of an earlier campaign's summary.json, triaged anew against "
        "today's known-bug records, titled with the settings it stored",
    )
    p.add_argument(
        "--warm",
        action="store_true",
        help="compile the profile's bucket plan beside the runs (gdn-fuzz warm on each installation), for a start "
        "from an empty kernel cache: the runs draw among the buckets compiled so far (fuzz.run.warming)",
    )
    p.add_argument(
        "--warm-jobs", type=int, default=4, help="compile processes of --warm, shared among the installations"
    )
    p.add_argument("--pytest", nargs=argparse.REMAINDER, default=[], help="more pytest arguments for every run")
    return p


def main(argv: list[str]) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.render:
        try:
            summary = json.loads(args.render.read_text())
            stored = isinstance(summary, dict)  # before campaigns stored their settings: the list of runs alone
            runs = summary["runs"] if stored else summary
            if not isinstance(runs, list) or not runs or not all(isinstance(r, dict) for r in runs):
                raise ValueError("expected a list of runs")
            print(markdown(runs, Settings.from_json(summary["settings"]) if stored else Settings.of(args), stored))
        except (OSError, ValueError, KeyError, TypeError) as e:
            p.error(f"--render {args.render}: not a campaign summary.json ({type(e).__name__}: {e})")
        return 0
    if not args.families:
        p.error("give one or more target families (flashinfer-, fla-, sglang-, sglang-glue-, vllm-)")
    try:
        wheres = [installation.parse(s) for s in args.installation] or [installation.Installation("installed", "")]
        _check(args, wheres)
    except ValueError as e:
        p.error(str(e))
    args.out.mkdir(parents=True, exist_ok=True)
    results = run_all(args, wheres)
    settings = Settings.of(args)
    (args.out / "summary.json").write_text(
        json.dumps({"settings": settings.to_json(), "runs": results}, indent=1) + "\n"
    )
    text = markdown(results, settings)
    (args.out / "summary.md").write_text(text)
    print(text)
    return exit_code(results)


def run_all(args, wheres: list[installation.Installation]) -> list[dict]:
    """Every (installation, family) run at once, with --warm's warm-ups beside them; each run's summary row. The
    runs share each GPU: one directory for its memory slots, inherited by every run, so all take heavy checks'
    memory from one pool per GPU whatever their environments (fuzz.run.memory); `auto` workers split among them
    (worker_args); the warm-ups' compile processes split among the installations."""
    os.environ.setdefault(MEMORY_DIR, tempfile.gettempdir())
    xdist = tuple(worker_args(str(args.workers), len(wheres) * len(args.families), args.profile))
    jobs = [Job(w, f, args.out, xdist) for w in wheres for f in args.families]
    ours = (
        "summary.json",
        "summary.md",
        *(f"{job.name}[.-]*" for job in jobs),
        *(f"{w.label}-warm.log" for w in wheres),
    )
    keep_results(args.out, ours, "campaign")
    watches = [Watch.of(job.name, args.out) for job in jobs]
    jobs_each = shared(args.warm_jobs, len(wheres))
    warmups = [warming.beside(w, args, jobs_each, args.out / f"{w.label}-warm.log") for w in wheres if args.warm]
    try:
        with ThreadPoolExecutor(len(jobs)) as pool, Progress(watches) as progress:
            futures = [pool.submit(run_job, job, args, watch) for job, watch in zip(jobs, watches)]
            progress.until(lambda: all(f.done() for f in futures))
            return [f.result() for f in futures]
    finally:
        for where, proc in zip(wheres, warmups):
            print(f"gdn-fuzz campaign: {where.label}: warm-up beside the runs {warming.stop(proc)}", file=sys.stderr)


def exit_code(results: list[dict]) -> int:
    """0: every run ran and found nothing; 1: findings; 3: a run that ran nothing, broke or was cut off without a
    report (one line each on stderr): a campaign is never green for what it did not do. `results`: the runs of its
    summary.json."""
    runs = [RunRow.from_json(r) for r in results]
    broken = [r for r in runs if r.broken]
    for r in broken:
        print(
            f"gdn-fuzz campaign: {r.installation} {r.family}: pytest exit {r.exit}"
            f"{' (killed)' if r.killed else ''}, {r.examples} checks: see {r.installation}-"
            f"{r.family.rstrip('-')}.log",
            file=sys.stderr,
        )
    return 3 if broken else 1 if any(r.failures for r in runs) else 0
