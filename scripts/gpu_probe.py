"""Replay coordinates on the FlashInfer targets (or the ones named) and print each verdict: a GPU triage helper.

    python scripts/gpu_probe.py 'decode-B1-T1-H1-HV1-K128-V128-pool2-...' ...
    python scripts/gpu_probe.py --target flashinfer-mtp-fp32 --grid B=1,2,3 H=1,2 G=1,2 T=1,2 -- 'verify-B1-T1-...'

--grid isolates a trigger: every combination of batch B (slots 1..B, pool B+1), qk heads H, GVA ratio G
(HV = G*H) and T is derived from each base coordinate and run.
"""
import argparse
import dataclasses
import itertools

from fuzz.case import Case
from fuzz.run.harness import check
from fuzz.targets.registry import TARGETS
from fuzz.judge.failures import COMPARED


def variants(base: Case, grid: dict[str, list[int]]):
    keys = list(grid)
    for values in itertools.product(*(grid[k] for k in keys)):
        v = dict(zip(keys, values))
        B, H = v.get("B", base.B), v.get("H", base.H)
        HV, T = H * v.get("G", base.HV // base.H), v.get("T", base.T)
        op = base.op if base.op == "prefill" else "decode" if T == 1 else "verify"
        yield dataclasses.replace(base, op=op, H=H, HV=HV, T=T, pool=B + 1, read_slots=tuple(range(1, B + 1)),
                                  write_slots=None, token_slots=None,
                                  inter_rows=B if base.inter_rows else 0, inter_steps=T if base.inter_rows else 0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("coordinates", nargs="+")
    p.add_argument("--target", action="append", help="target name (default: every FlashInfer target)")
    p.add_argument("--grid", nargs="*", default=[], help="NAME=v1,v2 with NAME in B, H, G, T")
    args = p.parse_args()
    grid = {k: [int(x) for x in v.split(",")] for k, v in (g.split("=") for g in args.grid)}
    targets = [t for t in TARGETS if (t.name in args.target if args.target else t.family.name == "flashinfer")]
    for coordinate in args.coordinates:
        base = Case.parse(coordinate)
        for case in variants(base, grid) if grid else [base]:
            for target in targets:
                if case.op not in target.support.ops or target.unavailable_reason("cuda"):
                    continue
                try:
                    check(target, case, "cuda")
                    ratios = ", ".join(f"{c['kind']} {c['ratio']:.3g}" for c in COMPARED)
                    print(f"{target.name}: pass (error/bound: {ratios}): {case!r}", flush=True)
                except Exception as e:  # noqa: BLE001 - a probe reports every outcome
                    print(f"{target.name}: {type(e).__name__}: {case!r}: {str(e)[:200]}", flush=True)


if __name__ == "__main__":
    main()
