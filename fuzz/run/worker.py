"""Crash isolation: differential checks in a spawned worker process that the harness restarts.

An illegal memory access poisons a CUDA context for good: every later call in that process fails, so one
crashing case would turn the rest of a run into noise. With isolation on (`--gdn-isolate`, recommended for
the GPU profiles), each check (`fuzz.run.harness.check`: materialization, oracle, kernel call and verdict) runs
in a child process started with the "spawn" method (a fresh interpreter with its own CUDA context; never
fork, the parent may have CUDA initialised). Only the Case goes in; the child's CheckResult comes back as it is
(comparisons, phase times, coverage events and failure included), except where the child could not finish:

  * the child died (signal, nonzero exit, closed pipe): `KernelCrash`, with the exit status and the last
    lines of the child's stderr (faulthandler writes the Python stack there on SIGSEGV / SIGABRT / SIGBUS);
  * an error that poisons the CUDA context (its text names an illegal address, a launch failure, a device
    assert..., or the child's post-call health probe fails): `KernelCrash`, and the child is discarded;
  * no answer within the per-call timeout: the child's stacks are dumped to its stderr (SIGUSR1), it is
    killed, `KernelHang`.

A dead or discarded child is replaced lazily, on the next call: restarts happen only after crashes and
hangs, and Hypothesis shrinks a crash like any other failure (each crashing shrink step costs a restart).
A restart costs an interpreter and the torch import (about 1.5 s on a CPU machine) plus, on a GPU, a CUDA
context and loading compiled kernels: keep compile caches on disk (Triton: TRITON_CACHE_DIR, default
~/.triton/cache; FlashInfer's CuTe DSL objects: FLASHINFER_WORKSPACE_BASE); the child inherits the parent's
environment. Workers are cached per (family overrides, device) and stopped at exit.

"""
from __future__ import annotations

import atexit
import dataclasses
import faulthandler
import multiprocessing
import os
import re
import shutil
import signal
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import wait

from fuzz.case import Case
from fuzz.judge.failures import KernelCrash, KernelHang, normalized
from fuzz.run.harness import dispatch_bucket, failure_bucket
from fuzz.run.result import CheckResult, Failure

DEFAULT_TIMEOUT = 120.0  # seconds per call; the first call on a fresh worker may compile
STARTUP_TIMEOUT = 300.0  # interpreter + torch + the fuzz package (no kernel compiles happen at start-up)
INHERITED_ENV = ("TRITON_INTERPRET",)  # set in the child before anything imports triton
# Error text after which a CUDA context is unusable (sticky errors). Out-of-memory is not one of them.
POISON_MARKERS = ("illegal memory access", "illegal address", "unspecified launch failure", "launch failure",
                  "device-side assert", "misaligned address", "illegal instruction", "invalid program counter",
                  "hardware stack error", "uncorrectable ecc", "launch timed out", "cuda_error_", "cudaerror")
STDERR_LINES = 20  # stderr tail quoted in a crash / hang report

# faulthandler lines that say nothing about the kernel: the spawn bootstrap frames, the extension list
_NOISE = re.compile(r'File "(<string>|.*[/\\]multiprocessing[/\\][^"]*)"|^Extension modules:')
_DIED, _TIMEOUT = "died", "timeout"


class WorkerError(RuntimeError):
    """The worker failed outside the checked call (start-up, or the harness itself raised): not a finding."""


def poisoned(text: str) -> bool:
    """Does this error text mean the CUDA context is gone?"""
    low = text.lower()
    return any(m in low for m in POISON_MARKERS) or ("cuda error" in low and "out of memory" not in low)


@dataclass
class WorkerStats:
    starts: int = 0
    start_seconds: list = field(default_factory=list)  # spawn until the child has imported the harness
    calls: int = 0
    crashes: int = 0  # deaths and poisoned contexts
    hangs: int = 0
    workers: int = 1

    @property
    def restarts(self) -> int:
        return max(self.starts - self.workers, 0)


