"""Export a case as one standalone reproduction script: it needs torch, packaging and the target library, no gdn-fuzz.

The script is generated from the fuzzer's own sources, so it cannot drift from them: it carries, verbatim, the
modules that fuzz.run.harness.check runs for the chosen target (fuzz.export.embed picks them: the Case, the value
generator and materialize, the adapter, whose call() is the kernel call, its base and semantics rows, reference/,
the judge, the harness) and fuzz.export.runner's code, which installs them under their own names and runs the
check. Its top is for the upstream maintainer: what the case is, what was expected, how to run it, where it was
found.

    gdn-fuzz export corpus/sglang-recurrent-decode-StateMismatch-0.json -o repro.py --issue issue.md
    gdn-fuzz export 'decode-B1-T1-...' --target flashinfer-bf16 --module fuzz.standins.flashinfer_cpu -o r.py
"""
from __future__ import annotations

import ast
import importlib
import importlib.metadata
import inspect
import textwrap

from fuzz.case import Case
from fuzz.export import describe, embed, runner
from fuzz.run import corpus
from fuzz.run.environment import environment
from fuzz.targets.base import Target
from fuzz.targets.registry import TARGETS
from fuzz.targets.triton_common import TritonTarget

WIDTH = 116


def target_named(name: str) -> Target:
    target = {t.name: t for t in TARGETS}.get(name)
    if target is None:
        raise ValueError(f"unknown target {name!r}; expected one of {sorted(t.name for t in TARGETS)}")
    return target


def adapter_of(target: Target) -> str:
    """The module whose TARGETS holds the target: the one the script imports it from."""
    module = type(target).__module__
    if target not in importlib.import_module(module).TARGETS:
        raise ValueError(f"{target.name}: its class's module {module} does not list it in TARGETS")
    return module


def export_script(case: Case, target_name: str, *, library_module: str | None = None,
                  entry: corpus.Entry | None = None, note: str = "", env: dict | None = None,
                  name: str = "repro.py") -> str:
    """The reproduction script for `case` on `target_name`. `library_module` ('module.path[:attr]') is loaded instead
    of the library, as --gdn-target does (embedded when it is one of gdn-fuzz's: a stand-in, a mutant); `entry` is
    the corpus entry the case comes from (its expectation goes on top, with `note`); `env` is where it was found
    (default: the entry's environment, else this one); `name` is the file's, for the commands on top."""
    module = library_module
    target = target_named(target_name)
    adapter = adapter_of(target)
    override_module = (module or "").partition(":")[0]
    roots = [*embed.CHECK, adapter, *([override_module] if module and embed.is_ours(override_module) else [])]
    sources = embed.closure(roots)
    env = env or (entry.environment if entry and entry.environment else environment())
    found = "found on" if entry and entry.environment else "exported on"
    text = _docstring(case, target, module, entry, note, env, found, sources, name)
    settings = (f"CASE = {repr(case)!r}\nTARGET = {target.name!r}\n"
                f"ADAPTER = {adapter!r}  # embedded below: its call() is the kernel call\n"
                f"OVERRIDE = {module!r}  # loaded instead of the library when set (--gdn-target)\n")
    modules = "".join(f"    # ==== {embed.path_of(m)} {'=' * (WIDTH - 12 - len(embed.path_of(m)))}\n"
                      f"    {m!r}: {embed.literal(source)},\n" for m, source in sources.items())
    return (f"{text}\n{settings}\n{_runner_code()}\n\n"
            f"# gdn-fuzz {_version()}: the modules the check runs, verbatim, in import order\n"
            f"SOURCES = {{\n{modules}}}\n\n"
            'if __name__ == "__main__":\n    sys.exit(main(CASE, TARGET, ADAPTER, OVERRIDE, SOURCES))\n')


def _docstring(case, target, module, entry, note, env, found, sources, name) -> str:
    sem = describe.contract_row(target, entry, env)
    lines = textwrap.wrap(f"Reproduction of a gdn-fuzz case on {target.name} ({target.path}): "
                          f"{describe.call(target, module)}.", WIDTH) + ["", f"    {case!r}", ""]
    lines += _field("Expected", _expected(target, entry)) + (_field("Note", note) if note else [])
    lines += _field("Contract", describe.contract(target, sem, case))
    lines += ["", "The case:"] + [f"    {what:<13}{words}" for what, words in describe.case_lines(case)] + [""]
    interpreted = " (Triton kernels then run under TRITON_INTERPRET=1)" if isinstance(target, TritonTarget) else ""
    lines += _field("Run", f"python {name} [--device cpu|cuda] [--dump tensors.pt]: cuda where a GPU is there, else "
                    f"cpu{interpreted}. The last line and exit status: 'REPRODUCED: <kind>: <detail>' 1, 'NOT "
                    "REPRODUCED' 0, 'NOT RUN: <why>' 2 ('NOT RUN: the library did not load' when it fails to import).")
    lines += _field("Needs", f"Python >= 3.11, torch, packaging; {_library(target, module, entry, env)}. No gdn-fuzz: "
                    f"the {len(sources)} modules "
                    f"its check runs ({sum(s.count(chr(10)) for s in sources.values())} lines) are embedded below, "
                    "verbatim, and imported under their own names.")
    lines += ["", f"Environment {found}:"] + [f"    {key:<20}{value}" for key, value in env.items() if value]
    body = "\n".join(lines).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return f'"""{body}\n"""'


def _library(target, module, entry, env) -> str:
    if module is None:
        return f"the library: {describe.install_command(target, describe.release_of(target, entry, env))}"
    if embed.is_ours(module.partition(":")[0]):
        return f"the override module {module}, embedded below, stands in for the library"
    return f"the override module {module}, importable"


def _field(name: str, text: str) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=f"{name + ':':<10}", subsequent_indent=" " * 10) or [name + ":"]


def _expected(target, entry) -> str:
    if entry is None:
        return "nothing recorded (exported from a coordinate): the fuzzer's verdict is what this script prints."
    where = f"{describe.distribution(target)} {entry.versions}" if str(entry.versions) else "every release"
    other = f", recorded for {entry.target}" if entry.target != target.name else ""
    return f"{entry.expect} on {where} (corpus entry {entry.path.name}{other}): {entry.description}"


def _runner_code() -> str:
    """fuzz/export/runner.py without its module docstring (the script has its own)."""
    source = inspect.getsource(runner)
    first = ast.parse(source).body[1]  # body[0]: the docstring
    return "\n".join(source.splitlines()[first.lineno - 1:]).rstrip() + "\n"


def _version() -> str:
    try:
        return importlib.metadata.version("gdn-fuzz")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"
