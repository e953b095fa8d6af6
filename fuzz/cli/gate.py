"""`gdn-fuzz gate`: the kernel-upgrade gate. Runs the corpus replay plus a derandomized fuzz budget (pytest on
fuzz/ with the `gate` profile) against a baseline and a candidate installation of the target libraries, then
compares them: new, fixed and unchanged failures, and numerics drift (error-to-bound ratios per target path).
Writes gate.xml (JUnit), report.html and each side's pytest report, log and JUnit into --out. Exit status: 1 on
any new failure, 2 when a side could not be run, else 0.

An installation is a python executable (a venv's bin/python, or the venv directory itself) or a directory
prepended to PYTHONPATH (`pip install --no-deps --target DIR lib==X`). Both sides run this checkout's fuzz/.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SIDES = ("baseline", "candidate")
STATUSES = ("new", "fixed", "unchanged")


@dataclass
class Side:
    name: str  # "baseline" or "candidate"
    installation: str
    overrides: list = field(default_factory=list)  # FAMILY=module specs passed as --gdn-target
    python: str = sys.executable
    env: dict = field(default_factory=dict)
    returncode: int | None = None
    report: dict = field(default_factory=dict)  # the side's --gdn-report JSON

    def __post_init__(self):
        path = Path(self.installation)
        if path.is_dir() and (path / "bin" / "python").exists():
            path = path / "bin" / "python"
        if path.is_file():
            self.python = str(path)
        elif path.is_dir():
            self.env = {"PYTHONPATH": os.pathsep.join(p for p in (str(path.resolve()), os.environ.get("PYTHONPATH"))
                                                      if p)}
        else:
            raise ValueError(f"{self.name} {self.installation!r}: not a python executable, venv or directory")

    def command(self, out: Path, profile: str, keywords: str, require: str, examples: int | None,
                extra: list) -> list[str]:
        # Both sides see the same case stream: a fixed seed, an empty example database of their own, and the masks of
        # every known bug (--gdn-masks=all; the corpus replay tracks those bugs).
        return [self.python, "-m", "pytest", "fuzz/", f"--hypothesis-profile={profile}", "--hypothesis-seed=0", "-q",
                "--gdn-masks=all", f"--gdn-db={out / f'{self.name}-examples'}",
                *([f"--gdn-examples={examples}"] if examples else []),
                f"--gdn-report={out / f'{self.name}.json'}", f"--junitxml={out / f'{self.name}.xml'}",
                *(["-k", keywords] if keywords else []), *([f"--gdn-require={require}"] if require else []),
                *(f"--gdn-target={o}" for o in self.overrides), *extra]


def run_sides(sides: list[Side], out: Path, command_args: tuple, parallel: bool) -> None:
    """Run each side's pytest (Side.command says what both sides share)."""
    procs = []
    for side in sides:
        (out / f"{side.name}.json").unlink(missing_ok=True)
        shutil.rmtree(out / f"{side.name}-examples", ignore_errors=True)
        log = open(out / f"{side.name}.log", "w")
        procs.append((side, log, subprocess.Popen(
            side.command(out, *command_args), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, **side.env})))
        if not parallel:
            procs[-1][2].wait()
    for side, log, proc in procs:
        side.returncode = proc.wait()
        log.close()
        report = out / f"{side.name}.json"
        if side.returncode in (0, 1) and report.exists():  # pytest: 0 all passed, 1 some failed
            side.report = json.loads(report.read_text())


def _kind(message: str) -> tuple[str, str]:
    """(failure class, detail) from a pytest failure line: 'path:line: module.Class: text' or '[XPASS(strict)] ..'."""
    if message.startswith("[XPASS(strict)]"):
        return "XPASS(strict)", message.removeprefix("[XPASS(strict)]").strip()
    m = re.match(r"\S+:\d+: (?:[\w.]+\.)?(\w+): ?(.*)", message, re.S)
    return (m[1], m[2]) if m else ("error", message)


def failures(report: dict) -> dict[tuple[str, str], str]:
    """(test id, failure class) -> the failing case's minimal coordinate (or the failure's first line). A fuzz
    test's failures are its distinct shrunk failures; other failed tests (corpus replay, strict xfails that passed,
    errors) come from the report's errors."""
    found = {}
    for f in report["failures"]:
        found.setdefault((f["test"], f["kind"]), f["case"])
    tests = {f["test"] for f in report["failures"]}
    for e in report["errors"]:
        if e["test"] not in tests and e["when"] == "call":
            kind, detail = _kind(e["message"])
            found.setdefault((e["test"], kind), detail.splitlines()[0][:300] if detail else "")
    return found


def compare(baseline: dict, candidate: dict) -> dict[str, list[tuple]]:
    """status -> [(test id, failure class, baseline coordinate, candidate coordinate)], statuses as STATUSES."""
    base, cand = failures(baseline), failures(candidate)
    rows = {status: [] for status in STATUSES}
    for key in sorted(base.keys() | cand.keys()):
        status = "unchanged" if key in base and key in cand else "new" if key in cand else "fixed"
        rows[status].append((*key, base.get(key), cand.get(key)))
    return rows


