"""Paths the user names, checked before any work: a file the run will write, a directory it will write in. A bad one
used to surface late, as a traceback (a report path naming a directory after the first test, --gdn-corpus-out naming
a file after minutes of fuzzing, `gdn-fuzz gate --out FILE` with the gate's own "new failure" status). Each check
gives why the path will not do, in words that follow the option's name, or None; the pytest options
(fuzz.suite.options) and the commands (fuzz/cli) turn that into their one line.

Writable means what access(2) says for this process (a read-only filesystem included), before anything is made."""

from __future__ import annotations

import os
from pathlib import Path


def unwritable_file(path: Path) -> str | None:
    """Why a file cannot be written at `path` (made, or rewritten where it exists), or None."""
    if path.is_dir():
        return "a directory; give a file name in it"
    parent = path.resolve().parent
    if not parent.is_dir():
        return f"no directory {path.parent} to write it in"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"the directory {path.parent} is not writable"
    if path.exists() and not os.access(path, os.W_OK):
        return "a file that is not writable"
    return None


def unwritable_dir(path: Path) -> str | None:
    """Why `path` cannot be a directory to write in (made, with its parents, where it is missing), or None."""
    if path.exists():
        if not path.is_dir():
            return "a file, not a directory"
        return None if os.access(path, os.W_OK | os.X_OK) else "a directory that is not writable"
    existing = next(p for p in path.resolve().parents if p.exists())  # the root exists
    if not existing.is_dir():
        return f"cannot be made: {existing} is a file, not a directory"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"cannot be made: {existing} is not writable"
    return None
