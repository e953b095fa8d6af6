"""`gdn-fuzz probe`: check coordinates on named targets and print each verdict, one line a check: a triage helper.

    gdn-fuzz probe 'decode-B1-T1-H1-HV1-K128-V128-pool2-...' --target flashinfer-bf16
    gdn-fuzz probe 'verify-B1-T1-...' --target flashinfer-mtp-fp32 --grid B=1,2,3 H=1,2 G=1,2 T=1,2

--grid isolates a trigger: every combination of batch B (slots 1..B, pool B+1), qk heads H, GVA ratio G (HV = G*H)
and tokens T is derived from each coordinate and checked. Without --target every available target that supports the
case is checked; a named target that is unavailable, or whose support leaves the case out, is listed, not checked.
Exit status: 1 when a check failed, 0 when all passed, 2 on bad input.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import sys
from collections.abc import Iterator

import torch

from fuzz.cli.parser import Parser
from fuzz.model.case import Case
from fuzz.run.harness import check
from fuzz.run.result import CheckResult
from fuzz.targets.base import Target
from fuzz.targets.registry import TARGETS, overriding

GRID = ("B", "H", "G", "T")


def variants(base: Case, grid: dict[str, tuple[int, ...]]) -> Iterator[Case]:
    """The base case with each combination of the grid's values; each batch gets slots 1..B of a B+1 pool."""
    names = list(grid)
    for values in itertools.product(*(grid[n] for n in names)):
        v = dict(zip(names, values))
        B, H, T = v.get("B", base.B), v.get("H", base.H), v.get("T", base.T)
        HV = H * v.get("G", base.HV // base.H)
        op = base.op if base.op == "prefill" else "decode" if T == 1 else "verify"
        yield dataclasses.replace(
            base,
            op=op,
            H=H,
            HV=HV,
            T=T,
            pool=B + 1,
            read_slots=tuple(range(1, B + 1)),
            write_slots=None,
            token_slots=None,
            inter_index=None,
            inter_rows=B if base.inter_rows else 0,
            inter_steps=T if base.inter_rows else 0,
            inter_spare_steps=0,
        )


def outside(target: Target, case: Case) -> str | None:
    """What of the case lies outside the target's declared support (the fuzzer never draws it there), or None: its
    release contract (head dims, T) included, for an installed release and a module that reports one alike."""
    sup = target.declared()
    asked = (
        ("operation", case.op, sup.ops),
        ("state dtype", case.state_dtype, sup.state_dtypes),
        ("input dtype", case.input_dtype, sup.input_dtypes),
        ("index dtype", case.index_dtype, sup.index_dtypes),
        ("layout", case.layout, sup.layouts),
        ("(K, V)", (case.K, case.V), sup.head_dims),
        ("T", case.T, range(1, sup.max_T + 1) if sup.max_T else None),
    )
    return (
        ", ".join(f"{what} {value}" for what, value, allowed in asked if allowed is not None and value not in allowed)
        or None
    )


def line(result: CheckResult) -> str:
    """One check in one line: target, outcome, the judged error-to-bound ratios or the failure, the coordinate."""
    if result.failure is not None:
        return f"{result.target}: {result.failure.kind}: {result.case!r}: {result.failure.detail[:200]}"
    if result.unavailable:  # the library said this device is not supported: no verdict
        return f"{result.target}: unavailable ({result.unavailable}): {result.case!r}"
    if result.unjudged:
        return f"{result.target}: unjudged ({result.unjudged}): {result.case!r}"
    ratios = ", ".join(f"{c.kind} {c.ratio:.3g}" for c in result.comparisons)
    return f"{result.target}: pass (error/bound: {ratios or 'nothing compared'}): {result.case!r}"


def _grid(parser: Parser, items: list[str]) -> dict[str, tuple[int, ...]]:
    grid = {}
    for item in items:
        name, _, values = item.partition("=")
        try:
            grid[name] = tuple(int(x) for x in values.split(","))
        except ValueError:
            parser.error(f"--grid {item}: expected NAME=v1,v2 with integers")
        if name not in GRID or min(grid[name]) < 1:
            parser.error(f"--grid {item}: NAME is one of {', '.join(GRID)} and the values are positive")
    return grid


def main(argv: list[str]) -> int:
    parser = Parser(prog="gdn-fuzz probe", description=__doc__.split("\n\n")[0])
    parser.add_argument("coordinates", nargs="+", help="Case coordinates (repr(case), as in failure messages)")
    parser.add_argument("--target", action="append", default=[], help="a target name (repeatable; default: all)")
    parser.add_argument("--grid", nargs="*", default=[], metavar="NAME=v1,v2", help=f"NAME in {', '.join(GRID)}")
    parser.add_argument(
        "--module",
        default=[],
        action="append",
        metavar="FAMILY=module.path[:attr]",
        help="load this module instead of the family's library, as --gdn-target does",
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    if args.device == "cpu" and "triton" not in sys.modules:
        os.environ.setdefault("TRITON_INTERPRET", "1")  # the Triton targets run interpreted on a CPU
    grid = _grid(parser, args.grid)
    known = {t.name: t for t in TARGETS}
    unknown = [n for n in args.target if n not in known]
    if unknown:
        parser.error(f"unknown target {', '.join(unknown)}; expected one of {', '.join(sorted(known))}")
    try:
        restore = overriding(args.module, "--module")
    except ValueError as e:
        parser.error(str(e))
    with restore:
        bases = [Case.parse(c) for c in args.coordinates]
        chosen: list[Target] = [known[n] for n in args.target] or list(TARGETS)
        failed = False
        for base in bases:
            for case in variants(base, grid) if grid else [base]:
                for target in chosen:
                    reason = target.unavailable_reason(args.device)
                    if reason or outside(target, case):
                        if args.target:
                            why = (
                                f"unavailable: {reason}" if reason else f"outside its support ({outside(target, case)})"
                            )
                            print(f"{target.name}: {why}: {case!r}", flush=True)
                        continue
                    result = check(target, case, args.device)
                    failed |= result.failure is not None
                    print(line(result), flush=True)
        return 1 if failed else 0
