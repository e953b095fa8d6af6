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

A dead child leaves no result, so it publishes where it is as it goes: the check's phase (STAGES: tensors, oracle,
warm-up call, kernel call, verdict, then its health probe) in one shared byte. A crash names that phase in its detail
and cause, and carries a `CrashAttribution` with the case the same child checked before. Kernels launch
asynchronously, so the phase is where the error surfaced, not always where it was made (an illegal address can
surface in the next case's tensors): `attributed` re-runs a distinct crash with CUDA_LAUNCH_BLOCKING=1 in fresh
workers, alone and after that previous case, to find the call that makes it.

A dead or discarded child is replaced lazily, on the next call: restarts happen only after crashes and
hangs, and Hypothesis shrinks a crash like any other failure (each crashing shrink step costs a restart).
A restart costs an interpreter and the torch import (about 1.5 s on a CPU machine) plus, on a GPU, a CUDA
context and loading compiled kernels: keep compile caches on disk (--gdn-kernel-cache; Triton: TRITON_CACHE_DIR,
FlashInfer's CuTe DSL objects: FLASHINFER_WORKSPACE_BASE); the child inherits the parent's environment, except that
each child gets a FlashInfer workspace of its own linked to the shared one, and what it compiled is published back
every PUBLISH_SECONDS and when it stops, when what others published comes in too (fuzz.run.kernel_cache: FlashInfer
compiles one kernel per module at a time per workspace). Workers are cached per (family overrides, device) and stopped
at exit.

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

from fuzz.judge.failures import GdnFailure, KernelCrash, KernelHang, normalized
from fuzz.model.case import Case
from fuzz.run import kernel_cache
from fuzz.run.harness import PHASES, dispatch_bucket, failure_bucket
from fuzz.run.result import CheckResult, CrashAttribution, Failure, in_phase
from fuzz.run.timeouts import DEFAULT_TIMEOUT

STARTUP_TIMEOUT = 300.0  # interpreter + torch + the fuzz package (no kernel compiles happen at start-up)
INHERITED_ENV = ("TRITON_INTERPRET",)  # set in the child before anything imports triton
# Error text after which a CUDA context is unusable (sticky errors). Out-of-memory is not one of them.
POISON_MARKERS = (
    "illegal memory access",
    "illegal address",
    "unspecified launch failure",
    "launch failure",
    "device-side assert",
    "misaligned address",
    "illegal instruction",
    "invalid program counter",
    "hardware stack error",
    "uncorrectable ecc",
    "launch timed out",
    "cuda_error_",
    "cudaerror",
)
STDERR_LINES = 20  # stderr tail quoted in a crash / hang report
STAGES = (*PHASES, "health probe")  # where a child can be while it serves a check, published by index
BLOCKING = {"CUDA_LAUNCH_BLOCKING": "1"}  # a kernel's error raises in the call that launched it
WORKSPACE = "FLASHINFER_WORKSPACE_BASE"  # the shared FlashInfer workspace; each child gets one of its own
PUBLISH_SECONDS = 10.0  # how often a child's new compiled kernels are published to the shared workspace, and the
# shared workspace's new ones linked into the child's

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
    first_seconds: list = field(default_factory=list)  # spawn until its first check's answer (compiles included)
    calls: int = 0
    crashes: int = 0  # deaths and poisoned contexts
    hangs: int = 0
    workers: int = 1

    @property
    def restarts(self) -> int:
        return max(self.starts - self.workers, 0)


class Worker:
    """One spawned child running `fuzz.run.harness.check` for one (family overrides, device)."""

    def __init__(
        self,
        overrides: dict[str, str],
        device: str,
        timeout: float = DEFAULT_TIMEOUT,
        env: dict[str, str] | None = None,
    ):
        """env: set in the child on top of INHERITED_ENV (BLOCKING for a crash's attribution)."""
        self.overrides, self.device, self.timeout = dict(overrides), device, timeout
        self.env = {**{k: os.environ[k] for k in INHERITED_ENV if k in os.environ}, **(env or {})}
        self.stats = WorkerStats()
        self._proc = self._conn = self._stage = None
        self._last = None  # (target name, case) the current child checked last: a crash's previous case
        self._workspace = self._shared = None  # the current child's own FlashInfer workspace, and the shared one
        self._began = None  # when the current child was started, until its first answer (perf_counter)
        self._published = 0.0  # when it was last published (monotonic)
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
        call, reply = self._round_trip(target, case)
        if reply is _TIMEOUT:
            return call.result(self._hung(call))
        if reply is _DIED:
            return call.result(self._died(call))
        kind, payload, ended, probe = reply
        if kind == "error":
            return call.result(self._raised(call, payload, ended))
        return self._answered(call, payload, ended, probe)

    def _round_trip(self, target, case: Case) -> tuple[_Call, object]:
        """Send the check to the child (started first where none is alive) and take its reply: ("ok" | "error",
        payload, the phase it ended in, the health probe's error), or _DIED / _TIMEOUT."""
        name = _registered(target)
        if not self.alive:
            self.start()  # first call, or the last child crashed / hung / was discarded
        self.stats.calls += 1
        if self._workspace and time.monotonic() - self._published > PUBLISH_SECONDS:
            self._publish()
        previous, self._last = self._last, (name, case)
        call = _Call(target, case, name, previous, time.perf_counter())
        try:
            self._conn.send(("check", name, case))
            return call, self._receive(self.timeout)
        except OSError:  # the pipe broke under the send: the child died
            return call, _DIED
        except BaseException:  # interrupted while a reply is pending: never reuse this child
            self.stop(graceful=False)
            raise

    def _hung(self, call: _Call) -> Failure:
        self.stats.hangs += 1
        tail = self._dump_stacks_and_kill()
        return call.failure(
            KernelHang,
            f"{call.name} did not return within {self.timeout:g} s; worker killed",
            "no return within the timeout",
            f"its stacks at the timeout (stderr):\n{tail}",
        )

    def _died(self, call: _Call) -> Failure:
        self.stats.crashes += 1
        status, phase = self._exit_status(), _stage(self._stage.value)
        self.stop(graceful=False)
        return call.failure(
            KernelCrash,
            f"{call.name} killed the worker process {in_phase(phase)} ({status})",
            f"worker died {in_phase(phase)} ({normalized(status)})",
            f"its last stderr lines:\n{self._tail()}",
            call.seen(phase),
        )

    def _raised(self, call: _Call, payload: str, ended: str | None) -> Failure:
        """The harness raised in the child: a CUDA error of the kernel that surfaced outside the call (a
        KernelCrash), else a WorkerError (ours, never a finding)."""
        if not poisoned(payload):
            raise WorkerError(f"{call.case!r}: the harness raised in the worker: {payload}")
        self.stats.crashes += 1
        self.stop(graceful=False)
        return call.failure(
            KernelCrash,
            f"{call.name}: the CUDA context was poisoned during the check (raised outside the library call, "
            f"{in_phase(ended)}: the kernel's error surfaced at a later CUDA call); worker discarded",
            f"CUDA context poisoned (surfaced outside the call, {in_phase(ended)})",
            f"the worker's traceback:\n{payload}",
            call.seen(ended),
        )

    def _answered(self, call: _Call, result: CheckResult, ended: str | None, probe: str | None) -> CheckResult:
        """The child's CheckResult, with the round trip's time beyond its phases; a KernelCrash instead of its
        failure where the library's call raised a CUDA error or the health probe found the context gone."""
        now = time.perf_counter()
        if self._began is not None:  # this child's first answer: its start-up plus its first example
            self.stats.first_seconds.append(now - self._began)
            self._began = None
        # the round trip beyond the child's phases: pickling, the pipe, the post-call health probe
        result = dataclasses.replace(
            result, phases={**result.phases, "ipc": max(now - call.sent - sum(result.phases.values()), 0.0)}
        )
        failure = result.failure
        raised = failure is not None and poisoned(failure.detail)  # the library's own call raised the CUDA error
        if not (probe or raised):
            return result
        self.stats.crashes += 1
        self.stop(graceful=False)
        phase = ended if raised else "health probe"
        what = f"{failure.kind}: {failure.detail}" if failure else "the check passed"
        crash = call.failure(
            KernelCrash,
            f"{call.name} poisoned the CUDA context {in_phase(phase)} ({what}"
            f"{f'; health probe: {probe}' if probe else ''}); worker discarded",
            f"CUDA context poisoned {in_phase(phase)}{f' ({failure.cause})' if failure else ''}",
            f"its last stderr lines:\n{self._tail()}",
            call.seen(phase),
        )
        return dataclasses.replace(result, failure=crash)

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
        self._stage, self._last = ctx.RawValue("b", -1), None  # a new child: no phase yet, no case before
        env = dict(self.env)
        self._shared = env.get(WORKSPACE) or os.environ.get(WORKSPACE)  # this worker's (a fresh one's) or the run's
        if self._shared:
            self._workspace, self._published = kernel_cache.private_workspace(self._shared), time.monotonic()
            env[WORKSPACE] = str(self._workspace)
        proc = ctx.Process(
            target=_serve,
            args=(child_conn, self.overrides, self.device, env, self.log_path, self._stage),
            name=f"gdn-worker-{self.device}",
            daemon=True,
        )
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
        self._began = began

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
        if self._workspace:  # what the child compiled outlives it, a crash included
            self._publish()
            shutil.rmtree(self._workspace, ignore_errors=True)
            self._workspace = None

    def _publish(self) -> None:
        """What the child compiled goes to the shared workspace, and what others published there (other workers, a
        warm-up running beside the run: fuzz.run.warming) comes into the child's, which then loads it instead of
        compiling it again."""
        kernel_cache.publish(self._workspace, self._shared)
        if self.alive:
            kernel_cache.publish(self._shared, self._workspace)
        self._published = time.monotonic()

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


@dataclass(frozen=True)
class _Call:
    """One check sent to the child: what a crash or a hang in it is reported with."""

    target: object
    case: Case
    name: str  # the target's registry name
    previous: tuple[str, Case] | None  # (target name, case) the same child checked just before (None: its first)
    sent: float  # perf_counter when it was sent

    def seen(self, phase: str | None) -> CrashAttribution:
        """What the crashing worker knows: the phase, and the case its child checked just before (with that case's
        target when it is another one: a worker serves every target of its device)."""
        if self.previous is None:
            return CrashAttribution(phase)
        before, case = self.previous
        return CrashAttribution(phase, case, None if before == self.name else before)

    def failure(
        self, kind: type[GdnFailure], detail: str, cause: str, note: str, seen: CrashAttribution | None = None
    ) -> Failure:
        """A failure the worker itself finds (the child gave no verdict): built as the value, never raised."""
        return Failure(kind.__name__, self.case, detail, cause, failure_bucket(self.target, self.case), (note,), seen)

    def result(self, failure: Failure) -> CheckResult:
        return CheckResult(self.target.name, self.case, dispatch_bucket(self.target, self.case), failure)


def _stage(index: int) -> str | None:
    return STAGES[index] if index >= 0 else None


# ---- attribution --------------------------------------------------------------------------------
def attributed(target, failure: Failure, device: str, timeout: float) -> Failure:
    """A KernelCrash with the call that makes it: the case alone in a fresh worker with CUDA_LAUNCH_BLOCKING=1
    (the kernel's error then raises in the launching call), and if it does not crash alone, the case its worker
    checked before it followed by the case, in another fresh one. Once per distinct failure: two worker starts at
    most. The detail gains the outcome in words."""
    from fuzz.targets.registry import TARGETS

    seen = failure.attribution
    alone = _first_crash(device, timeout, [(target, failure.case)])
    if alone is not None or seen.previous is None:
        found = dataclasses.replace(seen, alone=alone is not None, alone_phase=alone[1] if alone else None)
    else:
        before = next(t for t in TARGETS if t.name == (seen.previous_target or target.name))
        pair = _first_crash(device, timeout, [(before, seen.previous), (target, failure.case)])
        found = dataclasses.replace(
            seen,
            alone=False,
            after_previous=pair is not None,
            after_previous_phase=pair[1] if pair else None,
            previous_crashed=pair is not None and pair[0] == 0,
        )
    return dataclasses.replace(failure, detail=f"{failure.detail}; {found.summary}", attribution=found)


def _first_crash(device: str, timeout: float, checks: list) -> tuple[int, str | None] | None:
    """(which check, its phase) of the first KernelCrash when the (target, case) `checks` run in order in a fresh
    worker with CUDA_LAUNCH_BLOCKING=1; None when none crashes. Not the cached worker: its history is the question."""
    from fuzz.targets.registry import current_overrides

    fresh = Worker(current_overrides(), device, timeout, BLOCKING)
    try:
        for i, (target, case) in enumerate(checks):
            failure = fresh.check(target, case).failure
            if failure is not None and failure.kind == "KernelCrash":
                return i, failure.attribution.phase
        return None
    finally:
        fresh.close()


# ---- the child ----------------------------------------------------------------------------------
def _serve(conn, overrides: dict[str, str], device: str, env: dict[str, str], log_path: str, stage) -> None:
    """Child main loop: ("check", target name, case) -> ("ok", CheckResult, phase, probe) or ("error", text, phase,
    probe), phase: where the check ended. `stage` (a shared byte) holds the STAGES index it is in, for the parent to
    read if this process dies."""
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.dup2(log, 1)
    os.dup2(log, 2)  # sys.stdout / sys.stderr write to fds 1 / 2: now the log; so do C libraries
    faulthandler.enable(all_threads=True)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the parent, which kills this child
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    os.environ.update(env)
    os.environ[kernel_cache.BUILD_LOG] = os.path.join(os.path.dirname(log_path), f"builds-{os.getpid()}.jsonl")
    builds = kernel_cache.BuildLog(os.environ[kernel_cache.BUILD_LOG])
    from fuzz.run.harness import check
    from fuzz.targets.registry import TARGETS, overridden

    with overridden(overrides):  # for the process's life
        by_name = {t.name: t for t in TARGETS}

        def reached(phase: str) -> None:
            stage.value = STAGES.index(phase)

        conn.send(("ready", os.getpid()))
        while True:
            try:
                msg = conn.recv()
            except EOFError:  # the parent is gone
                return
            if msg[0] == "stop":
                return
            _, name, case = msg
            stage.value = -1
            try:
                result = check(by_name[name], case, device, reached)
                phases = kernel_cache.split_compile(result.phases, builds.take())
                reply = ("ok", dataclasses.replace(result, phases=phases))
            except Exception as e:  # noqa: BLE001 - reported to the parent, which raises WorkerError
                reply = ("error", "".join(traceback.format_exception(e)))
            ended = _stage(stage.value)
            reached("health probe")
            conn.send((*reply, ended, _probe(device)))


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


# ---- a session's workers -------------------------------------------------------------------------------------------
class WorkerPool:
    """The isolated workers of one session (fuzz.suite.session holds one), one per (family overrides, device): each
    starts at its first call and restarts only after a crash. All are closed at exit, before multiprocessing's own exit
    hook (registered earlier, so it runs later)."""

    def __init__(self):
        self._workers: dict[tuple, Worker] = {}
        atexit.register(self.close)

    def worker_for(self, device: str, timeout: float | None = None) -> Worker:
        """The worker for the current family overrides and this device."""
        from fuzz.targets.registry import current_overrides

        overrides = current_overrides()
        key = (tuple(overrides.items()), device)
        worker = self._workers.get(key)
        if worker is None:
            worker = self._workers[key] = Worker(overrides, device, DEFAULT_TIMEOUT if timeout is None else timeout)
        elif timeout is not None:
            worker.timeout = timeout
        return worker

    def check(self, target, case: Case, device: str, timeout: float | None = None) -> CheckResult:
        """`fuzz.run.harness.check` in the worker for `device`."""
        return self.worker_for(device, timeout).check(target, case)

    def stats(self) -> WorkerStats:
        """All of its workers, summed."""
        total = WorkerStats(workers=0)
        for w in self._workers.values():
            total.workers += w.stats.starts > 0
            total.starts += w.stats.starts
            total.start_seconds += w.stats.start_seconds
            total.first_seconds += w.stats.first_seconds
            total.calls += w.stats.calls
            total.crashes += w.stats.crashes
            total.hangs += w.stats.hangs
        return total

    def close(self) -> None:
        while self._workers:
            _, worker = self._workers.popitem()
            worker.close()
