"""The statements of gdn-fuzz's modules that a few names need, verbatim: what an exported script carries instead of
whole modules (the float64 oracle's functions, the value generator, the tolerance rule), so it stays small and
cannot drift from the code the fuzzer runs.

`shake(roots, attributes)` starts from (module, name) pairs and follows every name a kept statement reads (a
function's body, a class's bases and fields, a default value; not annotations, which the script never evaluates)
through the module's own definitions and its imports of other gdn-fuzz modules. A class keeps its fields and those
of its methods whose name some kept code reads as an attribute (`attributes` adds the names the script's own code
reads), dunders always. Each kept statement is the file's text, with the comment lines right above it; a module's
statements keep their order, modules come after those they import. All of it lands in one namespace, so two
modules defining one name is an error (ShakeError), as is an import of ours under another name. Imports of
anything else (torch, math, triton) are returned as statements for the script to place.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import tokenize
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from fuzz.export.embed import is_ours, path_of

WIDTH = 120  # the width plain() wraps its long lines at


class ShakeError(ValueError):
    """The names asked for cannot share one namespace (a name defined twice, an import of ours renamed)."""


@dataclass(frozen=True)
class Part:
    """What one module contributes: its kept statements' text, in file order."""

    module: str  # fuzz.model.values
    path: str  # fuzz/model/values.py
    names: tuple[str, ...]  # the names those statements define, in file order
    text: str


@dataclass(frozen=True)
class Shaken:
    parts: tuple[Part, ...]  # each module after those it imports from
    imports: tuple[str, ...]  # the statements that import what the parts read from outside gdn-fuzz


@dataclass
class _Statement:
    node: ast.stmt
    binds: tuple[str, ...]


