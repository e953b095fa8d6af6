"""The calibration table: how close the cases that pass come to the verdict's bound.

    gdn-fuzz calibrate RUN.json [RUN.json ...]      # reports of pytest --gdn-report or a campaign's per-run JSON

Per target x output (output, final state, intermediate states) x state dtype x input dtype: the passing examples
judged, the 99th percentile and the largest error / bound ratio (fuzz.judge.verdict.Comparison.ratio) with its case,
and the known bugs of the target's release that show as a mismatch of that output. A ratio above MARGIN where no known
bug bears on the output is a bound that a rounding the precision model leaves out could cross (fp16 inputs consumed
as bf16, a state rounded once more per step): the row says UNMODELLED, and the rounding is to be found and modelled
in fuzz/judge/oracle.py, never answered by widening the tolerance.
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from fuzz.cli.parser import Parser
from fuzz.run.report import RunReport

MARGIN = 0.5  # a passing ratio above this, on an output no known bug bears on, is flagged
KINDS = {"output": "OutputMismatch", "state": "StateMismatch", "intermediate": "IntermediateMismatch"}


@dataclass(frozen=True)
class Cell:
    target: str
    output: str  # a Comparison kind: "output", "state" or "intermediate"
    state_dtype: str
    input_dtype: str


@dataclass(frozen=True)
class Row:
    cell: Cell
    examples: int  # passing examples that judged this output
    p99: float
    worst: float
    worst_case: str  # the coordinate of the worst one
    bugs: tuple[str, ...]  # known bugs of the release that show as a mismatch of this output on this target

    @property
    def unmodelled(self) -> bool:
        return self.worst > MARGIN and not self.bugs


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile, nearest rank."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def rows(report: RunReport) -> list[Row]:
    """The table of one run report."""
    ratios: dict[Cell, list[tuple[float, str]]] = defaultdict(list)
    for r in report.records:
        if r.outcome != "pass":
            continue
        for output, ratio in r.ratios.items():
            ratios[Cell(r.target, output, r.case.state_dtype, r.case.input_dtype)].append((ratio, repr(r.case)))
    table = []
    for cell, seen in sorted(ratios.items(), key=lambda kv: tuple(vars(kv[0]).values())):
        worst, case = max(seen)
        version = row.version if (row := report.targets.get(cell.target)) else None
        table.append(
            Row(
                cell,
                len(seen),
                percentile([x for x, _ in seen], 99),
                worst,
                case,
                _bearing(cell.target, cell.output, version),
            )
        )
    return table


def _bearing(target_name: str, output: str, version: str | None) -> tuple[str, ...]:
    from fuzz.model.known_bugs import KNOWN_BUGS
    from fuzz.targets.registry import TARGETS

    path = next((t.path for t in TARGETS if t.name == target_name), None)
    return tuple(b.id for b in KNOWN_BUGS if b.holds(path, version) and KINDS[output] in b.shows)


def markdown(table: list[Row]) -> str:
    lines = [
        "| target | output | state | inputs | passing examples | p99 error/bound | largest | known bugs on it | "
        "largest at |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table:
        flag = " **UNMODELLED?**" if r.unmodelled else ""
        lines.append(
            f"| {r.cell.target} | {r.cell.output} | {r.cell.state_dtype} | {r.cell.input_dtype} | "
            f"{r.examples} | {r.p99:.3f} | {r.worst:.3f}{flag} | {', '.join(r.bugs) or '-'} | "
            f"`{r.worst_case[:120]}` |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    p = Parser(prog="gdn-fuzz calibrate", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("reports", nargs="+", type=Path, metavar="RUN.json")
    args = p.parse_args(argv)
    for path in args.reports:
        try:
            table = rows(RunReport.from_json(json.loads(path.read_text())))
        except (OSError, ValueError, KeyError) as e:
            p.refuse(f"{path}: not a run report ({type(e).__name__}: {e})")
        flagged = sum(r.unmodelled for r in table)
        print(f"## {path}\n\n{markdown(table)}\n\n{flagged} output(s) above {MARGIN} with no known bug on them\n")
    return 0


__all__ = ["MARGIN", "Cell", "Row", "main", "markdown", "percentile", "rows"]
