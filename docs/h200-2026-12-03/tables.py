"""The reach results' tables, from the raw campaign summaries beside this file, triaged against the known-bug records
as they are now (fuzz.run.campaign_tables.by_bug):

    .venv/bin/python docs/h200-2026-12-03/tables.py > /tmp/tables.md
"""
import gzip
import json
from pathlib import Path

from fuzz.run.campaign_tables import by_bug

HERE = Path(__file__).parent
for name in ("call1", "call2-large", "call2-resume", "call3"):
    print(f"## {name}\n")
    for r in json.loads(gzip.open(HERE / f"{name}-summary.json.gz").read()):
        minutes = r["seconds"] / 60
        print(f"### {r['installation']} ({r['seconds']} s{', killed at the time box' if r['killed'] else ''}): "
              f"{r['distinct']} distinct cases, {r['distinct'] / minutes:.0f} per minute, {r['buckets']} buckets\n")
        print("\n".join(by_bug(r)) or "no finding", end="\n\n")
