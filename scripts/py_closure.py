"""Static import closure of some modules of one installed package (sglang, vllm), for a device bundle.

usage: py_closure.py SITE START_MODULE... [--stub MOD ...] [--lazy]

SITE holds the package directory (e.g. .../site-packages). From each start module, follow the package's own imports
(absolute `pkg.x`, relative, and `from pkg import submodule`) that run at module level: inside if/try/with/class
bodies and in except branches (a guarded import counts), not under `if TYPE_CHECKING:` and not inside functions.
With --lazy, imports inside functions are followed too.

Package `__init__` files are not followed: the device loader builds empty packages (or the bundle ships empty
stub `__init__`s); each package on the way is listed on stderr as `PACKAGE name`. Modules named by --stub (or under
one) are neither followed nor required: the loader stubs them (`STUB name <- importer`). Third-party top-level
modules are listed as `EXTERNAL name <- importer`; the package's own modules that do not exist as `MISSING`.
Imports inside functions that the closure does not follow are listed as `LAZY name <- importer`.

stdout: one line per module file reached, `<size> <path relative to SITE>`; stderr: the lists above and `TOTAL`.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

args = sys.argv[1:]
lazy = "--lazy" in args
args = [a for a in args if a != "--lazy"]
stub: list[str] = []
if "--stub" in args:
    i = args.index("--stub")
    stub, args = args[i + 1 :], args[:i]
root, starts = Path(args[0]), args[1:]
top = starts[0].split(".")[0]


def under(name: str, prefixes: list[str]) -> bool:
    return any(name == s or name.startswith(s + ".") for s in prefixes)


def modfile(parts: list[str]) -> Path | None:
    base = root.joinpath(*parts)
    for c in (base.with_suffix(".py"), base / "__init__.py"):
        if c.is_file():
            return c
    return None


def is_package(parts: list[str]) -> bool:
    return root.joinpath(*parts).is_dir()


def type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(tree: ast.AST, in_function: bool = False):
    """(node, in_function) for every import statement, TYPE_CHECKING blocks skipped."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and type_checking(node.test):
            for sub in node.orelse:
                yield from imports(ast.Module(body=[sub], type_ignores=[]), in_function)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, in_function
        fn = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        yield from imports(node, in_function or fn)


seen: dict[Path, str] = {}
packages, stubs, external, missing, lazies = {}, {}, {}, {}, {}
todo: list[Path] = []


def add(parts: list[str], why: str) -> None:
    name = ".".join(parts)
    if not parts:
        return
    if parts[0] != top:
        external.setdefault(parts[0], why)
        return
    if under(name, stub):
        stubs.setdefault(name, why)
        return
    for k in range(1, len(parts)):  # parent packages: empty stand-ins, not followed
        if under(".".join(parts[:k]), stub):
            stubs.setdefault(name, why)
            return
        packages.setdefault(".".join(parts[:k]), name)
    if is_package(parts):
        packages.setdefault(name, why)
        return
    f = modfile(parts)
    if f is None:
        missing.setdefault(name, why)
        return
    if f not in seen:
        seen[f] = why
        todo.append(f)


def resolve(node: ast.ImportFrom | ast.Import, mparts: list[str], is_init: bool) -> list[list[str]]:
    if isinstance(node, ast.Import):
        return [a.name.split(".") for a in node.names]
    pkg = mparts if is_init else mparts[:-1]
    base = pkg[: len(pkg) - (node.level - 1)] if node.level else []
    mod = base + (node.module.split(".") if node.module else [])
    out = []
    # `from pkg import name`: a submodule when the file exists, else an attribute of pkg
    subs = [mod + [a.name] for a in node.names if modfile(mod + [a.name]) is not None or is_package(mod + [a.name])]
    if len(subs) < len(node.names) or not is_package(mod):
        out.append(mod)
    return out + subs


for m in starts:
    add(m.split("."), "start")
while todo:
    f = todo.pop()
    rel = f.relative_to(root).with_suffix("")
    mparts = list(rel.parts)
    is_init = mparts[-1] == "__init__"
    if is_init:
        mparts = mparts[:-1]
    me = ".".join(mparts)
    for node, in_fn in imports(ast.parse(f.read_bytes())):
        for target in resolve(node, mparts, is_init):
            if in_fn and not lazy:
                if target[0] == top and modfile(target) not in seen:
                    lazies.setdefault(".".join(target), me)
                continue
            add(target, me)

tot = 0
for f in sorted(seen):
    sz = f.stat().st_size
    tot += sz
    print(f"{sz:9d} {f.relative_to(root)}")
for label, table in (("PACKAGE", packages), ("STUB", stubs), ("EXTERNAL", external), ("MISSING", missing)):
    for name, why in sorted(table.items()):
        print(f"{label} {name} <- {why}", file=sys.stderr)
for name, why in sorted(lazies.items()):
    if not any(name == ".".join(f.relative_to(root).with_suffix("").parts) for f in seen):
        print(f"LAZY {name} <- {why}", file=sys.stderr)
print("TOTAL", tot, len(seen), file=sys.stderr)
