"""Distinct cases per minute per target, and where the time goes (Hypothesis draw, tensor building, oracle, kernel,
verdict), for a cold and then a warm compile cache, in one process, nothing else running.

    python bench/throughput.py --profile ci --examples 40                  # CPU: Triton interpreter targets
    python bench/throughput.py --profile h200 --examples 60 -k flashinfer-  # GPU

Cold: Triton and FlashInfer compile caches point at fresh directories and the process has compiled nothing; warm: new
cases (another seed) in the same process, whose buckets the cold pass compiled. The kernel phase is split into the
compiles FlashInfer records in its build log ("compile") and the rest ("kernel": running it, loading a cached one).
Buckets = distinct compile keys (fuzz.run.harness.dispatch_bucket). The campaign figure (all workers, a time box, cold
start included) comes from `gdn-fuzz campaign` (its summary prints distinct cases per minute and buckets covered).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections import Counter

# compile: FlashInfer's build log (kernel_cache.BuildLog)
PHASES = ("tensors", "oracle", "compile", "kernel", "verdict")


def measure(target, op, budget, bugs, examples: int, seed: int):
    """Check `examples` drawn cases; (distinct cases, buckets, seconds, seconds per phase)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    from fuzz.generate.strategies import cases
    from fuzz.run.harness import check
    from fuzz.run.kernel_cache import BUILD_LOG, BuildLog, split_compile

    seen, buckets, phases = set(), set(), Counter()
    builds = BuildLog(os.environ[BUILD_LOG])
    builds.take()  # what earlier passes compiled

    @hseed(seed)
    @settings(
        max_examples=examples,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.generate],
    )
    @given(case=cases(target, op, budget, bugs))
    def run(case):
        if repr(case) in seen:
            return
        seen.add(repr(case))
        result = check(target, case, budget.device)
        buckets.add(result.bucket)
        phases.update(split_compile(result.phases, builds.take()))

    start = time.perf_counter()
    run()
    return len(seen), buckets, time.perf_counter() - start, phases


def main() -> None:
    from fuzz.generate.profiles import PROFILES  # hypothesis only: no library reads the caches set below yet

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--profile", default="ci", choices=PROFILES)
    p.add_argument("--examples", type=int, default=40, help="per target and operation, per pass")
    p.add_argument("-k", default="", help="only targets whose name contains this")
    p.add_argument("--override", action="append", default=[], metavar="FAMILY=module")
    args = p.parse_args()

    cache = tempfile.mkdtemp(prefix="gdn-bench-")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(cache, "triton")  # cold: nothing compiled yet
    os.environ["FLASHINFER_WORKSPACE_BASE"] = os.path.join(cache, "flashinfer")
    os.environ["FLASHINFER_JIT_BUILD_LOG"] = os.path.join(cache, "builds.jsonl")  # compile seconds, per check
    budget = PROFILES[args.profile].budget
    if budget.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from fuzz.model.known_bugs import masked_reason
    from fuzz.targets.registry import TARGETS, overridden

    with overridden(dict(o.split("=", 1) for o in args.override)):
        rows = [("target", "op", "cache", "distinct", "cases/min", "buckets", "draw%", *(f"{k}%" for k in PHASES))]
        totals = {"cold": [0, 0.0], "warm": [0, 0.0]}  # distinct cases, seconds
        split = {"cold": Counter(), "warm": Counter()}
        for target in TARGETS:
            reason = target.unavailable_reason(budget.device)
            if args.k not in target.name or reason:
                print(f"{target.name}: skipped ({reason or 'not selected'})")
                continue
            bugs = target.known_bugs()
            for op in sorted(target.support.ops):
                if masked := masked_reason(bugs, op):
                    print(f"{target.name} {op}: skipped ({masked})")
                    continue
                for seed, cache_state in enumerate(("cold", "warm")):
                    count, buckets, total, phases = measure(target, op, budget, bugs, args.examples, seed)
                    totals[cache_state][0] += count
                    totals[cache_state][1] += total
                    split[cache_state].update(phases)
                    draw = total - sum(phases.values())
                    split[cache_state]["draw"] += draw
                    shares = [f"{100 * x / total:.0f}" for x in (draw, *(phases[k] for k in PHASES))]
                    rows.append(
                        (
                            target.name,
                            op,
                            cache_state,
                            str(count),
                            f"{60 * count / total:.0f}",
                            str(len(buckets)),
                            *shares,
                        )
                    )
                    print("measured:", "  ".join(rows[-1]), flush=True)  # a run cut short still leaves its rows
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for r in rows:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
        for cache_state in ("cold", "warm"):  # the figure compared with a library's own test suite
            cases, seconds = totals[cache_state]
            if seconds:
                parts = ", ".join(f"{k} {100 * v / seconds:.0f}%" for k, v in split[cache_state].most_common())
                print(
                    f"all selected targets, {cache_state}: {cases} distinct cases in {seconds:.1f} s = "
                    f"{60 * cases / seconds:.1f} per minute ({parts})"
                )


if __name__ == "__main__":
    main()
