"""The kernel cache a user keeps (--gdn-kernel-cache): compiled kernels on disk, one directory per library release,
so a run (or a CI job that restores the directory) starts warm instead of compiling every bucket again.

FlashInfer's CuTe DSL objects go under FLASHINFER_WORKSPACE_BASE (read when flashinfer is imported, so this is set
before any target loads), Triton's under TRITON_CACHE_DIR. Neither cache is keyed by the library's release (a CuTe DSL
kernel by its arguments), so each release gets its own directory: `ROOT/flashinfer-<version>`,
`ROOT/triton-<version>`. Triton writes an entry under a temporary name and renames it into place, so processes may
share its directory; nothing in either names the directory's own path, so a CI cache can restore it elsewhere. xdist
and --gdn-isolate workers inherit the environment; a campaign's installations each get a subdirectory of their own
(fuzz.run.installation.Installation.caches). A variable the user set already is kept as it is.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

# environment variable -> the distribution whose release names the directory
CACHES = {"FLASHINFER_WORKSPACE_BASE": ("flashinfer", "flashinfer-python"), "TRITON_CACHE_DIR": ("triton", "triton")}


def default_root() -> Path:
    """$XDG_CACHE_HOME/gdn-fuzz/kernels, else ~/.cache/gdn-fuzz/kernels."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gdn-fuzz" / "kernels"


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "none"


@dataclass(frozen=True)
class KernelCache:
    """Where each compile cache of this run lives (variable -> directory), and which of them the user set."""

    root: Path
    directories: dict
    kept: tuple[str, ...] = ()  # variables the user had set: left as they were

    def describe(self) -> str:
        """One line for the targets table."""
        kept = f"; kept as set: {', '.join(self.kept)}" if self.kept else ""
        return (
            f"kernel cache {self.root}: "
            + ", ".join(
                f"{Path(path).name if var not in self.kept else path}" for var, path in self.directories.items()
            )
            + kept
        )


def configure(root: str | os.PathLike | None, environ=os.environ) -> KernelCache:
    """Point the compile caches of this process and its children at `root` (None: default_root()), one directory per
    library release, made if missing. Call before any target imports its library."""
    base = Path(root).expanduser().resolve() if root else default_root()
    directories = {var: environ[var] for var in CACHES if var in environ}
    kept = tuple(directories)
    for var, (name, dist) in CACHES.items():
        if var in kept:
            continue
        path = base / f"{name}-{_version(dist)}"
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ValueError(f"--gdn-kernel-cache {base}: cannot create {path}: {e.strerror}") from e
        environ[var] = directories[var] = str(path)
    return KernelCache(base, directories, kept)


# ---- worker processes: a workspace each, published to the shared one ------------------------------------------------
# FlashInfer (0.7, jit/cute_dsl_core.py JitSpecCuteDsl.build_and_load) holds one file lock per kernel module (every
# decode kernel of gdn_decode_bf16_state.py, say) for the whole of a compile, and the lock lives in the workspace. So
# the processes of one workspace compile one kernel of a module at a time: 16 workers meeting new bf16-state compile
# keys wait in one line. A cache hit reads the object file without the lock. Hence each worker process gets a
# workspace of its own holding links to every object the shared one has (hits stay hits), compiles in it unlocked by
# the others, and publishes what it compiled back to the shared one.
PRIVATE = ".workers"  # under the shared workspace (one filesystem, so links work); removed when a worker is done
_SKIP = ("tmp",)  # FlashInfer's lock directory


def _entries(root: Path):
    """(relative path, path) of the files a workspace's caches hold: not locks, not half-written temporaries."""
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = [d for d in subdirs if d not in _SKIP and d != PRIVATE]
        for name in files:
            if name.endswith(".lock") or ".tmp" in name:
                continue
            path = Path(directory) / name
            yield path.relative_to(root), path


def _place(source: Path, target: Path) -> None:
    """target := source, atomically (a link where the filesystem allows, else a copy), never over an existing one."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f"{target.name}.tmp.gdn{os.getpid()}")
    try:
        os.link(source, staging)
    except OSError:
        shutil.copy2(source, staging)
    os.replace(staging, target)


def private_workspace(shared: str | os.PathLike) -> Path:
    """A new workspace under `shared` holding links to every compiled object `shared` has."""
    private = Path(tempfile.mkdtemp(prefix="w", dir=Path(shared) / PRIVATE if _mkdir(Path(shared) / PRIVATE) else None))
    for relative, path in _entries(Path(shared)):
        _place(path, private / relative)
    return private


def publish(private: str | os.PathLike, shared: str | os.PathLike) -> int:
    """Link each object `private` has and `shared` lacks into `shared`; a module's commit marker (FlashInfer's
    meta.json, written after its first object) after its objects. Returns how many were added."""
    added, markers = 0, []
    for relative, path in _entries(Path(private)):
        target = Path(shared) / relative
        if target.exists():
            continue
        if relative.name == "meta.json":
            markers.append((path, target))
            continue
        _place(path, target)
        added += 1
    for path, target in markers:
        _place(path, target)
    return added


# ---- where a check's kernel time went: compiling, or running ---------------------------------------------------------
BUILD_LOG = "FLASHINFER_JIT_BUILD_LOG"  # FlashInfer (0.7, jit/core.py _record_jit_build) appends a line per compile


class BuildLog:
    """The compiles FlashInfer records in this process's build log (set BUILD_LOG to `path` before the first check):
    `take()` gives the seconds compiled since the last take. Loading a compiled kernel from the cache is no compile:
    it stays in the kernel phase."""

    def __init__(self, path: str | os.PathLike):
        self.path, self._offset = Path(path), 0

    def take(self) -> float:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except OSError:
            return 0.0
        complete = data[: data.rfind(b"\n") + 1]
        self._offset += len(complete)
        seconds = 0.0
        for line in complete.splitlines():
            try:
                seconds += float(json.loads(line).get("seconds", 0.0))
            except (ValueError, AttributeError):
                continue
        return seconds


def split_compile(phases: dict, compiled: float) -> dict:
    """A check's phases with the compile seconds taken out of its kernel phase (into "compile")."""
    if compiled <= 0:
        return phases
    moved = min(compiled, phases.get("kernel", 0.0))
    return {**phases, "kernel": phases.get("kernel", 0.0) - moved, "compile": moved}


def _mkdir(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
        return True
    except OSError:
        return False


__all__ = [
    "BUILD_LOG",
    "CACHES",
    "BuildLog",
    "KernelCache",
    "configure",
    "default_root",
    "private_workspace",
    "publish",
    "split_compile",
]