class Worker:
    """One spawned child running `fuzz.run.harness.check` for one (family overrides, device)."""

    def __init__(self, overrides: dict[str, str], device: str, timeout: float = DEFAULT_TIMEOUT):
        self.overrides, self.device, self.timeout = dict(overrides), device, timeout
        self.env = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ}
        self.stats = WorkerStats()
        self._proc = self._conn = None
        self._dir = tempfile.mkdtemp(prefix="gdn-worker-")
        self.log_path = os.path.join(self._dir, "stderr.log")  # the child's stdout + stderr, per start

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self.alive else None

    # ---- the call -----------------------------------------------------------------------------
    def check(self, target, case: Case) -> CheckResult:
        """`fuzz.run.harness.check(target, case, device)` in the child: its CheckResult, or one holding a
        KernelCrash / KernelHang."""
        name = _registered(target)
        if not self.alive:
            self.start()  # first call, or the last child crashed / hung / was discarded
        self.stats.calls += 1
        try:
            self._conn.send(("check", name, case))
            reply = self._receive(self.timeout)
        except OSError:  # the pipe broke under the send: the child died
            reply = _DIED
        except BaseException:  # interrupted while a reply is pending: never reuse this child
            self.stop(graceful=False)
            raise
        bucket = failure_bucket(target, case)
        if reply is _TIMEOUT:
            self.stats.hangs += 1
            tail = self._dump_stacks_and_kill()
            return _crashed(target, case, bucket, KernelHang(
                case, f"{name} did not return within {self.timeout:g} s; worker killed",
                cause="no return within the timeout"), f"its stacks at the timeout (stderr):\n{tail}")
        if reply is _DIED:
            self.stats.crashes += 1
            status = self._exit_status()
            self.stop(graceful=False)
            return _crashed(target, case, bucket, KernelCrash(
                case, f"{name} killed the worker process ({status})", cause=f"worker died ({normalized(status)})"),
                f"its last stderr lines:\n{self._tail()}")
        kind, payload, probe = reply
        if kind == "error" and poisoned(payload):  # a CUDA error of the kernel, surfaced outside the call
            self.stats.crashes += 1
            self.stop(graceful=False)
            return _crashed(target, case, bucket, KernelCrash(
                case, f"{name}: the CUDA context was poisoned during the check (raised outside the library call: the "
                      "kernel's error surfaced at a later CUDA call); worker discarded",
                cause="CUDA context poisoned (surfaced outside the call)"), f"the worker's traceback:\n{payload}")
        if kind == "error":
            raise WorkerError(f"{case!r}: the harness raised in the worker: {payload}")
        result: CheckResult = payload
        failure = result.failure
        if probe or (failure is not None and poisoned(failure.detail)):
            self.stats.crashes += 1
            self.stop(graceful=False)
            what = f"{failure.kind}: {failure.detail}" if failure else "the check passed"
            crash = KernelCrash(case, f"{name} poisoned the CUDA context ({what}"
                                f"{f'; health probe: {probe}' if probe else ''}); worker discarded",
                                cause=f"CUDA context poisoned ({failure.cause if failure else 'health probe'})")
            return dataclasses.replace(result, failure=Failure.from_exception(
                crash, bucket, (f"its last stderr lines:\n{self._tail()}",)))
        return result

    # ---- the process --------------------------------------------------------------------------
    def ensure_started(self) -> None:
        if not self.alive:
            self.start()

    def start(self) -> None:
        """(Re)start the child and wait until it has imported the harness."""
        self.stop(graceful=False)
        os.makedirs(self._dir, exist_ok=True)  # (again, after close())
        open(self.log_path, "w").close()
        ctx = multiprocessing.get_context("spawn")
        conn, child_conn = ctx.Pipe()
        proc = ctx.Process(target=_serve, args=(child_conn, self.overrides, self.device, self.env, self.log_path),
                           name=f"gdn-worker-{self.device}", daemon=True)
        began = time.perf_counter()
        proc.start()
        child_conn.close()  # only the child holds its end: its death reads as EOF here
        self._proc, self._conn = proc, conn
        self.stats.starts += 1
        reply = self._receive(max(self.timeout, STARTUP_TIMEOUT))
        if not (isinstance(reply, tuple) and reply[0] == "ready"):
            status = "no answer" if reply is _TIMEOUT else self._exit_status()
            self.stop(graceful=False)
            raise WorkerError(f"the {self.device} worker did not start ({status}); stderr:\n{self._tail()}")
        self.stats.start_seconds.append(time.perf_counter() - began)

    def stop(self, graceful: bool = True) -> None:
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if proc is None:
            return
        if graceful and proc.is_alive():
            try:
                conn.send(("stop",))
                proc.join(2.0)
            except OSError:
                pass
        if proc.is_alive():
            proc.kill()
        proc.join(5.0)
        conn.close()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self._dir, ignore_errors=True)

    def _receive(self, timeout: float):
        """The child's next message; _DIED if it died first, _TIMEOUT if nothing came in time."""
        deadline = time.monotonic() + timeout
        while True:
            if self._conn.poll():
                try:
                    return self._conn.recv()
                except (EOFError, OSError):
                    return _DIED
            left = deadline - time.monotonic()
            if left <= 0:
                return _TIMEOUT
            ready = wait([self._conn, self._proc.sentinel], left)
            if self._proc.sentinel in ready and not self._conn.poll():
                return _DIED

    def _exit_status(self) -> str:
        self._proc.join(2.0)
        code = self._proc.exitcode
        if code is None:
            return "closed its pipe, still running"
        if code < 0:
            try:
                return f"signal {signal.Signals(-code).name}"
            except ValueError:
                return f"signal {-code}"
        return f"exit code {code}"

    def _dump_stacks_and_kill(self) -> str:
        if hasattr(signal, "SIGUSR1") and self.alive:
            size = os.path.getsize(self.log_path)
            os.kill(self._proc.pid, signal.SIGUSR1)  # faulthandler.register'ed in the child
            for _ in range(20):  # up to 1 s for the dump to land
                time.sleep(0.05)
                if os.path.getsize(self.log_path) > size:
                    time.sleep(0.1)
                    break
        self.stop(graceful=False)
        return self._tail()

    def _tail(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(max(os.path.getsize(self.log_path) - 65536, 0))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            text = ""
        lines = [ln[:400] for ln in text.splitlines() if ln.strip() and not _NOISE.search(ln)][-STDERR_LINES:]
        return "\n".join(f"  | {ln}" for ln in lines) or "  | (nothing on stderr)"


def _registered(target) -> str:
    from fuzz.targets.registry import TARGETS

    name = getattr(target, "name", target)
    if name not in {t.name for t in TARGETS}:
        raise ValueError(f"isolated checks run registry targets only (fuzz.targets.registry.TARGETS); got {name!r}")
    return name


def _crashed(target, case: Case, bucket: str, error, note: str) -> CheckResult:
    return CheckResult(target.name, case, dispatch_bucket(target, case), Failure.from_exception(error, bucket, (note,)))


# ---- the child ----------------------------------------------------------------------------------
def _serve(conn, overrides: dict[str, str], device: str, env: dict[str, str], log_path: str) -> None:
    """Child main loop: ("check", target name, case) -> ("ok", CheckResult, probe) or ("error", text, probe)."""
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.dup2(log, 1)
    os.dup2(log, 2)  # sys.stdout / sys.stderr write to fds 1 / 2: now the log; so do C libraries
    faulthandler.enable(all_threads=True)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the parent, which kills this child
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    os.environ.update(env)
    from fuzz.run.harness import check
    from fuzz.targets.registry import TARGETS, set_overrides

    set_overrides(overrides)
    by_name = {t.name: t for t in TARGETS}
    conn.send(("ready", os.getpid()))
    while True:
        try:
            msg = conn.recv()
        except EOFError:  # the parent is gone
            return
        if msg[0] == "stop":
            return
        _, name, case = msg
        try:
            reply = ("ok", check(by_name[name], case, device))
        except Exception as e:  # noqa: BLE001 - reported to the parent, which raises WorkerError
            reply = ("error", "".join(traceback.format_exception(e)))
        conn.send((*reply, _probe(device)))


def _probe(device: str) -> str | None:
    """After a CUDA call: None if the context still works, else the error that says it does not."""
    if not device.startswith("cuda"):
        return None
    import torch

    if not torch.cuda.is_initialized():
        return None
    try:
        torch.cuda.synchronize()
        torch.ones(1, device=device).add_(1).item()
    except Exception as e:  # noqa: BLE001 - any failure here means the context is unusable
        return f"{type(e).__name__}: {e}"
    return None


# ---- session-wide workers -----------------------------------------------------------------------
_WORKERS: dict[tuple, Worker] = {}


def current_overrides() -> dict[str, str]:
    from fuzz.targets.registry import FAMILIES

    return {name: f.override for name, f in sorted(FAMILIES.items()) if f.override}


def worker_for(device: str, timeout: float | None = None) -> Worker:
    """The cached worker for the current family overrides and this device (restarted only after crashes)."""
    overrides = current_overrides()
    key = (tuple(overrides.items()), device)
    worker = _WORKERS.get(key)
    if worker is None:
        worker = _WORKERS[key] = Worker(overrides, device, DEFAULT_TIMEOUT if timeout is None else timeout)
    elif timeout is not None:
        worker.timeout = timeout
    return worker


def check_isolated(target, case: Case, device: str, timeout: float | None = None) -> CheckResult:
    """`fuzz.run.harness.check` through the cached worker."""
    return worker_for(device, timeout).check(target, case)


def stats() -> WorkerStats:
    """All workers of this process, summed."""
    total = WorkerStats(workers=0)
    for w in _WORKERS.values():
        total.workers += w.stats.starts > 0
        total.starts += w.stats.starts
        total.start_seconds += w.stats.start_seconds
        total.calls += w.stats.calls
        total.crashes += w.stats.crashes
        total.hangs += w.stats.hangs
    return total


def shutdown() -> None:
    while _WORKERS:
        _, worker = _WORKERS.popitem()
        worker.close()


atexit.register(shutdown)  # after multiprocessing's own exit hook was registered: runs before it
