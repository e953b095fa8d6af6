"""A markdown body for an upstream issue about an exported case, addressed to the library's maintainers in their
words: what the call does against what it should, the known root cause, how to reproduce it on the release it holds
for (pinned: fuzz.export.release), the call as a table of its keyword arguments, the environment, and the script.

The script is run once, here, while the body is written; its one line is quoted, with this machine's paths taken
out. Where it does not reproduce here (no GPU, another release), the body says where it was seen instead.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from fuzz.export import describe, release
from fuzz.export.script import Export
from fuzz.model.case import Case
from fuzz.model.known_bugs import BY_ID
from fuzz.run import corpus
from fuzz.run.environment import environment
from fuzz.targets.triton_common import TritonTarget

BODY_LIMIT = 60_000  # characters: GitHub takes 65,536 in an issue body
RUN_SECONDS = 900  # a first GPU call may compile for minutes
_VERDICT = re.compile(r"^(REPRODUCED: (\w+): .*|NOT REPRODUCED.*|NOT RUN: .*)$", re.M)
_KINDS = {  # a failure class in a maintainer's words
    "OutputMismatch": "returns wrong output values",
    "StateMismatch": "writes wrong final states to the pool",
    "IntermediateMismatch": "writes wrong intermediate states",
    "PoolCorruption": "writes memory it must leave untouched",
    "GuardBreach": "writes outside the buffers it is given",
    "UnwrittenOutput": "leaves output rows unwritten",
    "NonFinite": "returns NaN or inf where the result is finite",
    "RejectedValidInput": "raises on a valid input",
    "AcceptedInvalidInput": "accepts an input it should reject",
}
# the environment rows a maintainer asks for (fuzz.run.environment keys), the library's own added per issue
_ROWS = ("python", "platform", "torch", "cuda", "gpu", "driver")


@dataclass(frozen=True)
class IssueBody:
    title: str  # the body's first line, without its '# '
    text: str  # the markdown
    verdict: str  # the script's outcome line where the body was written


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


def issue_body(exported: Export, script: Path, case: Case, entry: corpus.Entry | None = None) -> IssueBody:
    """The body for `exported` (written to `script`), run once here."""
    status, output = run_script(script)
    verdicts = _VERDICT.findall(output)
    verdict = verdicts[-1][0] if verdicts else f"no outcome line (exit status {status})"
    target, call = exported.target, exported.recorded.call
    function, dist = call.function.rpartition(".")[2], release.distribution(target)
    bug = BY_ID.get(entry.bug) if entry is not None and entry.bug else None
    kind = verdicts[-1][1] if verdicts and status == 1 else entry.expect if entry is not None else ""
    what = _what(kind, bug, entry, function)
    here = environment()
    title = f"[{dist} {exported.release or (entry.versions if entry else '')}] {function}: {_title(what)}".replace(
        "[ ", "["
    )
    sections = [
        f"# {title}",
        "",
        f"{_summary(call.function, kind, what)}{_held(bug, entry, dist)}",
        "",
        f"**Expected.** {describe.expectation(case, exported.recorded.semantics, exported.names)}",
        "",
        f"**Actual.** {_actual(status, verdict, target, here, exported)}",
        "",
        "### Reproduce",
        "",
        "```sh",
        release.install_line(target, exported.requirement) if exported.requirement else "pip install torch",
        f"python {script.name}",
        "```",
        "",
        f"`{script.name}` (below) needs nothing else: it builds the case's tensors from a seed, calls `{function}` as "
        "shown, and compares with the gated delta rule computed in float64. It prints one line and exits 1 with "
        "`REPRODUCED: <what>: <where, expected vs actual>` where the bug is, 0 with `NOT REPRODUCED` where it is "
        "not, 2 with `NOT RUN: <why>` where it cannot run (a missing package, no suitable GPU).",
        "",
        "### The call",
        "",
        f"{describe.case_words(case)}. Keyword arguments (strides and storage offsets in elements; the writable "
        "buffers are views into larger NaN-filled allocations, hence their offsets, so a write outside them shows):",
        "",
        *call.table(),
        *_strided(call),
        "",
        "### Environment",
        "",
        *_environment(exported, here, entry),
        "",
        "",
    ]
    body, text = "\n".join(sections), script.read_text()
    kb = f"{len(text.encode()) / 1000:.1f} KB"
    summary = f"{script.name} ({len(text.splitlines())} lines, {kb})"
    if len(body) + len(text) < BODY_LIMIT:
        return IssueBody(title, body + _details(summary, text.rstrip(), "python"), verdict)
    return IssueBody(title, body + f"`{summary}` is attached: too long for an issue body.\n", verdict)


def _what(kind: str, bug, entry: corpus.Entry | None, function: str) -> str:
    """The finding in the library's words: the known bug's root cause, else the entry's description, cleaned."""
    if bug is not None:
        return bug.root_cause.rstrip(".")
    if entry is not None:
        return describe.cleaned(entry.description, function)
    return f"{kind or 'the outcome'} as the script prints it"


