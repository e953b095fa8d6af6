"""corpus/: one JSON file per minimal case, replayed as tests.

Schema 1:
    {"schema": 1, "case": "<Case coordinate>", "target": "<target name>", "library": "<family>",
     "versions": "<PEP 440 specifier the expectation holds for, '' for all>",
     "expect": "pass" | "<verdict failure class>", "issue": "<upstream reference>" | null,
     "description": "<one line>"}
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from fuzz.case import Case
from fuzz.judge.verdict import FAILURE_KINDS

SCHEMA = 1
CORPUS_DIR = Path(os.environ.get("GDN_FUZZ_CORPUS") or Path(__file__).resolve().parents[2] / "corpus")
EXPECTATIONS = {"pass"} | {k.__name__ for k in FAILURE_KINDS}


class CorpusError(ValueError):
    """A corpus file that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class Entry:
    path: Path
    case: Case
    target: str
    library: str
    versions: SpecifierSet
    expect: str
    issue: str | None
    description: str

    @property
    def id(self) -> str:
        return f"{self.target}:{self.path.stem}"


def load(path: Path) -> Entry:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise CorpusError(f"{path}: not readable JSON ({e})") from e

    def field(name, kind=str, optional=False):
        if name not in data:
            if optional:
                return None
            raise CorpusError(f"{path}: missing field '{name}'")
        if not isinstance(data[name], kind) and not (optional and data[name] is None):
            raise CorpusError(f"{path}: field '{name}' must be {kind.__name__}, got {data[name]!r}")
        return data[name]

    if field("schema", int) != SCHEMA:
        raise CorpusError(f"{path}: field 'schema' is {data['schema']}, this gdn-fuzz reads schema {SCHEMA}")
    try:
        case = Case.parse(field("case"))
    except (ValueError, TypeError) as e:
        raise CorpusError(f"{path}: field 'case' is not a Case coordinate ({e})") from e
    try:
        versions = SpecifierSet(field("versions"))
    except InvalidSpecifier as e:
        raise CorpusError(f"{path}: field 'versions' is not a version specifier ({e})") from e
    expect = field("expect")
    if expect not in EXPECTATIONS:
        raise CorpusError(f"{path}: field 'expect' is {expect!r}; expected one of {sorted(EXPECTATIONS)}")
    return Entry(path, case, field("target"), field("library"), versions, expect, field("issue", str, optional=True),
                 field("description"))


def load_all(directory: Path = CORPUS_DIR) -> list[Entry]:
    return [load(p) for p in sorted(directory.glob("*.json"))]


def save(directory: Path, case: Case, target: str, library: str, versions: str, expect: str,
         description: str, issue: str | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{target}-{case.op}-{expect}-{case.seed}.json"
    path.write_text(json.dumps({"schema": SCHEMA, "case": repr(case), "target": target, "library": library,
                                "versions": versions, "expect": expect, "issue": issue,
                                "description": description}, indent=1) + "\n")
    return path


def failed_cases(error: BaseException) -> list[tuple[Case, str, str]]:
    """(case, failure class, first message line) for the verdict failures in `error` (one, or an ExceptionGroup
    of several): each message starts with the failing Case's coordinate. Other exceptions (harness errors) are
    not findings."""
    errors = getattr(error, "exceptions", (error,))  # an ExceptionGroup (Python 3.11+, or the 3.10 backport)
    return [(Case.parse(str(e).split(": ", 1)[0]), type(e).__name__, str(e).split(": ", 1)[1].splitlines()[0])
            for e in errors if type(e).__name__ in EXPECTATIONS and ": " in str(e)]


def save_failures(directory: Path, target, error: BaseException) -> list[Path]:
    """One corpus entry per verdict failure in `error`."""
    version = target.family.version()
    return [save(directory, case, target.name, target.family.name, f"=={version}" if version else "", kind,
                 message[:200]) for case, kind, message in failed_cases(error)]
