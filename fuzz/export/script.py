"""Export a case as one standalone reproduction script, written for the library's maintainer; it needs torch and the
library, no gdn-fuzz.

Its first screen is the reproduction: a docstring saying what the finding is and how to run it, then `main`
(fuzz.export.top): the case's tensors in a few named lines, the library call as the library's docs write it, the
float64 reference and the verdict. Below a marker comes what `main` calls, smallest first: the helpers
(fuzz.export.standalone: the command line, the one-line outcomes, the judgment), then, verbatim, the statements of
gdn-fuzz's modules they need (fuzz.export.shake: the value generator and materialize, the oracle reference.ops with
its helpers, the tolerance rule's numbers, a loader where the library's files need one), then what this finding is
(REPRO). Docstrings of embedded statements are left out (their code is the file's); an override module of gdn-fuzz's
own (a stand-in, a mutant) is carried whole, imported under its own name; a stand-in the library's own code imports
(snippet.embeds: FlashInfer's under SGLang's glue) only as far as its __all__ needs (fuzz.export.shake.flattened).

    gdn-fuzz export corpus/sglang-recurrent-decode-StateMismatch-0.json -o repro.py --issue issue.md
    gdn-fuzz export 'decode-B1-T1-...' --target flashinfer-bf16 --module fuzz.standins.flashinfer_cpu -o r.py
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import sys
import textwrap
from dataclasses import dataclass

import torch

from fuzz.export import describe, embed, recording, release, shake, snippets, standalone
from fuzz.export.top import Top, top
from fuzz.judge.tolerance import tolerance
from fuzz.model.case import DTYPE_NAMES, TORCH_DTYPES, Case
from fuzz.model.known_bugs import BY_ID
from fuzz.run import corpus
from fuzz.targets.base import Target
from fuzz.targets.contract import contract_for
from fuzz.targets.registry import target_named
from fuzz.targets.triton_common import TritonTarget

WIDTH = 116
# what REPRO may name beyond the helpers': the oracle of the case's op, FlashInfer's device phrasings, the override hook
EXTRA = (
    ("reference.ops", "verify"),
    ("reference.ops", "prefill"),
    ("fuzz.targets.unsupported", "unsupported_here"),
    ("fuzz.export.embedded", "EmbeddedModules"),
    ("fuzz.judge.tolerance", "Tol"),
)
MARKER = (
    "# " + "=" * 12 + " below: what main() calls, and the gdn-fuzz code it needs, as it runs (no docstrings) " + "=" * 5
)
NotExportable = snippets.NotExportable
# torch, imported where a missing one is the one NOT RUN line; the libraries' warnings off unless python -W asks
TORCH = """import warnings

if not sys.warnoptions:  # the libraries' warnings (python -W default shows them): the outcome is one line
    warnings.simplefilter("ignore")
try:
    import torch
