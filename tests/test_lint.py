"""Lint runs with the tests: the README's test command (CI's) fails on what `ruff check` finds and on a file that
`ruff format` would change, with ruff's own lines.
ruff comes with the dev extra, which the README's install command installs: its absence is a failure, not a skip."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREES = ("reference", "fuzz", "tests", "scripts", "bench")  # every Python file of the checkout


def run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *command], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff_finds_nothing():
    checked = run("-m", "ruff", "check", "--no-cache", *TREES)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_every_file_is_as_ruff_formats_it():
    checked = run("-m", "ruff", "format", "--check", "--no-cache", *TREES)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_readme_import_graph_is_what_the_code_gives():
    checked = run("scripts/import_graph.py", "--check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