def _summary(function: str, kind: str, what: str) -> str:
    """'`function` <what goes wrong, in words>, on the call below: <what>.' (once where `what` says it already)."""
    if what.split(" ", 1)[0] in ("accepts", "rejects", "raises", "returns", "writes", "outputs", "fails"):
        return f"`{function}` {what}, on the call below."
    return f"`{function}` {_KINDS.get(kind, 'misbehaves')}, on the call below: {what}."


def _title(what: str, limit: int = 100) -> str:
    """The first clause of `what`, at most `limit` characters."""
    first = re.split(r":\s|;\s|, so |\s\(", what, maxsplit=1)[0].strip()
    return first if len(first) <= limit else first[: limit - 3].rsplit(" ", 1)[0] + "..."


def _held(bug, entry: corpus.Entry | None, dist: str) -> str:
    gpu = describe.seen_on(entry.description) if entry is not None else ""
    on = f", on {gpu}" if gpu else ""
    if bug is not None:
        seen = f" (seen on {', '.join(bug.seen_on)}{on})" if bug.seen_on else ""
        fixed = f"; {bug.fixed_in} fixes it" if bug.fixed_in else ""
        return f" It holds for {dist} {bug.releases}{seen}{fixed}."
    if entry is not None and str(entry.versions):
        return f" It holds for {dist} {str(entry.versions).removeprefix('==')}{f' (seen{on})' if on else ''}."
    return ""


def _strided(call) -> list[str]:
    """The tensor arguments that are not contiguous, in words (a maintainer's first question about a view)."""
    notes = []
    for key, value in call.arguments:
        shape, strides = getattr(value, "shape", None), getattr(value, "strides", None)
        if shape is None:
            continue
        dense, size = [], 1
        for dim in reversed(shape):
            dense.insert(0, size)
            size *= dim
        if any(d > 1 and s != c for d, s, c in zip(shape, strides, dense)):
            notes.append(f"`{key}` (strides {strides}; a contiguous one would have {tuple(dense)})")
    return ["", f"Not contiguous: {'; '.join(notes)}."] if notes else []


def _actual(status: int, verdict: str, target, here: dict, exported: Export) -> str:
    where = here.get("gpu") or (
        "a CPU, the Triton kernels interpreted (TRITON_INTERPRET=1)" if isinstance(target, TritonTarget) else "a CPU"
    )
    if not here.get("gpu") and release.flashinfer_under(target):
        where += (
            ", the glue over gdn-fuzz's CPU stand-in of FlashInfer (the glue's own code runs as shipped; the finding "
            "is about its GPU path)"
        )
    if status in (0, 1):
        return f"The script below, run on {where}, prints (exit status {status}):\n\n```text\n{verdict}\n```"
    return (
        f"Not run where this report was written ({where}): `{verdict}`. "
        + (f"Run it on a GPU with {exported.requirement} installed." if exported.requirement else "")
    ).strip()


def _environment(exported: Export, here: dict, entry: corpus.Entry | None) -> list[str]:
    """The library (the release the finding holds for, and what this machine has) and the machine's rows; where the
    corpus entry records where it was found, that column too."""
    dist = release.distribution(exported.target)
    found = entry.environment if entry is not None and entry.environment else None
    rows = [(dist, exported.release or "", here.get(dist) or "not installed", (found or {}).get(dist, ""))]
    if isinstance(exported.target, TritonTarget):
        rows.append(("triton", "", here.get("triton", ""), (found or {}).get("triton", "")))
    if under := release.flashinfer_under(exported.target):  # the glue's FlashInfer, on the GPU
        fi, version = under.split("==")
        rows.append((fi, version, release.installed(fi) or "not installed (CPU stand-in)", (found or {}).get(fi, "")))
    rows += [(key, "", here.get(key) or "", (found or {}).get(key, "")) for key in _ROWS]
    head = "| | the finding's release | this report |" + (" found on |" if found else "")
    lines = [head, "|---|---|---|" + ("---|" if found else "")]
    for key, pinned, mine, theirs in rows:
        if pinned or mine or theirs:
            lines.append(f"| {key} | {pinned} | {mine} |" + (f" {theirs} |" if found else ""))
    return lines


def _details(summary: str, text: str, language: str) -> str:
    return f"<details><summary>{summary}</summary>\n\n```{language}\n{text}\n```\n\n</details>\n"
