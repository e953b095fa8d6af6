"""Nothing lost: a command never deletes or overwrites what an earlier run wrote. Where `gdn-fuzz gate` or `gdn-fuzz
campaign` is given an --out that holds an earlier run's results, or `gdn-fuzz export` an -o / --issue file that
exists, those results move aside first, named by the time they were written, and the command says where in one line
on stderr:

    gdn-fuzz gate: --out gate-out held an earlier gate's results (summary.md, gate.xml, report.html and 9 more):
    moved them to gate-out/gate-2026-12-05T10-31-07

A directory's results move into a new directory inside it, OUT/COMMAND-TIME (only the entries the command writes:
anything else there stays where it is); a file becomes NAME.TIME.SUFFIX beside itself. So the new results are always
at the path given, which a CI job's artifact upload and JUnit report name, and a job re-run on a persistent workspace
neither fails nor loses the first run's results. The time is the newest modification time among them, local, with no
':' (artifact uploads and Windows refuse it)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

STAMP = "%Y-%m-%dT%H-%M-%S"


def keep_results(out: Path, results: tuple[str, ...], command: str, option: str = "--out") -> Path | None:
    """Move the entries of directory `out` that match the glob patterns `results` (what `command` writes there) into
    OUT/COMMAND-TIME, and say so; return that directory, or None where `out` holds none."""
    if not out.is_dir():
        return None
    earlier = sorted({p for pattern in results for p in out.glob(pattern)}, key=lambda p: p.name)
    if not earlier:
        return None
    aside = _free(out / f"{command}-{_written(earlier)}")
    aside.mkdir()
    for path in earlier:
        path.rename(aside / path.name)
    names = ", ".join(p.name for p in earlier[:3]) + (f" and {len(earlier) - 3} more" if len(earlier) > 3 else "")
    _say(command, f"{option} {out} held an earlier {command}'s results ({names}): moved them to {aside}")
    return aside


def keep_file(path: Path, command: str, option: str) -> Path | None:
    """Rename an existing file `path` to NAME.TIME.SUFFIX beside it, and say so; return its new path, or None where
    there is no file."""
    if not path.is_file():
        return None
    aside = _free(path.with_name(f"{path.stem}.{_written([path])}{path.suffix}"))
    path.rename(aside)
    _say(command, f"{option} {path} held an earlier {command}: moved it to {aside}")
    return aside


def _written(paths: list[Path]) -> str:
    return time.strftime(STAMP, time.localtime(max(p.stat().st_mtime for p in paths)))


def _free(path: Path) -> Path:
    """`path`, or the first of PATH-2, PATH-3... (before the suffix) that does not exist."""
    n, free = 1, path
    while free.exists():
        n += 1
        free = path.with_name(f"{path.stem}-{n}{path.suffix}")
    return free


def _say(command: str, what: str) -> None:
    print(f"gdn-fuzz {command}: {what}", file=sys.stderr, flush=True)
