"""--gdn-kernel-cache (fuzz.run.kernel_cache): one directory per library release, set before any library loads,
named in the targets table; a variable the user set is kept; a directory that cannot be made is one line."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fuzz.run import kernel_cache

ROOT = Path(__file__).resolve().parent.parent


def test_one_directory_per_release_under_the_root(tmp_path):
    env = {}
    cache = kernel_cache.configure(tmp_path / "k", env)
    triton = kernel_cache._version("triton")
    assert env["TRITON_CACHE_DIR"] == str(tmp_path / "k" / f"triton-{triton}")
    flashinfer = kernel_cache._version("flashinfer-python")  # "none" where it is not installed
    assert env["FLASHINFER_WORKSPACE_BASE"] == str(tmp_path / "k" / f"flashinfer-{flashinfer}")
    assert all(Path(p).is_dir() for p in env.values()) and not cache.kept
    assert f"triton-{triton}" in cache.describe() and str(tmp_path / "k") in cache.describe()


def test_the_default_root_follows_xdg_and_a_set_variable_is_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    env = {"TRITON_CACHE_DIR": "/mine"}
    cache = kernel_cache.configure(None, env)
    assert cache.root == tmp_path / "xdg" / "gdn-fuzz" / "kernels"
    assert env["TRITON_CACHE_DIR"] == "/mine" and cache.kept == ("TRITON_CACHE_DIR",)
    assert "kept as set: TRITON_CACHE_DIR" in cache.describe()


def _pytest(*args, env=None):
    return subprocess.run([sys.executable, "-m", "pytest", "fuzz/test_decode.py", "-p", "no:cacheprovider",
                           "--hypothesis-profile=ci", *args], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**{k: v for k, v in os.environ.items() if k not in kernel_cache.CACHES}, **(env or {})})


def test_a_run_names_its_cache_in_the_targets_table(tmp_path):
    run = _pytest("-k", "fla-recurrent and not loggates", "--gdn-examples", "2", "--gdn-kernel-cache", str(tmp_path))
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert f"kernel cache {tmp_path}: " in run.stdout, run.stdout[-2000:]
    assert (tmp_path / f"triton-{kernel_cache._version('triton')}").is_dir()


def test_a_cache_that_cannot_be_made_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    run = _pytest("--gdn-kernel-cache", str(blocker / "sub"))
    assert run.returncode == 4 and "--gdn-kernel-cache" in run.stderr and "Traceback" not in run.stderr, run.stderr
