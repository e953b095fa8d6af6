"""Per release and kernel-level dispatch threshold (fuzz.model.dispatch), whether the single-case fuzz tests checked
cases on both sides of it within the first 60 s of a test (check seconds summed in the order the report lists them),
and after how many checks the second side first came. Reads a campaign's per-run reports (not kept here: 2-8 MB each):

    .venv/bin/python docs/h200-2026-12-03/thresholds.py /tmp/r/call1
"""
import json
import sys
from collections import defaultdict
from pathlib import Path

from fuzz.model import dispatch
from fuzz.model.case import Case
from fuzz.targets.registry import TARGETS

PATHS = {t.name: t.path for t in TARGETS}
print("| release | path | threshold | below / above | both sides in 60 s | checks to the second side |")
print("|---|---|---|---|---|---|")
for report in sorted(Path(sys.argv[1]).glob("*-flashinfer.json")):
    release = report.name.split("-flashinfer")[0]
    records = json.loads(report.read_text())["records"]
    clock, seen = defaultdict(float), defaultdict(dict)  # test -> seconds; (path, threshold) -> side -> (s, n)
    count = defaultdict(int)
    for r in records:
        if "serving" in r["test"] or "large" in r["test"] or r["target"] not in PATHS:
            continue
        clock[r["test"]] += r["seconds"]
        count[r["test"]] += 1
        case, path = Case.parse(r["case"]), PATHS[r["target"]]
        for t in dispatch.thresholds(path, release):
            if t.kernel and t.applies(max(case.T, 1), bool(case.inter_rows), case.update):
                side = t.side(case.B, case.H, case.HV, dispatch.DEFAULT_SMS)
                seen[(path, t.quantity, t.first_above(dispatch.DEFAULT_SMS), t.below, t.above)].setdefault(
                    side, (clock[r["test"]], count[r["test"]]))
    for (path, quantity, at, below, above), sides in sorted(seen.items()):
        both = below in sides and above in sides
        late = max(sides.values()) if both else None
        print(f"| {release} | {path} | {quantity} >= {at} | {below} / {above} | "
              f"{'yes' if both and late[0] <= 60 else 'no'} | {late[1] if both else 'one side only'} |")
