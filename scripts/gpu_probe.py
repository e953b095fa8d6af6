"""Replay a few coordinates on every FlashInfer target and print each verdict (a GPU triage helper).

    python scripts/gpu_probe.py 'decode-B1-T1-H1-HV1-K128-V128-pool2-...' ...
"""
import sys

from fuzz.case import Case
from fuzz.harness import check
from fuzz.targets import TARGETS

if __name__ == "__main__":
    for coordinate in sys.argv[1:]:
        case = Case.parse(coordinate)
        for target in TARGETS:
            if case.op not in target.support.ops or target.unavailable_reason("cuda"):
                continue
            try:
                check(target, case, "cuda")
                print(f"{target.name}: pass: {case!r}")
            except Exception as e:  # noqa: BLE001 - a probe reports every outcome
                print(f"{target.name}: {type(e).__name__}: {str(e)[:300]}")