except ImportError as error:
    sys.exit(not_run(missing(REQUIRES, error)))"""


@dataclass(frozen=True)
class Export:
    """A script and what its issue body tells about it."""

    text: str
    target: Target
    release: str | None  # the library release the finding is about (None: an override, or a range only)
    requirement: str  # the pip requirement of that release ('flashinfer-python==0.7.2.post1')
    recorded: recording.Recording
    title: str  # what the finding is, one line, in the library's words
    gpu: tuple[int, ...]  # the compute capability majors the library needs (empty: a CPU too)
    names: dict[str, str]  # "pool" / "inter" / "output" -> the keyword the call passes it as


def export(
    case: Case,
    target_name: str | Target,
    *,
    library_module: str | None = None,
    entry: corpus.Entry | None = None,
    note: str = "",
    name: str = "repro.py",
) -> Export:
    """The reproduction script for `case` on `target_name` (a registry name, or a Target) (module doc).
    `library_module` ('module.path[:attr]') is called instead of the library, as --gdn-target does (carried in the
    script when it is one of gdn-fuzz's); `entry` is the corpus entry the case comes from (its expectation and release
    range); `note` goes on top."""
    target = target_name if isinstance(target_name, Target) else target_named(target_name)
    pinned = None if library_module else release.pinned(target, entry)
    recorded = recording.record(target, case, library_module, pinned)
    if recorded.call is None:
        raise NotExportable(f"{target.name}: no library call to write ({recorded.against}: {recorded.why})")
    snippet = snippets.snippet(target, case)
    written = top(case, recorded.call, recorded.tensors, snippet, library_module)
    sources = _sources(library_module) | {m: shake.flattened(m, _public(m)) for m in snippet.embeds}
    gpu = _gpu(target, pinned, library_module)
    requirement = "" if library_module else release.requirement(target, pinned, entry)
    title = _title(target, recorded, pinned, entry, case)
    repro = _repro(case, target, recorded, written, sources, gpu, library_module)
    hook = (
        ["sys.meta_path.insert(0, EmbeddedModules(SOURCES, __file__))  # gdn-fuzz's modules, below"] if sources else []
    )
    main = [
        "def main(argv: list[str] | None = None) -> int:",
        "    run = start(REPRO, argv)  # --device cpu|cuda (default: cuda where torch sees one)",
        "    with needs(run):  # a missing package: one NOT RUN line with its pip install",
        *(f"        {line}" for line in hook + written.imports),
        *(f"    {line}".rstrip() for line in written.lines),
    ]
    shaken = shake.shake(_roots(main, repro, written), _attributes(main), docstrings=lambda m: False)
    repro = repro.replace("    third_party=(),", f"    third_party={_third_party(shaken)!r},")
    note = " ".join(filter(None, (snippet.note, note)))
    text = "\n".join(
        [
            _docstring(title, target, entry, note, name, requirement, gpu, library_module),
            "from __future__ import annotations",
            "",
            "import sys",
            "",
            "",
            *main,
            "",
            "",
            MARKER,
            _below(shaken, _pretty(release.requires(target, pinned)), repro),
            'if __name__ == "__main__":',
            "    try:",
            "        sys.exit(main())",
            "    except Exception as error:  # noqa: BLE001 - a defect of this script's, never a finding: exit 2",
            '        sys.exit(not_run(f"the script itself failed: {type(error).__name__}: {error}"))',
            "",
        ]
    )
    return Export(text, target, pinned, requirement, recorded, title, gpu, written.names)


def export_script(
    case: Case,
    target_name: str,
    *,
    library_module: str | None = None,
    entry: corpus.Entry | None = None,
    note: str = "",
    name: str = "repro.py",
) -> str:
    """export()'s script text (what gdn-fuzz gate writes for its new and fixed failures)."""
    return export(case, target_name, library_module=library_module, entry=entry, note=note, name=name).text


def _sources(library_module: str | None) -> dict[str, str]:
    """gdn-fuzz's modules an override of its own needs (fuzz.export.embed), carried whole."""
    module = (library_module or "").partition(":")[0]
    return embed.closure([module]) if module and embed.is_ours(module) else {}


def _public(module: str) -> list[str]:
    """What the library's code may import from an embedded stand-in: its __all__."""
    return list(importlib.import_module(module).__all__)


def _gpu(target: Target, pinned: str | None, library_module: str | None) -> tuple[int, ...]:
    """The compute capability majors the library needs: its release's contract row, else the adapter's Support; none
    for an override module (a CPU stand-in runs anywhere)."""
    if library_module:
        return ()
    row = contract_for(target.contracts, target.path, pinned)
    return tuple(row.arch) if row is not None else tuple(target.support.arch)


def _title(target: Target, recorded, pinned: str | None, entry: corpus.Entry | None, case: Case) -> str:
    """'<library> <release>: <function>: <what happens>' (the known bug's root cause, or the entry's description's
    first clause, or the case in words)."""
    function = recorded.call.function.rpartition(".")[2]
    where = f"{release.distribution(target)} {pinned or (entry.versions if entry else '') or ''}".strip()
    bug = BY_ID.get(entry.bug) if entry is not None and entry.bug else None
    if bug is not None:
        what = bug.root_cause.rstrip(".")
    elif entry is not None and entry.expect != "pass":
        what = _clause(entry.description, function)
    else:
        what = f"{case.op}, B={case.B}, T={case.T}, H={case.H}, HV={case.HV}, K={case.K}, V={case.V}"
    return f"{where}: {function}: {what}"


