"""Import single files of an installed package without running its ``__init__.py`` chain (SGLang's and vLLM's
package inits pull in a whole serving stack, while their GDN kernel files need only torch and triton).

The loaders (fuzz.targets.sglang_loader, sglang_glue_loader, vllm_loader) register empty packages whose `__path__`
is the real folder, so submodules import from the wheel, and stub the few modules those files import from the
engine; under TRITON_INTERPRET=1 they swap bare `tl.exp`-style bindings for the @triton.jit wrappers of jit_math().
"""

from __future__ import annotations

import contextlib
import functools
import importlib.machinery
import importlib.metadata
import importlib.util
import sys
import types
from pathlib import Path

import triton
import triton.language as tl


class WheelUnavailable(RuntimeError):
    """A package's files cannot be loaded; `reason` says what to do about it (each loader has its own subclass)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@contextlib.contextmanager
def import_errors_as(unavailable: type[WheelUnavailable], where: str, stubs: str, what: str = "a kernel file"):
    """An ImportError inside becomes `unavailable`: `where` (the package, its version and folder) could not load,
    because `what` needs a module that is neither installed nor stubbed by the loader module `stubs`."""
    try:
        yield
    except ImportError as e:
        missing = e.name or e
        raise unavailable(f"{where}: {what} needs {missing}, which is neither installed nor stubbed in {stubs}") from e


def find_installed(package: str) -> tuple[Path, str] | None:
    """(the directory `import package` would use, its distribution's version or "unknown"), None when it is not
    installed; find_spec runs no code for a top-level package."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        version = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return Path(spec.submodule_search_locations[0]), version


def register_packages(root: Path, *packages: str) -> None:
    """Each package and every package above it as an empty module whose `__path__` is its folder under `root` (the
    installed top-level package's directory): its submodules import from the wheel, no `__init__.py` runs. Packages
    already in sys.modules (real or registered before) are kept."""
    for name in {p for package in packages for p in _prefixes(package)}:
        sys.modules.setdefault(name, _package(name, root))


def stub(name: str, **attrs) -> None:
    """The module `name` in sys.modules (a new empty one unless there is one) gains the attributes it lacks."""
    module = sys.modules.setdefault(name, types.ModuleType(name))
    for key, value in attrs.items():
        if not hasattr(module, key):
            setattr(module, key, value)


def _prefixes(dotted: str) -> list[str]:
    parts = dotted.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _package(name: str, root: Path) -> types.ModuleType:
    spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
    spec.submodule_search_locations = [str(root.joinpath(*name.split(".")[1:]))]
    return importlib.util.module_from_spec(spec)


@functools.cache
def jit_math() -> types.MappingProxyType:
    """exp and log as @triton.jit wrappers of tl's builtins (the op.py functions the loaded kernels call: exp for
    SGLang's, exp and log for vLLM's). fla-style `op.py` files bind `exp = tl.exp`, a bare builtin that
    TRITON_INTERPRET=1 rejects when a kernel calls it through the module ("Did you forget to add @triton.jit"); the
    loaders put these in its place. Decorated at the first call, as the kernel files are: Triton decides at decoration
    whether a function is interpreted."""

    @triton.jit
    def exp(x):
        return tl.exp(x)

    @triton.jit
    def log(x):
        return tl.log(x)

    return types.MappingProxyType({"exp": exp, "log": log})
