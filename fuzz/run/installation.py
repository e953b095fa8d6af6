"""An installation of the target libraries to run the fuzz suites against: a python executable (a venv's bin/python,
or the venv directory) or a directory put first on PYTHONPATH (`pip install --no-deps --target DIR lib==X`). The gate
compares two; a campaign fuzzes several releases at once. Every run uses this gdn-fuzz's fuzz suites."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import fuzz

SUITES = Path(fuzz.__file__).resolve().parent  # fuzz/: the fuzz tests and their conftest, checkout or installed
COMPILE_CACHES = ("FLASHINFER_WORKSPACE_BASE", "TRITON_CACHE_DIR")


@dataclass
class Installation:
    label: str  # what the reports call it: "baseline", "0.6.10", ...
    spec: str  # the python or directory the user gave
    python: str = sys.executable
    env: dict = field(default_factory=dict)

    def __post_init__(self):
        if not self.spec:  # this interpreter, as it is
            return
        path = Path(self.spec)
        if path.is_dir() and (path / "bin" / "python").exists():
            path = path / "bin" / "python"
        if path.is_file() and os.access(path, os.X_OK):
            self.python = str(path)
        elif path.is_dir():
            self.env = {
                "PYTHONPATH": os.pathsep.join(p for p in (str(path.resolve()), os.environ.get("PYTHONPATH")) if p)
            }
        else:
            what = "a file, not executable" if path.is_file() else "no such file or directory"
            raise ValueError(
                f"installation {self.spec!r} ({self.label}): {what}; expected a python executable, "
                "a venv or a directory"
            )

    def pytest(self, args: list[str], log: Path) -> subprocess.Popen:
        """Start `pytest fuzz/ ARGS` on this installation, its output into `log`."""
        return self.start(["-m", "pytest", str(SUITES), *args], log)

    def start(self, args: list[str], log: Path) -> subprocess.Popen:
        """Start this installation's python with ARGS (its compile caches, from the checkout's root), its output into
        `log`."""
        with open(log, "w") as out:
            return subprocess.Popen(
                [self.python, *args],
                cwd=SUITES.parent,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env, **self.caches()},
                start_new_session=True,
            )  # its own process group: a kill reaches its workers

    def libraries(self, families: list[str], overrides: dict[str, str]) -> dict | None:
        """Per family: where this installation loads it from, {"version", "where", "override"}, or {"why"} it does
        not load (the targets' own reason); None when the interpreter could not even say (the run reports that)."""
        probe = subprocess.run(
            [
                self.python,
                "-c",
                f"from {__name__} import probe; probe()",
                json.dumps({"families": families, "overrides": overrides}),
            ],
            cwd=SUITES.parent,
            capture_output=True,
            text=True,
            env={**os.environ, **self.env},
            timeout=600,
        )
        try:
            return json.loads(probe.stdout.strip().splitlines()[-1]) if probe.returncode == 0 else None
        except (ValueError, IndexError):
            return None

    def caches(self) -> dict:
        """Compile caches of this installation's own, beside the ones set: kernels another release compiled must
        never serve this one (an on-disk CuTe DSL or Triton cache is keyed by the kernel's arguments, not the
        library release)."""
        return {var: os.path.join(os.environ[var], f"gdn-{self.label}") for var in COMPILE_CACHES if var in os.environ}


def parse(spec: str) -> Installation:
    """LABEL=PATH, or PATH, labelled by its directory's name (/venvs/fi-0.7.4/bin/python: fi-0.7.4). A label names
    files of the run (LABEL-FAMILY.json), so it is a plain file name."""
    label, sep, path = spec.partition("=")
    if not sep:
        label, path = _name(Path(spec)), spec
    if not path:
        raise ValueError(f"installation {spec!r}: expected [LABEL=]PYTHON_OR_DIR")
    if not re.fullmatch(r"[\w.+-]+", label) or label in (".", ".."):
        raise ValueError(
            f"installation {spec!r}: label {label!r} is not a plain name (letters, digits, . _ + -); "
            "give one as LABEL=PATH"
        )
    return Installation(label, path)


def probe() -> None:
    """Installation.libraries, in the installation's interpreter: one JSON line on stdout."""
    from fuzz.targets.registry import FAMILIES, overridden

    asked = json.loads(sys.argv[1])
    with overridden(asked["overrides"]):
        found = {}
        for name in asked["families"]:
            family = FAMILIES[name]
            try:
                family.api()
                spec = None if family.override else importlib.util.find_spec(name)  # the top-level package: its files
                where = (
                    ""
                    if spec is None
                    else Path(spec.origin).parent
                    if spec.origin
                    else Path(next(iter(spec.submodule_search_locations or ()), ""))
                )  # a namespace package: its directory
                found[name] = {
                    "version": family.version(),
                    "where": str(where and Path(where).resolve()),
                    "override": family.override,
                }
            except Exception as e:  # noqa: BLE001 - the family's own reason, reported by the gate
                found[name] = {"why": str(e).splitlines()[0] if str(e) else type(e).__name__}
        print(json.dumps(found))


def _name(path: Path) -> str:
    if path.name.startswith("python") and path.parent.name == "bin":
        path = path.parent.parent
    return path.name or path.resolve().name
