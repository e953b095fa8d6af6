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

from fuzz.export import describe, embed, recording, runner
from fuzz.model.case import Case
from fuzz.run import corpus
from fuzz.run.environment import environment
from fuzz.targets.base import Target
from fuzz.targets.registry import TARGETS
from fuzz.targets.triton_common import TritonTarget

WIDTH = 116
MARKER = (
    "# " + "=" * 24 + " everything below is gdn-fuzz's own code, embedded verbatim; you need not read it " + "=" * 8
)


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


def export_script(
    case: Case,
    target_name: str,
    *,
    library_module: str | None = None,
    entry: corpus.Entry | None = None,
    note: str = "",
    env: dict | None = None,
    name: str = "repro.py",
    recorded: recording.Recording | None = None,
) -> str:
    """The reproduction script for `case` on `target_name`. `library_module` ('module.path[:attr]') is loaded instead
    of the library, as --gdn-target does (embedded when it is one of gdn-fuzz's: a stand-in, a mutant); `entry` is
    the corpus entry the case comes from (its expectation goes on top, with `note`); `env` is where it was found
    (default: the entry's environment, else this one); `name` is the file's, for the commands on top; `recorded` the
    library call the adapter makes (fuzz.export.recording.record, run here when not given)."""
    module = library_module
    target = target_named(target_name)
    adapter = adapter_of(target)
    recorded = recorded or recording.record(target, case, module)
    override_module = (module or "").partition(":")[0]
    roots = [*embed.CHECK, adapter, *([override_module] if module and embed.is_ours(override_module) else [])]
    sources = embed.closure(roots)
    env = env or (entry.environment if entry and entry.environment else environment())
    found = "found on" if entry and entry.environment else "exported on"
    settings = (
        f"CASE = {repr(case)!r}\nTARGET = {target.name!r}\n"
        f"ADAPTER = {adapter!r}  # embedded below: its call() is the call shown above\n"
        f"OVERRIDE = {module!r}  # loaded instead of the library when set (--gdn-target)\n"
    )
    modules = "".join(
        f"    # ==== {embed.path_of(m)} {'=' * (WIDTH - 12 - len(embed.path_of(m)))}\n"
        f"    {m!r}: {embed.literal(source)},\n"
        for m, source in sources.items()
    )
    return (
        f"{_docstring(case, target, module, entry, note, name, recorded)}\n"
        f"{_comments(_call_section(recorded, adapter))}\n"
        f"{_comments(_details(case, target, module, entry, env, found, sources))}\n{settings}\n{MARKER}\n\n"
        f"{_runner_code()}\n\n# gdn-fuzz {_version()}: the modules the check runs, verbatim, in import order\n"
        f"SOURCES = {{\n{modules}}}\n\n"
        'if __name__ == "__main__":\n    sys.exit(main(CASE, TARGET, ADAPTER, OVERRIDE, SOURCES))\n'
    )


def _docstring(case, target, module, entry, note, name, recorded) -> str:
    function = recorded.call.function if recorded.call else describe.call(target, module)
    lines = textwrap.wrap(f"Reproduction of a gdn-fuzz case on {target.name} ({target.path}): {function}.", WIDTH)
    lines += ["", f"    {case!r}", ""]
    lines += _field("Expected", _expected(target, entry)) + (_field("Note", note) if note else [])
    interpreted = " (Triton kernels then run under TRITON_INTERPRET=1)" if isinstance(target, TritonTarget) else ""
    lines += _field(
        "Run",
        f"python {name} [--device cpu|cuda] [--dump tensors.pt]: cuda where a GPU is there, else "
        f"cpu{interpreted}. The last line and exit status: 'REPRODUCED: <kind>: <detail>' 1, 'NOT "
        "REPRODUCED' 0, 'NOT RUN: <why>' 2 ('NOT RUN: the library did not load' when it fails to import).",
    )
    body = "\n".join(lines).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return f'"""{body}\n"""'


def _call_section(recorded: recording.Recording, adapter: str) -> list[str]:
    """The library call the embedded adapter makes, as recorded at export, with what its tensors are."""
    head = [_rule("The library call under test")]
    where = embed.path_of(adapter)
    if recorded.call is None:
        return head + _field(
            "Not shown",
            f"the adapter ({where}) made no library call at export against {recorded.against}: {recorded.why}",
        )
    head += textwrap.wrap(
        f"What gdn-fuzz's adapter ({where}, embedded below) passes, recorded at export against {recorded.against}; "
        "strides and storage offsets in elements. Every tensor is built from the case's seed by gdn-fuzz's value "
        "generator (the same bits on any device; --dump saves them). The writable buffers are views into larger "
        "allocations whose surplus holds a NaN guard pattern (any write outside the view changes it), hence their "
        "storage offsets. The script prints the call again as it makes it, after the check.",
        WIDTH - 2,
    )
    return head + [""] + [f"    {line}" for line in recorded.call.lines()]


def _details(case, target, module, entry, env, found, sources) -> list[str]:
    """What the check holds the call to, the case in words, what the script needs, where the case was found."""
    sem = describe.contract_row(target, entry, env)
    lines = [_rule("What the check holds it to")] + _field("Contract", describe.contract(target, sem, case))
    lines += ["", "The case:"] + [f"    {what:<13}{words}" for what, words in describe.case_lines(case)] + [""]
    lines += _field(
        "Needs",
        f"Python >= 3.11, torch, packaging; {_library(target, module, entry, env)}. No gdn-fuzz: "
        f"the {len(sources)} modules "
        f"its check runs ({sum(s.count(chr(10)) for s in sources.values())} lines) are embedded below, "
        "verbatim, and imported under their own names.",
    )
    return lines + ["", f"Environment {found}:"] + [f"    {key:<20}{value}" for key, value in env.items() if value]


def _comments(lines: list[str]) -> str:
    return "".join(f"# {line}".rstrip() + "\n" for line in lines)


def _rule(title: str) -> str:
    return f"---- {title} " + "-" * (WIDTH - 8 - len(title))


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
    return "\n".join(source.splitlines()[first.lineno - 1 :]).rstrip() + "\n"


def _version() -> str:
    try:
        return importlib.metadata.version("gdn-fuzz")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"
