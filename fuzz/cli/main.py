"""`gdn-fuzz`: the command line. `gdn-fuzz gate` compares two installations, `gdn-fuzz campaign` fuzzes releases
at once, `gdn-fuzz export` writes a standalone reproduction script. The fuzz suites themselves run under pytest."""
from __future__ import annotations

import sys

COMMANDS = {
    "gate": ("fuzz.cli.gate", "compare a baseline and a candidate installation of the target libraries"),
    "campaign": ("fuzz.run.campaign", "time-boxed fuzzing of target families on one or more installations"),
    "export": ("fuzz.export.script", "a standalone reproduction script for a corpus entry or a coordinate"),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        usage = "\n".join(f"  {name:9s} {what}" for name, (_, what) in COMMANDS.items())
        print(f"usage: gdn-fuzz COMMAND [ARGS]\n{usage}", file=sys.stderr)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    import importlib

    module = importlib.import_module(COMMANDS[argv[0]][0])
    return module.main(argv if argv[0] == "gate" else argv[1:])


if __name__ == "__main__":
    sys.exit(main())