def write_junit(path: Path, rows: dict, summary: str) -> None:
    suite = ET.Element("testsuite", name="gdn-fuzz-gate", tests=str(sum(map(len, rows.values())) + 1),
                       failures=str(len(rows["new"]) + bool(rows["new"])))
    for status in STATUSES:
        for test, kind, base, cand in rows[status]:
            case = ET.SubElement(suite, "testcase", classname=f"gdn-fuzz-gate.{status}", name=f"{test} {kind}")
            if status == "new":
                ET.SubElement(case, "failure", message=f"new {kind}", type=kind).text = cand
            else:
                ET.SubElement(case, "system-out").text = f"{status} failure; baseline: {base}; candidate: {cand}"
    case = ET.SubElement(suite, "testcase", classname="gdn-fuzz-gate", name="summary")
    if rows["new"]:
        ET.SubElement(case, "failure", message=f"{len(rows['new'])} new failures").text = summary
    else:
        ET.SubElement(case, "system-out").text = summary
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)


def summary_lines(sides: list[Side], rows: dict) -> list[str]:
    from fuzz.cli.gate_report import drift

    lines = [f"gdn-fuzz gate: baseline {sides[0].installation} vs candidate {sides[1].installation}"]
    for side in sides:
        versions = sorted({f"{name} {t['version']}" for name, t in side.report["targets"].items()
                           if t["examples"] and t["version"]})
        lines.append(f"  {side.name}: {', '.join(side.overrides) or 'no overrides'}; {', '.join(versions) or '-'}")
    for status in STATUSES:
        lines.append(f"  {status} failures: {len(rows[status])}")
        if status != "unchanged":
            lines += [f"    {test} {kind}: {cand or base}" for test, kind, base, cand in rows[status]]
    lines.append("  numerics drift, error/bound (median, max) baseline -> candidate:")
    lines += [f"    {target:30s} {kind:12s} {b[0]:.3g}, {b[1]:.3g} -> {c[0]:.3g}, {c[1]:.3g}"
              for target, kind, b, c in drift(sides[0].report, sides[1].report)]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gdn-fuzz")
    gate = parser.add_subparsers(dest="command", required=True).add_parser(
        "gate", help="compare a baseline and a candidate installation of the target libraries",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name in SIDES:
        gate.add_argument(f"--{name}", required=True, metavar="PYTHON_OR_DIR")
        gate.add_argument(f"--{name}-override", action="append", default=[], metavar="FAMILY=module[:attr]",
                          help=f"--gdn-target for the {name} side only")
    gate.add_argument("--profile", default="gate", help="gate (CPU, the default), or h200 / b200 on a GPU host")
    gate.add_argument("--families", default="", metavar="FAMILY,...",
                      help="fuzz and replay only these families (fla, sglang, flashinfer); they must be available")
    gate.add_argument("-k", default="", metavar="EXPR", help="pytest -k expression, and-ed with --families")
    gate.add_argument("--examples", type=int, default=None,
                      help="examples per test on the gate and GPU profiles (default: the profile's)")
    gate.add_argument("--parallel", action="store_true", help="run both sides at once")
    gate.add_argument("--out", type=Path, default=Path("gate-out"))
    gate.add_argument("pytest_args", nargs="*", help="after --: more pytest arguments for both sides")
    args = parser.parse_args(argv)

    try:
        sides = [Side(name, getattr(args, name), getattr(args, f"{name}_override")) for name in SIDES]
    except ValueError as e:
        gate.error(str(e))
    families = [f for f in args.families.split(",") if f]
    keywords = " and ".join(f"({e})" for e in (" or ".join(f"{f}-" for f in families), args.k) if e)
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out.resolve()
    run_sides(sides, out, (args.profile, keywords, args.families, args.examples, args.pytest_args), args.parallel)
    broken = [s for s in sides if not s.report]
    for side in broken:
        tail = (out / f"{side.name}.log").read_text().splitlines()[-20:]
        print(f"gdn-fuzz gate: the {side.name} run failed (pytest exit {side.returncode}); "
              f"{out / side.name}.log ends:", *tail, sep="\n", file=sys.stderr)
    if broken:
        return 2
    rows = compare(sides[0].report, sides[1].report)
    lines = summary_lines(sides, rows)
    from fuzz.cli.gate_report import write_html

    write_junit(out / "gate.xml", rows, "\n".join(lines))
    write_html(out / "report.html", sides, rows)
    print(*lines, f"  report: {out / 'report.html'}, JUnit: {out / 'gate.xml'}", sep="\n")
    return 1 if rows["new"] else 0


if __name__ == "__main__":
    sys.exit(main())
