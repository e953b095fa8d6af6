"""`gdn-fuzz export`: a standalone reproduction script for a corpus entry or a coordinate (fuzz.export.script), and
with --issue a markdown body for an upstream issue (fuzz.export.issue).

    gdn-fuzz export corpus/sglang-recurrent-decode-StateMismatch-0.json -o repro.py --issue issue.md
    gdn-fuzz export 'decode-B1-T1-...' --target flashinfer-bf16 --module fuzz.standins.flashinfer_cpu -o r.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from fuzz.cli.earlier import keep_file
from fuzz.cli.parser import Parser
from fuzz.export import issue, script
from fuzz.export.shake import ShakeError
from fuzz.model.case import Case
from fuzz.run import corpus
from fuzz.run.paths import unwritable_file


def main(argv: list[str]) -> int:
    """Bad input (an unknown target, a coordinate or corpus entry that does not parse, an output path that is a
    directory or lies in none, a case whose call cannot be written) is one line and exit 2, before any work; a
    written script prints its path and size, and an issue body the outcome line it holds."""
    parser = Parser(prog="gdn-fuzz export", description=__doc__.split("\n\n")[0])
    parser.add_argument("case", help="a corpus/*.json file or a Case coordinate")
    parser.add_argument("--target", help="target name (default: the corpus entry's)")
    parser.add_argument("--module", help="load this override (module.path[:attr]) instead of the library")
    parser.add_argument("-o", "--output", type=Path, help="write the script here (default: stdout)")
    parser.add_argument("--issue", type=Path, help="also write a markdown issue body here (runs the script once)")
    args = parser.parse_args(argv)
    try:
        entry = corpus.load(Path(args.case)) if args.case.endswith(".json") else None
        case = entry.case if entry else Case.parse(args.case)
    except (corpus.CorpusError, ValueError, OSError) as e:
        parser.error(f"{args.case}: {e}")
    if entry is None and not args.target:
        parser.error("--target is required with a coordinate")
    if args.issue and not args.output:
        parser.error("--issue needs -o: the issue carries the script")
    for option, path in (("-o", args.output), ("--issue", args.issue)):
        if path is not None and (why := unwritable_file(path)):
            parser.error(f"{option} {path}: {why}")
    try:
        exported = script.export(
            case,
            args.target or entry.target,
            library_module=args.module,
            entry=entry,
            name=args.output.name if args.output else "repro.py",
        )
    except (ValueError, ShakeError) as e:  # NotExportable, an unknown target: one line
        parser.error(str(e))
    if not args.output:
        sys.stdout.write(exported.text)
        return 0
    for option, path in (("-o", args.output), ("--issue", args.issue)):  # an earlier export's, kept
        if path is not None:
            keep_file(path, "export", option)
    args.output.write_text(exported.text)
    size = f"{len(exported.text.splitlines())} lines, {len(exported.text.encode()) / 1000:.1f} KB"
    print(f"wrote {args.output} ({size}): python {args.output}")
    if args.issue:
        body = issue.issue_body(exported, args.output, case, entry)
        args.issue.write_text(body.text)
        print(f"wrote {args.issue}: {body.title}\n  the script's outcome here: {body.verdict}")
    return 0
