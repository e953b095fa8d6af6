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


def run_family(family: str, args, out: Path) -> dict:
    examples, failures, unavailable, rounds = Counter(), [], {}, 0
    deadline = time.monotonic() + args.seconds
    while time.monotonic() + 10 < deadline:
        report = out / f"{family}-round{rounds}.json"
        box = min(args.test_seconds, deadline - time.monotonic())
        cmd = [sys.executable, "-m", "pytest", "fuzz/", f"--hypothesis-profile={args.profile}", "-k", family,
               f"--hypothesis-seed={rounds}", f"--gdn-report={report}", f"--gdn-test-seconds={box:.0f}", "-q", "-p",
               "no:warnings", *args.pytest]
        env = dict(os.environ, GDN_FUZZ_GPU_EXAMPLES=str(args.examples))
        with open(out / f"{family}-round{rounds}.log", "w") as log:
            try:  # the time box stops generation; a failing test still shrinks, bounded by --shrink-seconds
                subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, check=False,
                               timeout=deadline - time.monotonic() + args.shrink_seconds)
            except subprocess.TimeoutExpired:
                failures.append({"test": f"{family} round {rounds}", "message": "killed: shrinking outran "
                                 f"--shrink-seconds {args.shrink_seconds:g}; see the live log for its failures"})
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
        lines += [f"- FAILED {f['test']}: {f['message'][:400]}" for f in s["failures"]]
        lines.append("")
    (args.out / "summary.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
