"""A warm-up beside the fuzz runs, for a start from an empty kernel cache (`gdn-fuzz campaign --warm`): the order it
compiles in, what it has compiled so far, and what the runs read of that.

`gdn-fuzz warm` (fuzz.run.warm) compiles the bucket plan before a run: a CI job without a kept cache waits minutes
for it. Run beside the runs instead, the warm-up
  * compiles in the order the fuzz tests need kernels (`cold_order`): the threshold plans first (every test checks
    them before anything else), then one planned bucket of every target and operation, then a second of each, and
    so on, so every test has a compiled bucket early;
  * says after each bucket which are compiled (`Tracker`: PROGRESS in each cache directory, with its host and pid,
    removed when it ends);
  * and the fuzz tests, round by round, draw their planned buckets among the compiled ones while it runs
    (`compiled`, read by fuzz.suite.session; fuzz.generate.strategies draws from Budget.compiled), so they fuzz what
    is compiled while it compiles the rest. An isolated worker links what the warm-up published into its own
    workspace at its next refresh (fuzz.run.worker), and loads it instead of compiling it again.
A round draws from the plan as it stood when the round began, so its shrinks replay the same cases; once the warm-up
is over (or dead), every round draws from the whole plan again, as a run from a warm cache does.
"""

from __future__ import annotations

import json
import os
import signal
import socket
from itertools import zip_longest
from pathlib import Path

from fuzz.run.warm import Unit, manifest_key

PROGRESS = "gdn-warm-progress.json"
THRESHOLDS = "thresholds"  # a unit of the threshold plan, in PROGRESS


def cold_order(units: list[Unit]) -> list[Unit]:
    """The units in the order a warm-up beside the runs compiles them: every threshold plan, then round robin over
    the targets and operations, each one's buckets in plan order (simplest first)."""
    first = [u for u in units if u.bucket is None]
    by_pair: dict[tuple[str, str], list[Unit]] = {}
    for u in units:
        if u.bucket is not None:
            by_pair.setdefault((u.target, u.op), []).append(u)
    return first + [u for row in zip_longest(*by_pair.values()) for u in row if u is not None]


class Tracker:
    """Writes, after each unit, which buckets of which plans the warm-up has compiled, to PROGRESS in each cache
    directory (atomically); `close` removes it."""

    def __init__(self, directories, profile: str, masks: str):
        self.paths = [Path(d) / PROGRESS for d in directories]
        self.state = {"host": socket.gethostname(), "pid": os.getpid(), "profile": profile, "masks": masks, "done": {}}
        self._write()

    def done(self, unit: Unit) -> None:
        key = manifest_key(self.state["profile"], self.state["masks"], unit.target, unit.op)
        self.state["done"].setdefault(key, []).append(THRESHOLDS if unit.bucket is None else repr(unit.bucket))
        self._write()

    def close(self) -> None:
        for path in self.paths:
            path.unlink(missing_ok=True)

    def _write(self) -> None:
        for path in self.paths:
            staging = path.with_name(f"{PROGRESS}.tmp{os.getpid()}")
            staging.write_text(json.dumps(self.state))
            os.replace(staging, path)


def compiled(directories, profile: str, masks: str, target: str, op: str) -> frozenset[str] | None:
    """The planned buckets (their reprs) of `target` and `op` a warm-up running now on this host has compiled for
    this profile and masks; None when none runs (no PROGRESS, or its process is gone), so the whole plan is drawn."""
    for directory in directories:
        try:
            state = json.loads((Path(directory) / PROGRESS).read_text())
        except (OSError, ValueError):
            continue
        if (state.get("profile"), state.get("masks")) != (profile, masks) or not _alive(state):
            continue
        return frozenset(state.get("done", {}).get(manifest_key(profile, masks, target, op), ()))
    return None


def beside(where, args, jobs: int, log: Path):
    """Start `gdn-fuzz warm` on an installation (fuzz.run.installation.Installation) for a campaign's runs: its
    profile, masks and families, the kernel cache and family overrides its pytest arguments give (--gdn-kernel-cache,
    --gdn-target), in `jobs` processes; its output into `log`. The running process."""
    cmd = ["-m", "fuzz", "warm", "--profile", args.profile, "--masks", args.masks, "--jobs", str(jobs)]
    cmd += ["-k", args.families[0]] if len(args.families) == 1 else []
    cmd += [x for v in _given(args.pytest, "--gdn-kernel-cache") for x in ("--kernel-cache", v)][-2:]
    cmd += [x for v in _given(args.pytest, "--gdn-target") for x in ("--override", v)]
    return where.start(cmd, log)


def stop(proc) -> str:
    """End a warm-up beside the runs once they are over (its process group, as a killed run's); what became of it."""
    if proc.poll() is not None:
        return f"had finished (exit {proc.returncode})"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return "was still compiling: stopped"


def _given(args: list[str], option: str) -> list[str]:
    """The values of `option` among pytest arguments (`--opt V` or `--opt=V`), in order."""
    values, rest = [], iter(args)
    for arg in rest:
        if arg == option:
            values.append(next(rest, ""))
        elif arg.startswith(option + "="):
            values.append(arg.split("=", 1)[1])
    return [v for v in values if v]


def _alive(state: dict) -> bool:
    if state.get("host") != socket.gethostname():
        return False
    try:
        os.kill(int(state.get("pid", -1)), 0)
    except (OSError, ValueError):
        return False
    return True


__all__ = ["PROGRESS", "THRESHOLDS", "Tracker", "beside", "cold_order", "compiled", "stop"]
