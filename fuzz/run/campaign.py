"""`gdn-fuzz campaign`: time-boxed fuzzing of target families on one or more installations at once, one pytest run
per (installation, family), then one table per installation of every distinct failure: its kind, target and
operation, minimal coordinate, time to first hit and hits. Known-bug masks are off unless asked (--masks): a
campaign hunts. A run cut off while shrinking still reports the smallest case of each failure its live log holds,
marked "not minimal". A failure whose cause is a TypeError about the call's arguments is flagged ADAPTER ERROR: it is
a defect of gdn-fuzz, never a finding.

    gdn-fuzz campaign --profile h200 --test-seconds 60 --workers 2 --out campaign/ \\
        --installation 0.7.4=/tmp/site --installation 0.6.11=/tmp/site-fi0611 flashinfer-
"""
from __future__ import annotations

import argparse
import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from fuzz.run import installation

ADAPTER_ERROR = re.compile(r"TypeError: .*(unexpected keyword argument|missing \w+ required|positional argument)")


@dataclass
class Job:
    where: installation.Installation
    family: str
    out: Path

    @property
    def name(self) -> str:
        return f"{self.where.label}-{self.family.rstrip('-')}"


def run_job(job: Job, args) -> dict:
    report, live = job.out / f"{job.name}.json", job.out / f"{job.name}-failures.jsonl"
    cmd = ["-q", "-p", "no:cacheprovider", f"--hypothesis-profile={args.profile}", "-k", job.family,
           f"--gdn-masks={args.masks}", f"--gdn-test-seconds={args.test_seconds:g}",
           f"--gdn-shrink-seconds={args.shrink_seconds:g}", f"--gdn-report={report}", f"--gdn-live-log={live}",
           *([f"-n{args.workers}"] if args.workers > 1 else []), *args.pytest]
    began = time.monotonic()
    proc = job.where.pytest(cmd, job.out / f"{job.name}.log")
    try:
        proc.wait(timeout=args.timeout)
        killed = False
    except Exception:  # noqa: BLE001 - TimeoutExpired: cut off (while shrinking, usually)
        proc.kill()
        proc.wait()
        killed = True
    data = json.loads(report.read_text()) if report.exists() else {"targets": {}, "failures": [], "errors": [],
                                                                    "tests": {}, "environment": {}}
    failures = [dict(f, minimal=f["minimal"]) for f in data["failures"] if f["target"].startswith(job.family)]
    if killed:
        failures += unfinished(live, {(f["target"], f["kind"]) for f in failures})
    return {"installation": job.where.label, "family": job.family, "seconds": round(time.monotonic() - began, 1),
            "exit": proc.returncode, "killed": killed, "failures": failures, "errors": data["errors"],
            "environment": data["environment"],
            "targets": {n: t for n, t in data["targets"].items() if n.startswith(job.family)}}


def unfinished(live: Path, reported: set) -> list[dict]:
    """The smallest logged case of each (target, kind) the report does not hold: its shrink was cut off."""
    from fuzz.case import Case

    smallest: dict = {}
    for line in live.read_text().splitlines() if live.exists() else []:
        d = json.loads(line)
        key, case = (d["target"], d["kind"]), Case.parse(d["case"])
        if key not in reported and (key not in smallest or _size(case) < _size(smallest[key][0])):
            smallest[key] = (case, d)
    return [{"target": t, "kind": k, "case": repr(c), "detail": d["detail"], "key": d["key"], "minimal": False,
             "first_hit_seconds": None, "hits": None, "test": None} for (t, k), (c, d) in sorted(smallest.items())]


def _size(case) -> tuple:
    return case.B, case.T, case.pool, len(repr(case))


def markdown(results: list[dict], args) -> str:
    lines = [f"# gdn-fuzz campaign: profile {args.profile}, {args.test_seconds:g} s per fuzz test, masks "
             f"{args.masks}, {args.workers} worker(s) per run", ""]
    for r in results:
        env = r["environment"]
        lines += [f"## {r['installation']}: {r['family']} ({r['seconds']} s{', KILLED' if r['killed'] else ''}, "
                  f"pytest exit {r['exit']}; {env.get('gpu') or 'no GPU'}, torch {env.get('torch', '?')})", ""]
        for name, t in sorted(r["targets"].items()):
            if t["unavailable"]:
                lines.append(f"- {name}: UNAVAILABLE: {t['unavailable']}")
            else:
                runs = ", ".join(f"{op} {n} ({t['distinct'].get(op, n)} distinct)" for op, n in t["examples"].items())
                lines.append(f"- {name} {t['version'] or ''}: {runs or 'no examples'}"
                             + "".join(f"; {op} UNAVAILABLE: {why}" for op, why in t.get("ops_off", {}).items()))
        lines += ["", "| # | kind | target / op | minimal coordinate | first hit | hits | note |",
                  "|---|---|---|---|---|---|---|"]
        for i, f in enumerate(r["failures"], 1):
            note = "ADAPTER ERROR (ours)" if ADAPTER_ERROR.search(f["detail"]) else \
                ("" if f["minimal"] else "not minimal (shrink cut off)")
            op = f["case"].split("-", 1)[0]
            hit = "-" if f["first_hit_seconds"] is None else f"{f['first_hit_seconds']:.1f} s"
            lines.append(f"| {i} | {f['kind']} | {f['target']} {op} | `{f['case']}` | {hit} | {f['hits'] or '-'} | "
                         f"{note} {f['detail'].splitlines()[0][:160]} |")
        if not r["failures"]:
            lines.append("| - | none | | | | | |")
        lines += [f"- error (not a finding): {e['test']}: {e['message'][:300]}" for e in r["errors"]
                  if not any(e["test"] == f["test"] for f in r["failures"])]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="gdn-fuzz campaign", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("families", nargs="+", help="target-name prefixes (flashinfer-, fla-, sglang-)")
    p.add_argument("--installation", action="append", default=[], metavar="[LABEL=]PYTHON_OR_DIR",
                   help="run on this installation (several: each release at once); default: this interpreter")
    p.add_argument("--profile", default="h200")
    p.add_argument("--test-seconds", type=float, default=60.0, help="time box per fuzz test")
    p.add_argument("--shrink-seconds", type=float, default=120.0)
    p.add_argument("--workers", type=int, default=1, help="pytest-xdist workers per run (-n)")
    p.add_argument("--masks", default="none", choices=("none", "release", "all"))
    p.add_argument("--timeout", type=float, default=None, help="seconds before a run is killed")
    p.add_argument("--out", type=Path, default=Path("campaign"))
    p.add_argument("--pytest", nargs=argparse.REMAINDER, default=[], help="more pytest arguments for every run")
    args = p.parse_args(argv)
    try:
        wheres = [installation.parse(s) for s in args.installation] or [installation.Installation("installed", "")]
    except ValueError as e:
        p.error(str(e))
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = [Job(w, f, args.out) for w in wheres for f in args.families]
    with ThreadPoolExecutor(len(jobs)) as pool:
        results = list(pool.map(lambda job: run_job(job, args), jobs))
    (args.out / "summary.json").write_text(json.dumps(results, indent=1) + "\n")
    text = markdown(results, args)
    (args.out / "summary.md").write_text(text)
    print(text)
    return 0
