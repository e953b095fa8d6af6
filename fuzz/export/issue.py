"""A markdown body for an upstream issue about an exported case: a title, what happens against what the contract
says, the case in words, the environments, the commands, and the script (inline when the body stays under GitHub's
limit, else attached).

What happens is what the script prints: it is run once, here, while the body is written. Where it does not
reproduce here (no GPU, another release), the body says so and states the corpus entry's expectation instead.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from fuzz.export import describe
from fuzz.export.recording import Recording
from fuzz.export.script import MARKER
from fuzz.model.case import Case
from fuzz.run import corpus
from fuzz.run.environment import environment, markdown_table
from fuzz.targets.base import Target
from fuzz.targets.triton_common import TritonTarget

BODY_LIMIT = 60_000  # characters: GitHub takes 65,536 in an issue body
RUN_SECONDS = 900  # a first GPU call may compile for minutes
_VERDICT = re.compile(r"^(REPRODUCED: (\w+): (.*)|NOT REPRODUCED|NOT RUN: .*)$", re.M)


@dataclass(frozen=True)
class IssueBody:
    title: str  # the body's first line, without its '# '
    text: str  # the markdown
    verdict: str  # the script's last verdict line where the body was written


def run_script(script: Path) -> tuple[int, str]:
    """(exit status, stdout and stderr) of `python script` in a fresh interpreter, next to this one's, with this
    machine's paths taken out (`scrub`)."""
    try:
        proc = subprocess.run(
            [sys.executable, script.name],
            capture_output=True,
            text=True,
            timeout=RUN_SECONDS,
            cwd=script.resolve().parent,
        )
    except subprocess.TimeoutExpired as e:
        return 124, scrub(f"{e.stdout or ''}{e.stderr or ''}\nNOT RUN: no answer within {RUN_SECONDS} s", script)
    return proc.returncode, scrub(proc.stdout + proc.stderr, script)


def scrub(text: str, script: Path) -> str:
    """No path of this machine in a public issue: the script's folder becomes ./, the Python installation
    <python>, the home folder ~, the temporary folder <tmp> (where a library's logs name its kernel cache)."""
    places = {
        str(script.resolve().parent) + os.sep: "./",
        sys.prefix: "<python>",
        sys.base_prefix: "<python>",
        os.path.expanduser("~"): "~",
        tempfile.gettempdir() + os.sep: "<tmp>/",
    }
    for place, name in sorted(places.items(), key=lambda p: -len(p[0])):
        if len(place) > 1:
            text = text.replace(place, name)
    return text


def issue_body(
    case: Case,
    target: Target,
    script: Path,
    recorded: Recording,
    *,
    module: str | None = None,
    entry: corpus.Entry | None = None,
) -> IssueBody:
    """`recorded`: the library call the script makes (fuzz.export.recording), shown as the library names it."""
    status, output = run_script(script)
    here, found = environment(), entry.environment if entry is not None and entry.environment else None
    dist = describe.distribution(target)
    library = re.fullmatch(rf"{target.family.name} (\S+)", _line(output, "library") or "")
    version = library[1] if library else (found or here).get(dist)
    kind, cause, happens, verdict = _what_happens(status, output, entry, dist, target.needs)
    releases = version or (str(entry.versions) if entry is not None else "")
    title = f"[{dist}{f' {releases}' if releases else ''}] {' / '.join(target.needs)}: {kind}: {cause}"
    sections = [
        f"# {title}",
        "",
        f"**What happens.** {_function(recorded, target, module)}, on the call below. {happens}"
        f"{_where_run(target, here)}{_root_cause(entry)}",
        "",
        "**What the contract says.** "
        + describe.contract(target, describe.contract_row(target, entry, found or here), case)
        + _numbers(kind),
        "",
        "### The call",
        "",
        *_call(recorded, case),
        "",
        "### The case, as gdn-fuzz draws it",
        "",
        f"`{case!r}`",
        "",
        *[f"- **{what}**: {words}" for what, words in describe.case_lines(case)],
        "",
        "### Environment",
        "",
        *(["Found on:", "", markdown_table(found), "", "This report was written on:", ""] if found else []),
        markdown_table(here),
        "",
        "### Reproduce",
        "",
        "```sh",
        f"pip install torch && {describe.install_command(target, version)}",
        f"python {script.name}",
        "```",
        "",
        f"`{script.name}` needs only torch, packaging and the library: it carries gdn-fuzz's case, value generator, "
        "adapter, float64 oracle and verdict, verbatim. Exit 1 and `REPRODUCED: <kind>: <detail>` when the failure "
        "is there, 0 and `NOT REPRODUCED` when not.",
        "",
        _details(f"Output of <code>python {script.name}</code> here (exit status {status})", output.rstrip(), "text"),
        "",
    ]
    body, text = "\n".join(sections), script.read_text()
    lines = len(text.splitlines())
    if len(body) + len(text) < BODY_LIMIT:
        return IssueBody(
            title, body + _details(f"{script.name} ({lines} lines)", text.rstrip(), "python") + "\n", verdict
        )
    top = text[: text.index(MARKER)].rstrip()
    return IssueBody(
        title,
        body + f"`{script.name}` ({lines} lines) is attached: too long for an issue body. Its top, "
        "above gdn-fuzz's embedded code:\n\n" + _details(f"{script.name}, top", top, "python") + "\n",
        verdict,
    )