def _clause(text: str, function: str) -> str:
    """A description's first clause, without the function name it may open with and what follows a '; '."""
    text = text.removeprefix(f"{function}: ")
    return text.split("; ")[0].split(" (")[0].strip()


def _names(code: str) -> set[str]:
    return {node.id for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Name)}


def _roots(main: list[str], repro: str, written: Top) -> list[tuple[str, str]]:
    """What the script calls from gdn-fuzz: the helpers main and REPRO name (fuzz.export.standalone's own, or what
    it imports), the oracle, device check or override hook REPRO names, and the top's loader and helpers."""
    names = _names("\n".join(main) + "\n" + repro)
    helpers = {n for n in names if hasattr(standalone, n) and not n.startswith("__")}
    extra = [(m, n) for m, n in EXTRA if n in names]
    return [(standalone.__name__, n) for n in sorted(helpers)] + extra + list(written.roots)


def _attributes(main: list[str]) -> set[str]:
    """Attribute names main reads: the methods of embedded classes it keeps, with those the embedded code reads."""
    return {node.attr for node in ast.walk(ast.parse("\n".join(main))) if isinstance(node, ast.Attribute)}


def _below(shaken: shake.Shaken, requires: str, repro: str) -> str:
    """Below the marker: the standard library imports, the helpers (fuzz.export.standalone), torch (one NOT RUN line
    where it is missing), gdn-fuzz's embedded statements, REPRO."""
    stdlib = [line for line in shaken.imports if _module_of(line) in sys.stdlib_module_names]
    helpers = [p for p in shaken.parts if p.module == standalone.__name__]
    parts = ["\n".join(stdlib)] + [p.text.rstrip() for p in helpers]
    parts += [
        f"REQUIRES = {requires}  # a missing package's pip line",
        TORCH,
    ]
    for part in shaken.parts:
        if part.module != standalone.__name__:
            parts.append(f"# ---- {part.path}\n{shake.plain(part.text).rstrip()}")
    parts.append(repro)
    return "\n\n\n".join(parts) + "\n\n"


def _module_of(statement: str) -> str:
    return statement.split()[1].partition(".")[0]


def _third_party(shaken: shake.Shaken) -> tuple[tuple[str, str, str | None], ...]:
    """The embedded statements' imports beyond the standard library and torch: imported by `needs` (name, module,
    attribute), after --device has set TRITON_INTERPRET."""
    out = []
    for line in shaken.imports:
        if _module_of(line) in sys.stdlib_module_names or _module_of(line) == "torch":
            continue
        words = line.split()
        if words[0] == "import":
            module = words[1]
            out.append((words[3], module, None) if len(words) > 3 else (module.partition(".")[0], module, None))
        else:
            out.append((words[5] if len(words) > 5 else words[3], words[1], words[3]))
    return tuple(dict.fromkeys(out))


