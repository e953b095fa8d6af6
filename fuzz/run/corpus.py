"""corpus/: one JSON file per minimal case, replayed as tests.

Schema 1:
    {"schema": 1, "case": "<Case coordinate>", "target": "<target name>", "library": "<family>",
     "versions": "<PEP 440 specifier the expectation holds for, '' for all>",
     "expect": "pass" | "<failure class>", "issue": "<upstream reference>" | null,
     "description": "<one line>", "environment": {...} (optional: where it was found),
     "bug": "<fuzz.model.known_bugs id>" (optional: the record it replays; its versions lie inside the record's)}

A finding never overwrites another: `save` picks a file name no entry has yet. The corpus ships inside the package
(the wheel maps corpus/ to fuzz.corpus_data), so an installed gdn-fuzz replays it too.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from fuzz.judge.failures import KINDS
from fuzz.model.case import Case, CaseError
from fuzz.run.result import Failure

SCHEMA = 1
EXPECTATIONS = {"pass"} | set(KINDS)


class CorpusError(ValueError):
    """A corpus file or directory that cannot be used; the message names the file and the field."""


def default_dir() -> Path:
    """The checkout's corpus/ or, in an installed gdn-fuzz, the corpus shipped in the package (fuzz.corpus_data)."""
    root = Path(__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file() and (root / "corpus").is_dir():
        return root / "corpus"
    # a directory without __init__.py: a namespace package, whose resources.files() is no Path
    spec = importlib.util.find_spec("fuzz.corpus_data")
    if spec is None or not spec.submodule_search_locations:
        raise CorpusError(
            "no corpus found: neither a checkout's corpus/ nor the corpus shipped in the installed "
            "package (fuzz.corpus_data); give one with --gdn-corpus DIR"
        )
    return Path(next(iter(spec.submodule_search_locations)))


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
    environment: dict | None = None
    bug: str | None = None

    @property
    def id(self) -> str:
        return f"{self.target}:{self.path.stem}"


def load(path: Path) -> Entry:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise CorpusError(f"{path}: not readable JSON ({e})") from e
    if not isinstance(data, dict):
        raise CorpusError(f"{path}: expected a JSON object, got {type(data).__name__}")

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
    coordinate = field("case")
    try:
        case = Case.parse(coordinate)
    except CaseError as e:
        raise CorpusError(f"{path}: field 'case' is not a valid Case coordinate ({e})") from e
    specifier = field("versions")
    try:
        versions = SpecifierSet(specifier)
    except InvalidSpecifier as e:
        raise CorpusError(f"{path}: field 'versions' is not a version specifier ({e})") from e
    expect = field("expect")
    if expect not in EXPECTATIONS:
        raise CorpusError(f"{path}: field 'expect' is {expect!r}; expected one of {sorted(EXPECTATIONS)}")
    from fuzz.targets.registry import FAMILIES, TARGETS  # here: the pytest plugin sets TRITON_INTERPRET first

    library, target = field("library"), field("target")
    if library not in FAMILIES:
        raise CorpusError(f"{path}: field 'library' is {library!r}; expected one of {', '.join(sorted(FAMILIES))}")
    family = {t.name: t.family.name for t in TARGETS}
    if target not in family:
        raise CorpusError(f"{path}: field 'target' is {target!r}, no known target")
    if family[target] != library:
        raise CorpusError(f"{path}: field 'library' is {library!r}, but target {target} is a {family[target]} target")
    bug = field("bug", str, optional=True)
    from fuzz.model.known_bugs import BY_ID

    if bug is not None and bug not in BY_ID:
        raise CorpusError(f"{path}: field 'bug' is {bug!r}, no record in fuzz/model/known_bugs.py")
    return Entry(
        path,
        case,
        target,
        library,
        versions,
        expect,
        field("issue", str, optional=True),
        field("description"),
        field("environment", dict, optional=True),
        bug,
    )


def load_all(directory: Path | None = None) -> list[Entry]:
    directory = default_dir() if directory is None else directory
    if not directory.is_dir():
        raise CorpusError(f"{directory}: no such corpus directory")
    paths = sorted(directory.glob("*.json"))
    if not paths:
        raise CorpusError(f"{directory}: no corpus entries (*.json) to replay")
    return [load(p) for p in paths]


def save(
    directory: Path,
    case: Case,
    target: str,
    library: str,
    versions: str,
    expect: str,
    description: str,
    issue: str | None = None,
    environment: dict | None = None,
) -> Path:
    """Write a new entry under a file name no entry has (never overwrites); return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    text = (
        json.dumps(
            {
                "schema": SCHEMA,
                "case": repr(case),
                "target": target,
                "library": library,
                "versions": versions,
                "expect": expect,
                "issue": issue,
                "description": description,
                **({"environment": environment} if environment else {}),
            },
            indent=1,
        )
        + "\n"
    )
    stem = f"{target}-{case.op}-{expect}"
    n = 0
    while True:
        path = directory / f"{stem}-{n}.json"
        try:
            with open(path, "x") as f:  # exclusive: an existing entry (or a parallel writer's) is never replaced
                f.write(text)
            return path
        except FileExistsError:
            n += 1


def save_failure(directory: Path, target, failure: Failure, environment: dict | None = None) -> Path:
    # An override's finding holds for the module, not for the release it may report (a stand-in of one): no versions
    release = None if target.overridden else target.release()
    return save(
        directory,
        failure.case,
        target.name,
        target.family.name,
        f"=={release}" if release else "",
        failure.kind,
        failure.detail.splitlines()[0][:200],
        environment=environment,
    )
