"""A time-boxed fuzz campaign on a GPU host: for each target family (a target-name prefix), rounds of
`pytest fuzz/ -k FAMILY --gdn-test-seconds N` with fresh Hypothesis seeds until the family's seconds are spent.
Compiled kernels stay in the on-disk caches between rounds. Writes each round's --gdn-report JSON and log, and a
merged summary.json / summary.md.

    python scripts/gpu_campaign.py --profile h200 --seconds 300 --test-seconds 45 --out results/ \
        flashinfer- fla- sglang-

--parallel runs the families at once (one pytest process each): the kernels are launch-bound, so one GPU
serves several processes, and the wall time is that of the slowest family.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def count_tests(family: str, profile: str) -> int:
    """How many fuzz tests of this family a round runs: one per (available target, operation not masked by a known
    bug); each gets one time box. Unavailable targets and corpus replays take next to no time."""
    from fuzz.generate.profiles import budget_for

    device = budget_for(profile).device
    if device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # as the CPU profiles have it, before triton is imported
    from fuzz.targets.registry import TARGETS

    return max(1, sum(1 for t in TARGETS if t.name.startswith(family) and not t.unavailable_reason(device)
                      for op in t.support.ops if not t.semantics().masked_reason(op)))


def unfinished_shrinks(live: Path, test: str, shrink_seconds: float) -> list[dict]:
    """A round killed while shrinking still leaves its failing examples in the live log: report the smallest
    logged case of each (target, failure class), marked as not minimal, so the finding is not lost."""
    from fuzz.run.session import logged_failures

    smallest = {}
    for target, kind, case in logged_failures(live):
        key = (target, kind)
        if key not in smallest or _size(case) < _size(smallest[key]):
            smallest[key] = case
    note = f"killed while shrinking (--shrink-seconds {shrink_seconds:g}): smallest logged case, not minimal"
    return [{"test": test, "target": target, "kind": kind, "case": repr(case), "message": f"{kind}: {note}: {case!r}"}
            for (target, kind), case in sorted(smallest.items())] or [
        {"test": test, "message": f"killed while shrinking (--shrink-seconds {shrink_seconds:g}); no failing example "
                                  "was logged"}]


def _size(case) -> tuple:
    return case.B, case.T, case.pool, len(repr(case))


def run_family(family: str, args, out: Path) -> dict:
    examples, failures, unavailable, rounds = Counter(), [], {}, 0
    deadline = time.monotonic() + args.seconds
    tests = count_tests(family, args.profile)
    while True:
        # a round's tests run one after another: boxes shrink so that the round ends by the family's deadline
        box = min(args.test_seconds, (deadline - time.monotonic()) / tests)
        if box < 5:
            break
        report = out / f"{family}-round{rounds}.json"
        cmd = [sys.executable, "-m", "pytest", "fuzz/", f"--hypothesis-profile={args.profile}", "-k", family,
               f"--hypothesis-seed={rounds}", f"--gdn-report={report}", f"--gdn-test-seconds={box:.0f}", "-q", "-p",
               "no:warnings", *args.pytest]
        live = out / f"{family}-round{rounds}-failures.log"  # every failing example, as it happens
        env = dict(os.environ, GDN_FUZZ_GPU_EXAMPLES=str(args.examples), GDN_FUZZ_LIVE_LOG=str(live))
        with open(out / f"{family}-round{rounds}.log", "w") as log:
            try:  # the time box stops generation; a failing test still shrinks, bounded by --shrink-seconds
                subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, check=False,
                               timeout=deadline - time.monotonic() + args.shrink_seconds)
            except subprocess.TimeoutExpired:
                failures += unfinished_shrinks(live, f"{family} round {rounds}", args.shrink_seconds)
        rounds += 1
        if not report.exists():
            continue
        data = json.loads(report.read_text())
        for name, t in data["targets"].items():
            if not name.startswith(family):
                continue
            if t["unavailable"]:
                unavailable[name] = t["unavailable"]
            for op, n in t["examples"].items():
                examples[f"{name}:{op}"] += n
        failures += data["failures"]
    return {"rounds": rounds, "examples": dict(examples), "unavailable": unavailable, "failures": failures}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("families", nargs="+")
    p.add_argument("--profile", default="h200")
    p.add_argument("--seconds", type=float, default=300.0, help="per family")
    # After its time box a test still draws (not checks) up to this many cases, ~5 ms each: keep it modest.
    p.add_argument("--examples", type=int, default=1500, help="max examples per test and round")
    p.add_argument("--test-seconds", type=float, default=60.0, help="time box per fuzz test and round")
    p.add_argument("--shrink-seconds", type=float, default=120.0,
                   help="how long a round may run past the family's seconds to finish shrinking a failure")
    p.add_argument("--out", type=Path, default=Path("campaign"))
    p.add_argument("--parallel", action="store_true", help="run the families concurrently")
    p.add_argument("--pytest", nargs=argparse.REMAINDER, default=[], help="extra pytest arguments")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    def timed(family: str) -> dict:
        t0 = time.monotonic()
        return dict(run_family(family, args, args.out), seconds=round(time.monotonic() - t0, 1))

    with ThreadPoolExecutor(len(args.families) if args.parallel else 1) as pool:
        summary = dict(zip(args.families, pool.map(timed, args.families)))
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    lines = [f"# gdn-fuzz campaign, profile {args.profile}", ""]
    for family, s in summary.items():
        lines.append(f"## {family}: {s['seconds']} s, {s['rounds']} rounds, {len(s['failures'])} failures")
        lines += [f"- {k}: {v} examples" for k, v in sorted(s["examples"].items())]
        lines += [f"- {k}: UNAVAILABLE: {v}" for k, v in sorted(s["unavailable"].items())]
        lines += [f"- FAILED {f['test']}{' ' + f['target'] if 'target' in f else ''}: {f['message'][:400]}"
                  for f in s["failures"]]
        lines.append("")
    (args.out / "summary.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
