"""A time-boxed fuzz campaign on a GPU host: for each target family, rounds of `pytest fuzz/ -k FAMILY` with
fresh Hypothesis seeds until the family's seconds are spent. Compiled kernels stay in the on-disk caches
between rounds. Writes each round's --gdn-report JSON and log, and a merged summary.json / summary.md.

    python scripts/gpu_campaign.py --profile h200 --seconds 300 --out results/ flashinfer fla sglang

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
    last = 0.0
    while time.monotonic() + last * 0.5 < deadline:
        report = out / f"{family}-round{rounds}.json"
        cmd = [sys.executable, "-m", "pytest", "fuzz/", f"--hypothesis-profile={args.profile}", "-k", family,
               f"--hypothesis-seed={rounds}", f"--gdn-report={report}", "-q", "-p", "no:warnings", *args.pytest]
        env = dict(os.environ, GDN_FUZZ_GPU_EXAMPLES=str(args.examples))
        start = time.monotonic()
        with open(out / f"{family}-round{rounds}.log", "w") as log:
            proc = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, check=False,
                                  timeout=max(60.0, deadline - start + 120))
        last = time.monotonic() - start
        rounds += 1
        if not report.exists():
            failures.append({"test": f"round {rounds - 1}", "message": f"pytest exited {proc.returncode}, no report"})
            continue
        data = json.loads(report.read_text())
        for name, t in data["targets"].items():
            if family not in name:
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
    p.add_argument("--examples", type=int, default=150, help="max examples per test and round")
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
