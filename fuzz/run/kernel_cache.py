"""The kernel cache a user keeps (--gdn-kernel-cache): compiled kernels on disk, one directory per library release,
so a run (or a CI job that restores the directory) starts warm instead of compiling every bucket again.

FlashInfer's CuTe DSL objects go under FLASHINFER_WORKSPACE_BASE (read when flashinfer is imported, so this is set
before any target loads), Triton's under TRITON_CACHE_DIR. Neither cache is keyed by the library's release (a CuTe DSL
kernel by its arguments), so each release gets its own directory: `ROOT/flashinfer-<version>`,
`ROOT/triton-<version>`. Triton writes an entry under a temporary name and renames it into place, so processes may
share its directory; nothing in either names the directory's own path, so a CI cache can restore it elsewhere. xdist
and --gdn-isolate workers inherit the environment; a campaign's installations each get a subdirectory of their own
(fuzz.run.installation.cache_env). A variable the user set already is kept as it is.
"""
from __future__ import annotations

import importlib.metadata
import os
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
        return f"kernel cache {self.root}: " + ", ".join(
            f"{Path(path).name if var not in self.kept else path}" for var, path in self.directories.items()) + kept


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


__all__ = ["CACHES", "KernelCache", "configure", "default_root"]