class _Module:
    """One module's top-level statements, by the names they bind, and where its imports come from."""

    def __init__(self, name: str):
        spec = importlib.util.find_spec(name)
        self.name, self.source = name, importlib.util.decode_source(Path(spec.origin).read_bytes())
        self.lines = self.source.splitlines()
        self.ours: dict[str, tuple[str, str]] = {}  # bound name -> (module of ours, its name there)
        self.external: dict[str, list[str]] = {}  # bound name -> the import statements that bind it
        self.defined: dict[str, _Statement] = {}
        for node in ast.parse(self.source).body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self._import(node)
            elif binds := _bound(node):
                statement = _Statement(node, binds)
                self.defined.update(dict.fromkeys(binds, statement))

    def keeps_all(self, node: ast.ClassDef) -> bool:
        """A class with a base from outside gdn-fuzz (argparse's parser, the import system's finder, Exception) keeps
        every method: that base may call any of them."""
        for base in node.bases:
            root = base
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id not in self.defined and root.id not in self.ours:
                return True
        return False

    def _import(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.partition(".")[0]
                if is_ours(alias.name):
                    raise ShakeError(f"{self.name}: `import {alias.name}` of a gdn-fuzz module cannot be shaken")
                statement = f"import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
                self.external.setdefault(bound, []).append(statement)
            return
        module = node.module or ""
        if node.level:
            package = self.name.rpartition(".")[0]
            module = importlib.util.resolve_name("." * node.level + module, package)
        if module == "__future__":
            return
        for alias in node.names:
            bound = alias.asname or alias.name
            if is_ours(module):
                if alias.asname and alias.asname != alias.name:
                    raise ShakeError(f"{self.name}: `from {module} import {alias.name} as {alias.asname}`")
                self.ours[bound] = (module, alias.name)
            else:
                statement = f"from {module} import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
                self.external.setdefault(bound, []).append(statement)

    def text(self, statement: _Statement, attributes: set[str], docstrings: bool) -> str:
        """The statement's lines (a class's kept members only), with the comment lines right above it; without its
        docstrings unless `docstrings`."""
        node = statement.node
        drop = set() if docstrings else _docstring_lines(node)
        if not isinstance(node, ast.ClassDef):
            return self._lines(_start(node, self.lines), node.end_lineno, drop)
        pieces = [self._lines(_start(node, self.lines), _first_line(node.body[0]) - 1, drop)]
        for member in (m for m in node.body if self.keeps_all(node) or _keeps(m, attributes)):
            start = _start(member, self.lines)
            text = self._lines(start, member.end_lineno, drop)
            if text:
                spaced = pieces[-1] and start > 1 and not self.lines[start - 2].strip()
                pieces.append(("\n" if spaced else "") + text)
        return "\n".join(p for p in pieces if p)

    def _lines(self, first: int, last: int, drop: set[int]) -> str:
        return "\n".join(self.lines[n - 1] for n in range(first, last + 1) if n not in drop)


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _first_line(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", None)
    return decorators[0].lineno if decorators else node.lineno


def without_docstrings(source: str) -> str:
    """`source` without the docstrings of its functions and classes (their lines dropped, the rest as it is)."""
    drop = set()
    for node in ast.parse(source).body:
        drop |= _docstring_lines(node)
    return "\n".join(line for n, line in enumerate(source.splitlines(), 1) if n not in drop)


def plain(source: str) -> str:
    """`source` as the same code without comments and without the annotations of functions (ast.unparse): what the
    script's plumbing is written as, smaller. A class's fields keep theirs (a dataclass reads them)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, _FUNCTIONS):
            node.returns = None
            arguments = node.args
            for arg in [
                *arguments.posonlyargs,
                *arguments.args,
                *arguments.kwonlyargs,
                arguments.vararg,
                arguments.kwarg,
            ]:
                if arg is not None:
                    arg.annotation = None
    return "\n".join(wrapped(line) for line in ast.unparse(tree).splitlines())


def wrapped(line: str, width: int = WIDTH) -> str:
    """A line longer than `width` broken after commas inside brackets (where Python joins lines by itself), its
    continuations indented 8 more; a line with nowhere to break stays as it is."""
    if len(line) <= width:
        return line
    indent = " " * (len(line) - len(line.lstrip()) + 8)
    depth, breaks = 0, []  # columns just after a comma inside brackets
    for token in tokenize.generate_tokens(io.StringIO(line).readline):
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        elif token.type == tokenize.OP and token.string == "," and depth:
            breaks.append(token.end[1])
    pieces, start, last = [], 0, 0
    for column in [*breaks, len(line)]:
        if column - start + (len(indent) if pieces else 0) > width and last > start:
            pieces.append(line[start:last].rstrip())
            start = last
        last = column
    if not pieces:
        return line
    pieces.append(line[start:])
    return pieces[0] + "".join(f"\n{indent}{piece.strip()}" for piece in pieces[1:])


def _start(node: ast.stmt, lines: list[str]) -> int:
    """The first line of a statement with its decorators and the comment lines right above it."""
    first = _first_line(node)
    while first > 1 and lines[first - 2].lstrip().startswith("#"):
        first -= 1
    return first


def _docstring_lines(node: ast.stmt) -> set[int]:
    """The lines of the docstrings in a statement (a function's or class's body that is only one keeps it)."""
    lines = set()
    for sub in ast.walk(node):
        body = getattr(sub, "body", None)
        if isinstance(sub, (*_FUNCTIONS, ast.ClassDef)) and len(body) > 1 and _is_docstring(body[0]):
            lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    return lines


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _bound(node: ast.stmt) -> tuple[str, ...]:
    """The names a top-level statement binds (definitions and assignments; imports are handled apart)."""
    if isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
        return (node.name,)
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    names = []
    for target in targets:
        for sub in ast.walk(target):
            if isinstance(sub, ast.Name):
                names.append(sub.id)
    return tuple(name for name in names if name != "__all__")


def _is_definition(statement: _Statement) -> bool:
    return isinstance(statement.node, (*_FUNCTIONS, ast.ClassDef))


def _keeps(member: ast.stmt, attributes: set[str]) -> bool:
    """A class member a script keeps: any field or class attribute, the docstring, a dunder, a used method."""
    if isinstance(member, _FUNCTIONS):
        return (member.name.startswith("__") and member.name.endswith("__")) or member.name in attributes
    return True


def _reads(node: ast.AST, attributes: set[str], keeps_all: Callable[[ast.ClassDef], bool]) -> tuple[set, set]:
    """(names read, attribute names read) in `node`, annotations left out (the script never evaluates them); a
    class's methods count only where they are kept (`attributes`, `keeps_all`)."""
    names, attrs = set(), set()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, ast.ClassDef):
            children = [*current.decorator_list, *current.bases, *current.keywords]
            children += [m for m in current.body if keeps_all(current) or _keeps(m, attributes)]
            stack.extend(children)
            continue
        if isinstance(current, ast.AnnAssign):
            stack.extend(x for x in (current.target, current.value) if x is not None)
            continue
        if isinstance(current, ast.arg):
            continue  # its annotation
        if isinstance(current, _FUNCTIONS):
            stack.extend([*current.decorator_list, *current.args.defaults, *current.args.kw_defaults, *current.body])
            stack = [x for x in stack if x is not None]
            continue
        if isinstance(current, ast.Name):
            names.add(current.id)
        elif isinstance(current, ast.Attribute):
            attrs.add(current.attr)
        stack.extend(ast.iter_child_nodes(current))
    return names, attrs


def shake(
    roots: Iterable[tuple[str, str]], attributes: Iterable[str] = (), docstrings: Callable[[str], bool] = bool
) -> Shaken:
    """The statements that define `roots` ((module, name) pairs) and everything they read (module doc);
    `docstrings(module)` says whether that module's statements keep theirs (default: all do)."""
    modules: dict[str, _Module] = {}
    attrs = set(attributes)
    kept: dict[tuple[str, int], _Statement] = {}
    imports: dict[str, str] = {}  # statement -> the name it binds
    depends: dict[str, set[str]] = {}  # module -> the modules of ours its kept statements read from

    def module(name: str) -> _Module:
        if name not in modules:
            modules[name] = _Module(name)
            depends.setdefault(name, set())
        return modules[name]

    def resolve(where: str, name: str) -> None:
        """Keep what `name` means in module `where` (a definition, an import of ours, an outside import)."""
        m = module(where)
        if name in m.defined:
            statement = m.defined[name]
            key = (where, statement.node.lineno)
            if key not in kept:
                kept[key] = statement
                pending.append(key)
        elif name in m.ours:
            source, original = m.ours[name]
            depends[where].add(source)
            resolve(source, original)
        elif name in m.external:
            for statement in m.external[name]:
                other = next((s for s, b in imports.items() if b == name and s != statement), None)
                if other is not None and (other.startswith("from ") or statement.startswith("from ")):
                    raise ShakeError(f"{name}: imported by {other!r} and by {statement!r}")
                imports[statement] = name

    pending: list[tuple[str, int]] = []
    for where, name in roots:
        resolve(where, name)
        if not any(name in names for names in (module(where).defined, module(where).ours, module(where).external)):
            raise ShakeError(f"{where} defines no {name}")
    seen_attrs: set[str] = set()
    while pending or attrs - seen_attrs:
        if not pending:  # new attribute names keep more methods: read every kept class again
            seen_attrs = set(attrs)
            pending = [key for key, s in kept.items() if isinstance(s.node, ast.ClassDef)]
            continue
        where, line = pending.pop()
        names, read_attrs = _reads(kept[(where, line)].node, attrs, module(where).keeps_all)
        attrs |= read_attrs
        for name in sorted(names):
            resolve(where, name)
    return Shaken(
        _parts(modules, kept, depends, attrs, docstrings),
        tuple(sorted(imports, key=lambda s: (s.startswith("from"), s))),
    )


def _parts(modules: dict, kept: dict, depends: dict, attrs: set[str], docstrings) -> tuple[Part, ...]:
    """The kept statements as Parts, each module after those it reads from (the import graph of ours is acyclic)."""
    order: list[str] = []

    def visit(name: str) -> None:
        if name in order:
            return
        for other in sorted(depends[name]):
            visit(other)
        order.append(name)

    for name in sorted(modules):
        visit(name)
    owner: dict[str, str] = {}
    parts = []
    for name in order:
        statements = sorted(((line, s) for (m, line), s in kept.items() if m == name), key=lambda item: item[0])
        if not statements:
            continue
        bound = [b for _, s in statements for b in s.binds]
        for b in bound:
            if owner.setdefault(b, name) != name:
                raise ShakeError(f"{b} is defined by both {owner[b]} and {name}: they cannot share one namespace")
        text = ""
        for n, (_, s) in enumerate(statements):
            spaced = n and (_is_definition(s) or _is_definition(statements[n - 1][1]))
            text += ("\n\n\n" if spaced else "\n" if n else "") + modules[name].text(s, attrs, docstrings(name))
        parts.append(Part(name, path_of(name), tuple(bound), text + "\n"))
    return tuple(parts)


def flattened(module: str, names: Iterable[str]) -> str:
    """One module's text that defines `names` as `module` does, with what they read from gdn-fuzz's modules shaken
    into it (plain, one namespace): what a script carries of an override module the library's own code imports by
    name (the FlashInfer stand-in SGLang's glue calls), instead of that module's whole closure."""
    shaken = shake([(module, name) for name in names], docstrings=lambda m: False)
    head = "\n".join(["from __future__ import annotations", "", *shaken.imports])
    return "\n\n\n".join([head, *(plain(part.text) for part in shaken.parts)]) + "\n"
