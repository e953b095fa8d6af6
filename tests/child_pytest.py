"""Python and pytest in a child process, as the tests run gdn-fuzz end to end: in the checkout, output captured;
pytest quiet (no warnings summary, no cache)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUIET = ("-q", "-p", "no:warnings", "-p", "no:cacheprovider")


def python_run(
    *args: str, env: dict | None = None, cwd: Path = ROOT, timeout: float = 600
) -> subprocess.CompletedProcess:
    """`python ARGS` in `cwd`; `env`, where given, is the child's whole environment."""
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def pytest_run(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """`python -m pytest -q ... ARGS` in the checkout."""
    return python_run("-m", "pytest", *QUIET, *args, env=env, timeout=timeout)