def _function(recorded: Recording, target: Target, module: str | None) -> str:
    return f"`{recorded.call.function}`" if recorded.call else describe.call(target, module)


def _call(recorded: Recording, case: Case) -> list[str]:
    """The function and its keyword arguments, as recorded from the adapter."""
    if recorded.call is None:
        return [f"Not recorded: the adapter made no library call at export against {recorded.against}: {recorded.why}."]
    return [
        f"`{recorded.call.function}` is called with these keyword arguments (recorded from gdn-fuzz's adapter "
        f"against {recorded.against}; strides and storage offsets in elements). The writable buffers are views "
        "into larger allocations whose surplus holds a NaN guard pattern, hence their storage offsets. Every "
        f"tensor's values come from seed {case.seed}: the script's `--dump tensors.pt` saves them.",
        "",
        *recorded.call.table(),
    ]


def _where_run(target: Target, here: dict) -> str:
    """Where the script ran while the body was written (`here`, fuzz.run.environment): a GPU, or the CPU (Triton
    kernels then interpreted)."""
    if here.get("gpu"):
        return f" It ran on {here['gpu']}."
    interpreted = " under the Triton interpreter (TRITON_INTERPRET=1)" if isinstance(target, TritonTarget) else ""
    return f" It ran on the CPU{interpreted}, where this report was written."


def _what_happens(
    status: int, output: str, entry: corpus.Entry | None, dist: str, functions: tuple[str, ...]
) -> tuple[str, str, str, str]:
    """(failure kind, cause, what happens in words, the script's verdict line): the script's verdict where it
    reproduced, else the corpus entry's expectation next to the verdict it gave here. The cause, for the title: the
    entry's description where it expects that kind (it says what goes wrong), else the verdict's."""
    verdicts = _VERDICT.findall(output)
    verdict = verdicts[-1][0] if verdicts else f"no verdict (exit status {status})"
    if status == 1 and verdict.startswith("REPRODUCED"):
        kind, detail = verdicts[-1][1], verdicts[-1][2]
        cause = (
            _clause(entry.description, functions)
            if entry is not None and entry.expect == kind
            else _line(output, "cause") or detail
        )
        return kind, cause, f"`{kind}`: {detail}.", verdict
    if entry is not None and entry.expect != "pass":
        return (
            entry.expect,
            _clause(entry.description, functions),
            f"`{entry.expect}` (corpus entry {entry.path.name}, {dist} {entry.versions or 'every release'}): "
            f"{entry.description}\n\nNot reproduced where this report was written: "
            f"`{verdict}`.",
            verdict,
        )
    return "not reproduced", verdict, f"The script's verdict where this report was written: `{verdict}`.", verdict


def _root_cause(entry: corpus.Entry | None) -> str:
    """The known bug the corpus entry names, where there is one: its root cause as read in the library."""
    from fuzz.model.known_bugs import BY_ID

    bug = BY_ID.get(entry.bug) if entry is not None and entry.bug else None
    return f"\n\n**Known root cause** ({bug.releases}): {bug.root_cause}" if bug else ""


def _numbers(kind: str) -> str:
    if not kind.endswith("Mismatch") and kind != "NonFinite":
        return ""
    return (
        " Numbers: the largest error against a float64 oracle may be at most c times the error of the same "
        "oracle re-run in the kernel's own precision model (fp32 arithmetic, rounded where the contract says), "
        "plus a floor of a few ulps growing with T (gdn-fuzz fuzz/judge/tolerance.py)."
    )


def _clause(text: str, functions: tuple[str, ...], limit: int = 100) -> str:
    """The first clause of a description, for a title (after the function's name where it opens with it: the title
    names the function already)."""
    for function in functions:
        text = text.removeprefix(f"{function}: ")
    first = re.split(r"[:;(]\s", text, maxsplit=1)[0].strip()
    return first if len(first) <= limit else first[: limit - 3].rstrip() + "..."


def _line(output: str, label: str) -> str | None:
    match = re.search(rf"^{label}:\s+(.*)$", output, re.M)
    return match[1].strip() if match else None


def _details(summary: str, text: str, language: str) -> str:
    return f"<details><summary>{summary}</summary>\n\n```{language}\n{text}\n```\n\n</details>\n"
