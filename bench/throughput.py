"""Examples per second per target, and where the time goes (Hypothesis + strategy, tensor building, kernel,
oracle, verdict), for a cold and then a warm compile cache.

    python bench/throughput.py --profile ci --examples 60            # CPU: Triton interpreter targets
    python bench/throughput.py --profile h200 --examples 300         # GPU
    python bench/throughput.py --profile ci --override flashinfer=fuzz.standins.flashinfer_cpu -k flashinfer

Cold: Triton and FlashInfer compile caches point at fresh directories and the process has compiled nothing;
warm: the same cases again in the same process. Buckets = distinct compile keys (fuzz.run.harness.dispatch_bucket).
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time


PHASES = ("tensors", "kernel", "oracle", "verdict")


def measure(target, op, budget, examples):
    """Run `examples` drawn cases through the harness; (distinct cases, buckets, seconds, seconds per phase)."""
    from hypothesis import HealthCheck, Phase, given, settings

    from fuzz import harness
    from fuzz.generate.strategies import cases

    buckets, seen = set(), set()

    @settings(max_examples=examples, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck), phases=[Phase.generate])
    @given(case=cases(target, op, budget))
    def run(case):
        seen.add(repr(case))
        buckets.add(harness.dispatch_bucket(target, case))
        try:
            harness.check(target, case, budget.device)
        except AssertionError:
            pass  # throughput, not verdicts: failures are the fuzz suites' business

    before = dict(harness.PHASE_SECONDS)
    start = time.perf_counter()
    run()
    total = time.perf_counter() - start
    return len(seen), buckets, total, {k: harness.PHASE_SECONDS[k] - before.get(k, 0.0) for k in PHASES}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--profile", default="ci")
    p.add_argument("--examples", type=int, default=60, help="per target and operation, per pass")
    p.add_argument("-k", default="", help="only targets whose name contains this")
    p.add_argument("--override", action="append", default=[], metavar="FAMILY=module")
    args = p.parse_args()

    cache = tempfile.mkdtemp(prefix="gdn-bench-")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(cache, "triton")  # cold: nothing compiled yet
    os.environ["FLASHINFER_WORKSPACE_BASE"] = os.path.join(cache, "flashinfer")
    from fuzz.generate.profiles import budget_for

    budget = budget_for(args.profile)
    if budget.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from fuzz.targets.registry import TARGETS, set_overrides

    set_overrides(dict(o.split("=", 1) for o in args.override))
    rows = [("target", "op", "cache", "distinct", "cases/s", "buckets", "hypothesis%", "tensors%", "kernel%",
             "oracle%", "verdict%")]
    totals = {"cold": [0, 0.0], "warm": [0, 0.0]}  # distinct cases, seconds
    for target in TARGETS:
        reason = target.unavailable_reason(budget.device)
        if args.k not in target.name or reason:
            print(f"{target.name}: skipped ({reason or 'not selected'})")
            continue
        for op in sorted(target.support.ops):
            if masked := target.semantics().masked_reason(op):
                print(f"{target.name} {op}: skipped ({masked})")
                continue
            for cache_state in ("cold", "warm"):
                count, buckets, total, phases = measure(target, op, budget, args.examples)
                totals[cache_state][0] += count
                totals[cache_state][1] += total
                rest = total - sum(phases.values())
                shares = [f"{100 * x / total:.0f}" for x in (rest, *(phases[k] for k in PHASES))]
                rows.append((target.name, op, cache_state, str(count), f"{count / total:.1f}", str(len(buckets)),
                             *shares))
                print("measured:", "  ".join(rows[-1]), flush=True)  # a run cut short still leaves its rows
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    for cache_state in ("cold", "warm"):  # the figure compared with a library's own test suite
        cases, seconds = totals[cache_state]
        if seconds:
            print(f"all selected targets, {cache_state}: {cases} distinct cases in {seconds:.1f} s = "
                  f"{60 * cases / seconds:.1f} per minute")


if __name__ == "__main__":
    main()
