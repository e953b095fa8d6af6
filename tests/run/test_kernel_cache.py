"""--gdn-kernel-cache (fuzz.run.kernel_cache): one directory per library release, set before any library loads,
named in the targets table; a variable the user set is kept; a directory that cannot be made is one line."""

from __future__ import annotations

import os
from pathlib import Path

from fuzz.run import kernel_cache
from tests.child_pytest import python_run

ROOT = Path(__file__).resolve().parents[2]


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
    clean = {k: v for k, v in os.environ.items() if k not in kernel_cache.CACHES}
    argv = "-m pytest fuzz/test_decode.py -p no:cacheprovider --hypothesis-profile=ci".split()
    return python_run(*argv, *args, env={**clean, **(env or {})})


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


def _module(root: Path, *names: str) -> Path:
    """A FlashInfer-shaped workspace module directory holding objects `names` and its commit marker."""
    module = root / ".cache" / "flashinfer" / "0.7.4" / "90a" / "cached_ops" / "gdn_decode_sm_90a_cute_dsl"
    module.mkdir(parents=True, exist_ok=True)
    for name in names:
        (module / name).write_bytes(name.encode())
    (module / "meta.json").write_text('{"arch": "sm_90a"}')
    return module


def test_a_worker_workspace_holds_links_to_the_shared_objects_and_publishes_what_it_compiled(tmp_path):
    """FlashInfer compiles one kernel per module at a time per workspace: each worker gets its own, linked to the
    shared one, and publishes back only finished objects (not locks, not half-written temporaries)."""
    shared = tmp_path / "shared"
    _module(shared, "a.o")
    (shared / ".cache" / "flashinfer" / "0.7.4" / "90a" / "cached_ops" / "tmp").mkdir()
    (shared / ".cache" / "flashinfer" / "0.7.4" / "90a" / "cached_ops" / "tmp" / "m.lock").write_text("")
    private = kernel_cache.private_workspace(shared)
    mine = _module(private, "b.o")
    assert (mine / "a.o").read_bytes() == b"a.o" and (mine / "a.o").stat().st_ino == (
        shared / mine.relative_to(private) / "a.o"
    ).stat().st_ino  # a link, not a copy
    assert not (private / ".cache" / "flashinfer" / "0.7.4" / "90a" / "cached_ops" / "tmp").exists()
    (mine / "c.o.tmp.123").write_bytes(b"half")
    assert kernel_cache.publish(private, shared) == 1
    theirs = shared / mine.relative_to(private)
    assert (theirs / "b.o").read_bytes() == b"b.o" and not (theirs / "c.o.tmp.123").exists()
    assert kernel_cache.publish(private, shared) == 0  # nothing new: nothing written over


def test_a_module_is_published_with_its_objects_before_its_commit_marker(tmp_path):
    shared, private = tmp_path / "shared", tmp_path / "private"
    shared.mkdir()
    module = _module(private, "x.o")
    assert kernel_cache.publish(private, shared) == 1
    assert (shared / module.relative_to(private) / "meta.json").exists()


def test_compile_seconds_come_from_flashinfers_build_log_and_leave_the_kernel_phase(tmp_path):
    log = kernel_cache.BuildLog(tmp_path / "builds.jsonl")
    assert log.take() == 0.0  # no log yet: nothing compiled
    (tmp_path / "builds.jsonl").write_text('{"name": "k1", "seconds": 1.5}\n{"name": "k2", "seconds": 0.25}\n{"na')
    assert log.take() == 1.75 and log.take() == 0.0  # a half-written line waits for its end
    assert kernel_cache.split_compile({"kernel": 2.0, "oracle": 0.1}, 1.75) == {
        "kernel": 0.25,
        "oracle": 0.1,
        "compile": 1.75,
    }
    assert kernel_cache.split_compile({"kernel": 1.0}, 0.0) == {"kernel": 1.0}
