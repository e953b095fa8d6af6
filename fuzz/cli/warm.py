"""`gdn-fuzz warm`: compile a profile's bucket plan into the kernel cache ahead of a run (the engine, what a bucket
plan is and how it is compiled: fuzz.run.warm).

    gdn-fuzz warm --profile h200 [-k flashinfer-] [--jobs 16] [--masks release] [--kernel-cache DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import UTC, datetime

from fuzz.cli.parser import Parser
from fuzz.generate.profiles import PROFILES
from fuzz.model.known_bugs import MASK_POLICIES
from fuzz.run import warm, warming
from fuzz.suite import device


def main(argv: list[str]) -> int:
    p = Parser(
        prog="gdn-fuzz warm",
        description=__doc__ + "\n" + warm.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--profile", default="h200", choices=PROFILES)
    p.add_argument("-k", default="", metavar="SUBSTRING", help="only targets whose name contains it")
    p.add_argument(
        "--jobs",
        type=int,
        default=min(os.cpu_count() or 1, 16),
        help="worker processes compiling at once (default: the cores, at most 16)",
    )
    p.add_argument(
        "--masks",
        default="release",
        choices=MASK_POLICIES,
        help="the known-bug mask policy of the run to warm for (its plan depends on it)",
    )
    p.add_argument("--kernel-cache", default=None, metavar="DIR", help="as pytest's --gdn-kernel-cache")
    p.add_argument("--override", action="append", default=[], metavar="FAMILY=module", help="as pytest's --gdn-target")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds one case may take (compiles included)")
    args = p.parse_args(argv)
    if args.jobs < 1:
        p.error(f"--jobs {args.jobs}: expected at least 1")
    budget = PROFILES[args.profile].budget
    if not budget.plan_size:
        print(f"gdn-fuzz warm: the {args.profile} profile draws its buckets freely, with no plan to compile ahead")
        return 0
    from fuzz.run import kernel_cache

    try:  # the Triton interpreter on a CPU profile, a GPU on a GPU profile (one line, before any work), the cache
        device.prepare(PROFILES[args.profile], "--profile")
        cache = kernel_cache.configure(args.kernel_cache)
    except ValueError as e:
        p.refuse(str(e))
    from fuzz.targets.registry import TARGETS, overriding

    try:
        restore = overriding(args.override, "--override")
    except ValueError as e:
        p.refuse(str(e))
    with restore:
        chosen = [t for t in TARGETS if args.k in t.name]
        if not chosen:
            p.refuse(f"-k {args.k!r} selects no target")
        units, skipped = warm.units_for(chosen, budget, args.masks)
        for name, why in sorted(skipped.items()):
            print(f"{name}: not warmed: {why}")
        if not units:
            print("gdn-fuzz warm: nothing to compile: no selected target is available here", file=sys.stderr)
            return 1
        began = time.monotonic()
        tracker = warming.Tracker(cache.directories.values(), args.profile, args.masks)
        try:  # the plans most wanted first; runs beside it draw among the buckets compiled so far (fuzz.run.warming)
            progress = warm.run_units(
                warming.cold_order(units), budget.device, args.jobs, args.timeout, done=tracker.done
            )
        finally:
            tracker.close()
        seconds = time.monotonic() - began
        pairs = _record(cache, args, budget, units, progress, seconds)
        print(
            f"gdn-fuzz warm: {progress.total} cases of {len(units)} planned buckets ({len(pairs)} target x operation "
            f"pairs) in {seconds:.1f} s with {args.jobs} processes; {progress.failed} failed (not judged here: the "
            f"fuzz run finds and shrinks them); {cache.describe()}"
        )
        return 0


def _record(cache, args, budget, units, progress, seconds: float) -> list[tuple[str, str]]:
    """Write what was warmed (each target and operation's plan digest, and when, how many cases, how long) to the
    manifest of every cache directory; the (target, operation) pairs warmed."""
    from fuzz.targets.registry import TARGETS

    by_name = {t.name: t for t in TARGETS}
    pairs = sorted({(u.target, u.op) for u in units})
    meta = {
        "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cases": progress.total,
        "seconds": round(seconds, 1),
        "jobs": args.jobs,
    }
    entries = {
        warm.manifest_key(args.profile, args.masks, name, op): warm.plan_digest(by_name[name], op, budget, args.masks)
        for name, op in pairs
    }
    for directory in cache.directories.values():
        warm.write_manifest(directory, entries, meta)
    return pairs
