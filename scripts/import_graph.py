"""The import graph of reference/ and fuzz/, by stage, as the README's "How a case flows" shows it.

    python scripts/import_graph.py            # print the section's graph block
    python scripts/import_graph.py --check    # exit 1 when README.md's block is not what the code gives

Every `import` and `from ... import` counts, at module level or inside a function (a lazy import is still a
dependency). A module belongs to the first stage whose prefix it has; the stages run from the ground floor up. An
import from an earlier stage into a later one runs back up; a cycle is a set of modules that import each other.
tests/, scripts/, bench/ and the pytest suites (fuzz/test_*.py, fuzz/conftest.py) are users of the graph, not in it.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGES = (
    "reference",
    "fuzz.model",
    "fuzz.generate",
    "fuzz.targets",
    "fuzz.standins",
    "fuzz.judge",
    "fuzz.run",
    "fuzz.export",
    "fuzz.suite",
    "fuzz.cli",
)
BEGIN, END = "<!-- import graph: python scripts/import_graph.py -->", "<!-- end of import graph -->"


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted((*ROOT.glob("reference/**/*.py"), *ROOT.glob("fuzz/**/*.py"))):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        if stage(name) is not None:
            found[name] = path
    return found


def stage(module: str) -> int | None:
    return next((i for i, s in enumerate(STAGES) if module == s or module.startswith(s + ".")), None)


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of the graph that `name` imports (a `from package import module` names the module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected sets of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def render() -> str:
    found = modules()
    graph = {name: imports(name, path, set(found)) for name, path in found.items()}
    edges = defaultdict(int)
    back = []
    for name, targets in graph.items():
        for target in targets:
            a, b = stage(name), stage(target)
            if a != b:
                edges[(STAGES[a], STAGES[b])] += 1
            if b > a:
                back.append(f"{name} -> {target}")
    lines = [f"stages, ground floor first: {' < '.join(STAGES)}", "imports between stages (modules that import):"]
    for s in STAGES:
        row = [f"{b} {n}" for (a, b), n in sorted(edges.items(), key=lambda e: STAGES.index(e[0][1])) if a == s]
        lines.append(f"  {s} -> {', '.join(row) if row else 'nothing'}")
    lines.append(f"imports that run back up ({len(back)}):" + ("" if back else " none"))
    lines += [f"  {edge}" for edge in sorted(back)]
    found_cycles = cycles(graph)
    lines.append(f"import cycles ({len(found_cycles)}):" + ("" if found_cycles else " none"))
    lines += [f"  {' <-> '.join(group)}" for group in found_cycles]
    return "\n".join(lines)


def block() -> str:
    return f"{BEGIN}\n```text\n{render()}\n```\n{END}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with README.md's block; exit 1 when it differs")
    args = parser.parse_args(argv)
    if not args.check:
        print(block())
        return 0
    readme = (ROOT / "README.md").read_text()
    start, end = readme.find(BEGIN), readme.find(END)
    if start < 0 or end < 0:
        print(
            "README.md has no import graph block: paste the output of python scripts/import_graph.py", file=sys.stderr
        )
        return 1
    if readme[start : end + len(END)] != block():
        print(
            "README.md's import graph is stale: replace its block with the output of python scripts/import_graph.py",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
