"""`gdn-fuzz`: the command line. `gdn-fuzz gate` compares two installations, `gdn-fuzz campaign` fuzzes releases
at once, `gdn-fuzz export` writes a standalone reproduction script. The fuzz suites themselves run under pytest.

Bad input is one line on stderr and exit status 2: an unknown command, an argument a command refuses, a Case
coordinate or corpus entry that does not load.

This module only dispatches: it imports the named command when it runs (each command's engine takes seconds to
import), hands it the arguments after its name, and turns a coordinate or corpus file that does not load into one
line. The commands' shared parser is fuzz.cli.parser; no command imports this module."""

from __future__ import annotations

import importlib
import sys

from fuzz.cli.parser import BAD_INPUT

COMMANDS = {
    "gate": ("fuzz.cli.gate", "compare a baseline and a candidate installation of the target libraries"),
    "campaign": ("fuzz.cli.campaign", "time-boxed fuzzing of target families on one or more installations"),
    "export": ("fuzz.cli.export", "a standalone reproduction script for a corpus entry or a coordinate"),
    "warm": ("fuzz.cli.warm", "compile a profile's bucket plan into the kernel cache ahead of a run"),
    "probe": ("fuzz.cli.probe", "check coordinates on targets, one verdict a line (--grid varies B, H, G, T)"),
    "sanitize": ("fuzz.cli.sanitize", "replay cases under compute-sanitizer memcheck, errors attributed to cases"),
    "calibrate": ("fuzz.cli.calibrate", "how close passing cases come to the verdict's bound, per target and output"),
    "hypofuzz": ("fuzz.cli.hypofuzz", "coverage-guided campaigns under HypoFuzz, one worker process per GPU"),
}
USAGE = "usage: gdn-fuzz COMMAND [ARGS]\n" + "\n".join(f"  {name:9s} {what}" for name, (_, what) in COMMANDS.items())


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else BAD_INPUT
    if argv[0] not in COMMANDS:
        print(
            f"gdn-fuzz: unknown command {argv[0]!r}; expected one of {', '.join(COMMANDS)} (see gdn-fuzz --help)",
            file=sys.stderr,
        )
        return BAD_INPUT
    module = importlib.import_module(COMMANDS[argv[0]][0])
    from fuzz.model.case import CaseError
    from fuzz.run.corpus import CorpusError

    try:
        return module.main(argv[1:])
    except (CaseError, CorpusError) as e:  # a coordinate or corpus file the user named
        print(f"gdn-fuzz {argv[0]}: error: {e}", file=sys.stderr)
        return BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