def _repro(case, target, recorded, written: Top, sources, gpu, library_module) -> str:
    """REPRO (and SOURCES, an override's modules), as code: what this finding is, for the helpers above it."""
    sem = recorded.semantics
    fields = {f.name: getattr(case, f.name) for f in dataclasses.fields(case) if f.name != "output_given"}
    fields |= dict(B=case.B, padded=case.padded, tokens=case.tokens)
    lines = [
        "REPRO = SimpleNamespace(  # what this finding is, for the helpers above",
        f"    case=SimpleNamespace(  # {case!r}",
    ]
    words = ", ".join(f"{k}={v!r}" for k, v in fields.items())
    lines += textwrap.wrap(words, WIDTH - 8, initial_indent=" " * 8, subsequent_indent=" " * 8) + ["    ),"]
    library = "" if library_module else release.distribution(target)
    lines += [f"    function={recorded.call.function!r},", f"    library={library!r},", "    requires=REQUIRES,"]
    triton = isinstance(target, TritonTarget) and not library_module
    lines += [
        f"    gpu={gpu!r},",
        f"    triton={triton!r},",
        "    third_party=(),",
        f"    offset_bits={recorded.offset_bits},",
    ]
    if case.valid:
        model = dataclasses.replace(sem.precision(case), bf16_truncates=False)
        lines += [f"    pad={sem.pad!r},", f"    scratch={sem.scratch_slots!r},", f"    gates={sem.gates!r},"]
        lines += [f"    model={_precision(model)},"]
        lines += [f"    output_dtype={sem.output_dtype(case)!r},", f"    names={written.names!r},"]
        lines += [f"    oracle={'prefill' if case.op == 'prefill' else 'verify'},"]
        checks = ["check_output", "check_pool"] + (["check_inter"] if case.inter_rows else [])
        lines += [
            f"    checks=({', '.join(checks)}),",
            "    tolerances={  # fuzz/judge/tolerance.py's rows",
        ]
        out, given = sem.output_dtype(case), TORCH_DTYPES[case.input_dtype]  # got: the library's dtype or the buffer's
        coarser = sorted({DTYPE_NAMES[max(d, out, key=lambda x: torch.finfo(x).eps)] for d in (out, given)})
        kinds = [("output", d) for d in coarser] + [("state", case.state_dtype)]
        kinds += [("intermediate", case.state_dtype)] if case.inter_rows else []
        lines += [f"        {k!r}: {tolerance(*k)!r}," for k in kinds] + ["    },"]
        device_error = "unsupported_here" if target.family.name == "flashinfer" else "None"
        lines += [f"    device_error={device_error},  # the library's words for an unsupported device"]
    lines += [")"]
    if sources:
        lines += ["", "SOURCES = {  # gdn-fuzz's modules the override needs, imported under their own names"]
        lines += [f"    {m!r}: {embed.literal(text)}," for m, text in sources.items()] + ["}"]
    return "\n".join(lines)


def _precision(model) -> str:
    """A Precision as code, its non-default fields only."""
    default = type(model)()
    changed = [f for f in dataclasses.fields(model) if getattr(model, f.name) != getattr(default, f.name)]
    return f"Precision({', '.join(f'{f.name}={getattr(model, f.name)!r}' for f in changed)})"


def _pretty(requires: dict) -> str:
    return "{\n" + "".join(f"    {k!r}: {v!r},\n" for k, v in requires.items()) + "}"


def _docstring(title, target, entry, note, name, requirement, gpu, library_module) -> str:
    wrap = lambda text: textwrap.wrap(text, WIDTH, break_on_hyphens=False)
    lines = wrap(title + ".")
    if entry is not None:
        outcome = "NOT REPRODUCED" if entry.expect == "pass" else f"REPRODUCED: {entry.expect}"
        held = str(entry.versions).removeprefix("==") or "every release"
        lines += wrap(f"Expected outcome: {outcome} (on {release.distribution(target)} {held}).")
    if note:
        lines += wrap(f"Note: {note}")
    needs = f"torch, {requirement}" if requirement else f"torch; the library is {library_module}, below"
    if gpu:
        needs += f"; a CUDA GPU, compute capability {describe.majors(gpu)}"
    elif isinstance(target, TritonTarget) and not library_module:
        needs += ", numpy; on a CPU it runs Triton interpreted"
    lines += [""] + wrap(
        f"Run: python {name} [--device cpu|cuda]. One line: exit 1 REPRODUCED (where, expected vs "
        f"actual), 0 NOT REPRODUCED, 2 NOT RUN (why). Needs {needs}. Expected values: gdn-fuzz's float64 gated "
        "delta rule, below the marker."
    )
    body = "\n".join(lines).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return f'"""{body}\n"""'
