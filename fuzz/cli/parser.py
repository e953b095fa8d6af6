"""The argument parser every `gdn-fuzz` command builds, and the exit status of bad input. A module of its own, so
that the commands import it, not the dispatcher (fuzz.cli.main) that loads them: no command imports back up."""

from __future__ import annotations

import argparse

BAD_INPUT = 2  # the exit status of every refused argument, coordinate or file


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line: the usage block is what --help is for."""

    def error(self, message: str):
        self.exit(BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def refuse(self, message: str):
        """Bad input that parsed (a cache directory, an override, a file that is no report): one line, no pointer to
        --help, which would not say more."""
        self.exit(BAD_INPUT, f"{self.prog}: error: {message}\n")
