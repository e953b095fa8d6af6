"""What call 2's --resume needs of call 1, small enough to travel with the repository: per run, the smallest logged
case of each failure key (NAME-failures.jsonl) and which keys its report held minimal (NAME.json).

    python docs/h200-2026-12-02b/slim.py /tmp/r/call1 docs/h200-2026-12-02b/call1
"""
import json
import sys
from pathlib import Path

from fuzz.run.campaign_tables import size

from fuzz.model.case import Case
from fuzz.run.report import load

source, dest = Path(sys.argv[1]), Path(sys.argv[2])
dest.mkdir(parents=True, exist_ok=True)
for live in sorted(source.glob("*-failures.jsonl")):
    smallest = {}
    for d in map(json.loads, filter(None, live.read_text().splitlines())):
        key = (d["target"], d["key"])
        if key not in smallest or size(Case.parse(d["case"])) < size(Case.parse(smallest[key]["case"])):
            smallest[key] = d
    (dest / live.name).write_text("".join(json.dumps(d) + "\n" for d in smallest.values()))
    name = live.name.removesuffix("-failures.jsonl")
    report = load(source / f"{name}.json") or {"failures": []}
    slim = {"failures": [{"key": f["key"], "minimal": f["minimal"]} for f in report["failures"]]}
    (dest / f"{name}.json").write_text(json.dumps(slim) + "\n")
    print(f"{name}: {len(smallest)} logged keys, {sum(f['minimal'] for f in slim['failures'])} reported minimal")
