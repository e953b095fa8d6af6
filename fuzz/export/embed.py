"""Which of gdn-fuzz's modules an exported script carries, and their text, verbatim.

A script runs the fuzzer's own check, so it carries what that check imports: the Case, materialize and the value
generator, the target's adapter with its base, family and semantics rows, reference/ (the oracle), the judge and the
harness, and an override module of ours (a stand-in, a mutant). They are found by reading import statements, at
module level and inside functions (a lazy import is one the script may reach), without importing the modules
themselves (only their parent packages), and their text is the installed files', decoded as the import system decodes
them: the script holds exactly the code the fuzzer runs. Anything outside gdn-fuzz's packages (torch,
packaging, the kernel library) is imported where the script runs.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import fuzz

ROOT = Path(fuzz.__file__).resolve().parents[1]  # the checkout, or site-packages for an installed gdn-fuzz
PACKAGES = ("fuzz", "reference", "tests")  # tests: the checkout's mutants, which are override modules
# the check, the environment the script prints, and the tap that records the library call it makes
CHECK = ("fuzz.run.harness", "fuzz.run.environment", "fuzz.export.call")


def is_ours(name: str) -> bool:
    """A module of gdn-fuzz's packages that lives in this gdn-fuzz (not an unrelated `tests` elsewhere)."""
    if name.partition(".")[0] not in PACKAGES:
        return False
    spec = _spec(name)
    if spec is None:
        return False
    places = [spec.origin] if spec.has_location else list(spec.submodule_search_locations or ())
    return any(Path(p).resolve().is_relative_to(ROOT) for p in places)


def _source(spec) -> str:
    """The text of a module's file. Read from spec.origin, not through spec.loader: under pytest, the entry point's
    package is loaded by pytest's assertion-rewriting hook, which has no get_source."""
    return importlib.util.decode_source(Path(spec.origin).read_bytes())


def closure(roots: list[str]) -> dict[str, str]:
    """Module name -> source of every module of ours that `roots` import, directly or not, parent packages
    included; dependencies come before the modules importing them. A namespace package (tests/ has no
    __init__.py) has no source and is left out: the script's loader makes it an empty package."""
    done: dict[str, str | None] = {}

    def visit(name: str) -> None:
        if name in done:
            return
        done[name] = None  # placeholder against import cycles
        parent = name.rpartition(".")[0]
        if parent:
            visit(parent)
        spec = _spec(name)
        source = _source(spec) if spec.has_location else None
        for dependency in _imports(name, source or "", _is_package(spec)):
            visit(dependency)
        del done[name]  # re-inserted after its dependencies: the dict's order is an import order
        done[name] = source

    for root in roots:
        visit(root)
    return {name: source for name, source in done.items() if source is not None}


def _imports(name: str, source: str, is_package: bool) -> list[str]:
    """Modules of ours named by the import statements of `source` (`from a.b import c` names a.b, and a.b.c
    when a.b is a package that has a module c)."""
    package = name if is_package else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = (
                importlib.util.resolve_name("." * node.level + (node.module or ""), package)
                if node.level
                else node.module
            )
            found.append(base)
            if is_ours(base) and _is_package(_spec(base)):
                found += [f"{base}.{alias.name}" for alias in node.names]
    return [m for m in dict.fromkeys(found) if is_ours(m)]


def _is_package(spec) -> bool:
    return spec.submodule_search_locations is not None


def _spec(name: str):
    """The module's spec, found without running it (find_spec imports its parent packages only)."""
    try:
        return importlib.util.find_spec(name)
    except ImportError:
        return None


def literal(source: str) -> str:
    """`source` as a Python string literal that reads like the file: a raw triple-quoted string where the text
    allows one (it always ends with a newline, so no closing quote or backslash can touch the delimiter)."""
    if source.endswith("\n"):
        for quote in ("'''", '"""'):
            if quote not in source:
                return f"r{quote}{source}{quote}"
    return repr(source)


def path_of(name: str) -> str:
    """The module's file relative to the checkout (or site-packages): fuzz/model/case.py, fuzz/__init__.py."""
    return Path(_spec(name).origin).resolve().relative_to(ROOT).as_posix()
