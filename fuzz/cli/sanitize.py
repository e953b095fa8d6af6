"""`gdn-fuzz sanitize`: replay cases under `compute-sanitizer --tool memcheck`, each report attributed to its case
(the engine: fuzz.run.sanitize).

    gdn-fuzz sanitize flashinfer-bf16 'decode-B2-...' 'verify-B3-...'
    gdn-fuzz sanitize flashinfer-bf16 --sample 20 --op decode --profile h200
"""

from __future__ import annotations

import argparse
import json
from contextlib import ExitStack
from dataclasses import asdict
from pathlib import Path

from fuzz.cli.earlier import keep_file
from fuzz.cli.parser import Parser
from fuzz.generate.profiles import PROFILES
from fuzz.model.case import Case
from fuzz.run import sanitize as engine
from fuzz.run.paths import unwritable_file
from fuzz.run.sanitize import sanitize


def sample(target, op: str, profile: str, n: int) -> list[Case]:
    """n cases the strategies draw for this target (derandomized: the same list every time)."""
    from hypothesis import Phase, given, settings
    from hypothesis import strategies as st

    from fuzz.generate.strategies import cases

    drawn: list[Case] = []

    @settings(max_examples=n, derandomize=True, database=None, deadline=None, phases=[Phase.generate])
    @given(st.data())
    def collect(data):
        drawn.append(data.draw(cases(target, op, PROFILES[profile].budget)))

    collect()
    return drawn[:n]


def main(argv: list[str]) -> int:
    p = Parser(
        prog="gdn-fuzz sanitize",
        description=__doc__ + "\n" + engine.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target")
    p.add_argument("coordinates", nargs="*")
    p.add_argument("--sample", type=int, default=0, help="also draw this many cases from the strategies")
    p.add_argument("--op", default="decode")
    p.add_argument("--profile", default="h200", choices=PROFILES)
    p.add_argument("--device", default="cuda")
    p.add_argument("--gdn-target", action="append", default=[], metavar="FAMILY=module")
    p.add_argument("--out", help="write the results as JSON")
    p.add_argument("--seconds", type=float, default=900.0, help="time budget: cases not finished by then are not run")
    args = p.parse_args(argv)
    if args.out and (why := unwritable_file(Path(args.out))):  # not after the cases ran
        p.error(f"--out {args.out}: {why}")
    from fuzz.targets.registry import TARGETS, overridden, parse_overrides

    restore = ExitStack()
    try:
        overrides = parse_overrides(args.gdn_target)
        restore.enter_context(overridden(overrides))
    except ValueError as e:
        p.error(str(e))
    with restore:
        target = next((t for t in TARGETS if t.name == args.target), None)
        if target is None:
            p.error(f"unknown target {args.target}; expected one of {', '.join(t.name for t in TARGETS)}")
        if why := engine.missing_sanitizer():
            p.refuse(why)
        todo = [Case.parse(c) for c in args.coordinates] + (
            sample(target, args.op, args.profile, args.sample) if args.sample else []
        )
        results = sanitize(args.target, todo, args.device, overrides, timeout=args.seconds)
        for r in results:
            print(f"{'clean' if r.clean else 'DIRTY'}  errors={r.errors}  {r.outcome[:80]}  {r.case}")
            if not r.clean:
                print("\n".join("    " + ln for ln in r.report.splitlines()[:40]))
        print(
            f"{len(results)} of {len(todo)} cases run under memcheck within {args.seconds:g} s, "
            f"{sum(not r.clean for r in results)} with memcheck errors or a dead child"
        )
        if args.out:
            keep_file(Path(args.out), "sanitize", "--out")
            with open(args.out, "w") as f:
                json.dump([asdict(r) for r in results], f, indent=1)
        return int(any(not r.clean for r in results))
