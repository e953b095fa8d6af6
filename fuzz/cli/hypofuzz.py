"""`gdn-fuzz hypofuzz`: long campaigns of the fuzz tests under HypoFuzz (coverage-guided, with its dashboard).

    gdn-fuzz hypofuzz [--workers N] [--seconds S] [--dashboard [--port P]] -- PYTEST_ARGS

PYTEST_ARGS select the fuzz tests and the run as for pytest (a profile with an example database: dev, h200, b200,
or any profile with --gdn-db; ci keeps none). HypoFuzz's own `hypothesis fuzz` does not fit these tests:
it forks its workers from a process whose collection has already asked CUDA about the device, and a forked child
cannot use CUDA; and its hub gives up after 60 s if no worker has finished 100 inputs, which compile-heavy GPU
tests do not. So this command collects the tests once, then starts HypoFuzz's worker loop in fresh processes of
its own, each pinned to one GPU (CUDA_VISIBLE_DEVICES, round robin over the visible ones) and each taking every
N-th test. The workers share the example database, where HypoFuzz keeps its corpus and its shrunk failures, under
the keys a plain pytest run replays first: a failure found here fails `pytest PYTEST_ARGS` on its first example.
A worker that dies is restarted (a crash outside --gdn-isolate); one whose tests have all failed stops.

The tests run as their plain Hypothesis body (fuzz.suite.session: no rounds, no time box; every case checked, so
coverage is stable). Under --gdn-isolate HypoFuzz sees the coverage of the test body and the strategies, not of the
check itself, which runs in the isolated worker; its behaviours then come from the check's events and the
error-to-bound ratio (hypothesis.target). A still-failing stored failure stops its test at once (HypoFuzz fuzzes a
test until its first failure): mask or fix it to fuzz on.

While it runs, the progress of `gdn-fuzz campaign` and `gdn-fuzz gate` (fuzz.run.progress), one run per worker:
each worker writes progress events (fuzz.run.events) of its own, outside pytest, since HypoFuzz's loop switches among
its tests batch by batch and no test starts or finishes as pytest knows it: a test starts when HypoFuzz first picks it,
counts the inputs it ran (at most once a second), and finishes FAILED when it stored a failure (HypoFuzz fuzzes it no
further). On a terminal a table redrawn in place; otherwise a line per finished test and one every 30 s per test in
flight, with its inputs and inputs per second.

At the end, a table per test: inputs this campaign ran, shrunk failures stored. Exit 1 when a failure is stored, 5
when a test got no input (it was not fuzzed: listed as NOT FUZZED), else 0.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from fuzz.cli.parser import Parser
from fuzz.run.events import EventLog
from fuzz.run.progress import Progress, Watch

STOP_GRACE = 10.0  # seconds a worker gets to flush its database writes after SIGINT
RESTARTS = 3  # per worker, after it died


def main(argv: list[str]) -> int:
    split = argv.index("--") if "--" in argv else len(argv)
    args = _parser().parse_args(argv[:split])
    pytest_args = argv[split + 1 :]
    if args.worker:
        return _work(args.worker, pytest_args, args.events)
    try:
        from hypofuzz.collection import collect_tests
    except ImportError as e:
        print(f"gdn-fuzz hypofuzz: needs HypoFuzz (pip install 'gdn-fuzz[hypofuzz]'): {e}", file=sys.stderr)
        return 2
    collected = collect_tests(pytest_args)
    from hypothesis import settings

    if settings().database is None:
        print(
            "gdn-fuzz hypofuzz: HypoFuzz keeps its corpus and failures in the example database, and this profile "
            "has none: use --hypothesis-profile=dev, h200 or b200, or add --gdn-db DIR|redis://HOST:PORT",
            file=sys.stderr,
        )
        return 2
    nodeids = [t.nodeid for t in collected.fuzz_targets]
    for nodeid, why in collected.not_collected.items():
        print(f"not fuzzed: {nodeid}: {why.get('reason') or why['status_reason']}")
    if not nodeids:
        print(f"gdn-fuzz hypofuzz: no fuzz test to run with pytest arguments {pytest_args}", file=sys.stderr)
        return 2
    from fuzz.suite.device import visible_gpus

    gpus = visible_gpus()
    workers = args.workers or max(len(gpus), 1)
    shares = [nodeids[i::workers] or [nodeids[i % len(nodeids)]] for i in range(workers)]
    print(f"fuzzing {len(nodeids)} test(s) with {workers} worker(s)" + (f" on GPUs {','.join(gpus)}" if gpus else ""))
    started = time.time()
    dashboard = _start_dashboard(args.port, pytest_args) if args.dashboard else None
    try:
        with tempfile.TemporaryDirectory(prefix="gdn-hypofuzz-") as out:
            _run_workers(shares, gpus, pytest_args, args.seconds, Path(out))
    finally:
        if dashboard is not None:
            _stop([dashboard], signal.SIGTERM)  # it keeps nothing; SIGTERM ends its server quietly
    return _summary(collected.fuzz_targets, started, pytest_args)


def _parser() -> Parser:
    p = Parser(prog="gdn-fuzz hypofuzz", description=__doc__.split("\n\n")[0], epilog="pytest arguments go after --")
    p.add_argument("--workers", type=int, default=None, help="worker processes (default: one per visible GPU, or 1)")
    p.add_argument("--seconds", type=float, default=None, help="stop after this long (default: run until Ctrl-C)")
    p.add_argument("--dashboard", action="store_true", help="serve HypoFuzz's dashboard while fuzzing")
    p.add_argument("--port", type=int, default=9999, help="the dashboard's port (default 9999)")
    p.add_argument("--worker", nargs="+", metavar="NODEID", help=argparse.SUPPRESS)  # one worker process's tests
    p.add_argument("--events", type=Path, help=argparse.SUPPRESS)  # where that worker writes its progress events
    return p


def _hypothesis_compat() -> None:
    """HypoFuzz 25.11.1 carries the explain phase's comments of a shrunk failure over as `slice_comments`, which
    Hypothesis 6.157.1 renamed `span_comments` (keyed by span); without the old name its worker dies at the first
    failure it shrinks. The old name reads and writes the new field, as Hypothesis's own carry-over does."""
    from hypothesis.internal.conjecture.data import ConjectureData, ConjectureResult

    if hasattr(ConjectureResult, "slice_comments"):
        return
    ConjectureResult.slice_comments = property(lambda self: self.span_comments)
    ConjectureData.slice_comments = property(
        lambda self: self.span_comments, lambda self, comments: setattr(self, "span_comments", comments)
    )


# ---- the launcher -------------------------------------------------------------------------------------------------
def _spawn(nodeids: list[str], gpu: str | None, pytest_args: list[str], events: Path) -> subprocess.Popen:
    env = dict(os.environ, **({"CUDA_VISIBLE_DEVICES": gpu} if gpu is not None else {}))
    return subprocess.Popen(
        [sys.executable, "-m", "fuzz.cli.hypofuzz", "--worker", *nodeids, "--events", str(events), "--", *pytest_args],
        env=env,
        start_new_session=True,
    )


def _run_workers(
    shares: list[list[str]], gpus: list[str], pytest_args: list[str], seconds: float | None, out: Path
) -> None:
    """Run the workers until they are done, `seconds` pass or Ctrl-C, showing each one's progress from its events."""
    gpu = [gpus[i % len(gpus)] if gpus else None for i in range(len(shares))]
    watches = [Watch.of(f"worker {i}", out) for i in range(len(shares))]
    procs = [_spawn(share, gpu[i], pytest_args, watches[i].events) for i, share in enumerate(shares)]
    for watch, proc in zip(watches, procs, strict=True):
        watch.begin(proc)
    restarts = [0] * len(procs)
    deadline = None if seconds is None else time.monotonic() + seconds
    try:
        with Progress(watches) as progress:
            while any(p.poll() is None for p in procs) and (deadline is None or time.monotonic() < deadline):
                progress.update()
                time.sleep(0.5)
                for i, p in enumerate(procs):
                    if p.poll() not in (None, 0) and restarts[i] < RESTARTS:
                        restarts[i] += 1
                        print(
                            f"worker {i} died (status {p.returncode}; --gdn-isolate makes a crash a KernelCrash "
                            f"finding): restart {restarts[i]} of {RESTARTS}",
                            file=sys.stderr,
                        )
                        procs[i] = watches[i].proc = _spawn(shares[i], gpu[i], pytest_args, watches[i].events)
    except KeyboardInterrupt:
        pass
    finally:
        _stop(procs)


def _stop(procs: list[subprocess.Popen], sig: int = signal.SIGINT) -> None:
    """`sig` to each process group (on SIGINT a worker exits normally, flushing its pending database writes), SIGKILL
    to a group still there after STOP_GRACE."""
    for p in procs:
        _signal_group(p, sig)
    end = time.monotonic() + STOP_GRACE
    for p in procs:
        try:
            p.wait(max(end - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            _signal_group(p, signal.SIGKILL)
            p.wait()


def _signal_group(p: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(p.pid, sig)  # each child leads a session of its own (start_new_session)
    except ProcessLookupError:
        pass


def _start_dashboard(port: int, pytest_args: list[str]) -> subprocess.Popen:
    """HypoFuzz's dashboard process: it collects the tests itself and reads the database."""
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from hypothesis.extra.cli import main; main()",
            "fuzz",
            "--dashboard-only",
            "--port",
            str(port),
            "--",
            *pytest_args,
        ],
        start_new_session=True,
    )


@dataclass(frozen=True)
class Fuzzed:
    """One test's share of a campaign, read from the shared database."""

    nodeid: str
    inputs: int  # inputs this campaign ran on it (every worker's last report)
    failures: tuple[str, ...]  # each shrunk failure stored, as its exception line


NOTHING_RAN = 5  # as pytest's status when no test ran: a test of the campaign got no input


def _summary(targets, started: float, pytest_args: list[str]) -> int:
    """Per test, from the shared database: inputs this campaign ran, and each shrunk failure stored (found here or
    on another host)."""
    from hypofuzz.database import FailureState, HypofuzzDatabase
    from hypothesis import settings

    db = HypofuzzDatabase(settings().database)
    rows = []
    for target in targets:
        latest: dict = {}  # worker -> its last report of this campaign (reports are cumulative per worker)
        for report in db.reports.fetch(target.database_key):
            if report.timestamp >= started and report.elapsed_time >= latest.get(report.worker_uuid, (0.0, 0))[0]:
                latest[report.worker_uuid] = (report.elapsed_time, sum(report.status_counts.values()))
        failures = [
            db.failure_observations(state=FailureState.SHRUNK).fetch(target.database_key, choices)
            for choices in db.failures(state=FailureState.SHRUNK).fetch(target.database_key)
        ]
        rows.append(
            Fuzzed(
                target.nodeid,
                sum(n for _, n in latest.values()),
                tuple(_message(o.metadata.traceback or o.status_reason) for o in failures if o)
                + ("(a failure whose observation was not stored)",) * failures.count(None),
            )
        )
    return verdict(rows, pytest_args)


def verdict(rows: list[Fuzzed], pytest_args: list[str]) -> int:
    """Print the campaign's table; exit 1 when a failure is stored, else 5 when a test got no input (it was not
    fuzzed: a green campaign means every test ran), else 0."""
    print("gdn-fuzz hypofuzz:")
    for row in rows:
        print(f"  {row.nodeid}: {row.inputs} input(s), {len(row.failures)} failure(s)")
        for message in row.failures:
            print(f"    {message}")
    starved = [row.nodeid for row in rows if not row.inputs and not row.failures]
    if starved:
        print(
            f"NOT FUZZED: {len(starved)} of {len(rows)} test(s) got no input in this campaign (more --seconds, or "
            f"--workers, give each its turn): {', '.join(starved)}"
        )
    if any(row.failures for row in rows):
        print(f"replay them: pytest {shlex.join(pytest_args)} (stored failures run first)")
        return 1
    return NOTHING_RAN if starved else 0


def _message(traceback: str) -> str:
    """The exception line(s) of a pytest-style traceback ('E   ...'), or its last line."""
    lines = [ln[1:].strip() for ln in traceback.splitlines() if ln.startswith("E ")]
    return " ".join(lines)[:1000] if lines else traceback.strip().splitlines()[-1][:1000]


# ---- one worker process -------------------------------------------------------------------------------------------
def _work(nodeids: list[str], pytest_args: list[str], events: Path | None) -> int:
    """HypoFuzz's FuzzWorker on these tests, in this process, until interrupted or every test has failed."""
    _hypothesis_compat()
    from hypofuzz import detection
    from hypofuzz.hypofuzz import FuzzWorker

    from fuzz.targets.registry import overridden, parse_overrides

    reporter = None if events is None else Reporter(EventLog(events), len(nodeids))

    class Worker(FuzzWorker):
        @property
        def valid_targets(self):
            """Its loop asks before each batch of inputs (never inside one): with nothing left to fuzz it would spin."""
            targets = super().valid_targets
            if self.targets and not targets:
                raise EveryTestFailed
            return targets

        def _switch_to_target(self, target) -> None:
            super()._switch_to_target(target)
            if reporter is not None:
                reporter.follow(target)

    detection._in_hypofuzz_run = True  # what `hypothesis fuzz` sets: tests may ask hypofuzz.detection
    worker = Worker(
        pytest_args=pytest_args,
        shared_state={
            "hub_state": {"nodeids": set(nodeids)},
            "worker_state": {"nodeids": {}, "current_lifetime": 0.0, "expected_lifetime": 0.0, "valid_nodeids": []},
        },
    )
    # HypoFuzz runs the tests after its pytest collection has ended, when the plugin has put the families back: the
    # worker holds the run's --gdn-target overrides for as long as it fuzzes.
    known, _ = _targets_parser().parse_known_args(pytest_args)
    try:
        with overridden(parse_overrides(known.gdn_target)):
            worker.start()  # loops until one of these
    except (EveryTestFailed, KeyboardInterrupt):
        pass
    return 0


def _targets_parser() -> argparse.ArgumentParser:
    """The --gdn-target options among pytest's arguments (the plugin refused bad ones when the hub collected)."""
    p = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    p.add_argument("--gdn-target", action="append", default=[])
    return p


class Reporter:
    """A worker's progress events: HypoFuzz runs the tests from its own loop, not pytest's, so the plugin's start and
    finish hooks never fire there. A test starts when the worker first switches to it; each input it runs (one
    `run_one`, with the shrinking of a failure it found) counts; it finishes FAILED once it has a failure, which ends
    its fuzzing."""

    def __init__(self, log: EventLog, tests: int):
        self.log, self.inputs, self.failed = log, {}, set()
        self.log.emit("session", tests=tests)

    def follow(self, target) -> None:
        """Count the inputs of this HypoFuzz FuzzTarget from now on (once per target)."""
        nodeid = target.nodeid
        if nodeid in self.inputs:
            return
        self.inputs[nodeid] = 0
        self.log.emit("start", test=nodeid)
        run_one = target.run_one

        def counted() -> None:
            try:
                run_one()
            finally:
                self.ran(target)

        target.run_one = counted

    def ran(self, target) -> None:
        nodeid = target.nodeid
        if nodeid in self.failed:  # finished: HypoFuzz runs no more inputs of a test with a failure
            return
        self.inputs[nodeid] += 1
        if target.has_found_failure:
            self.failed.add(nodeid)
            self.log.emit(
                "finish", test=nodeid, outcome="FAILED", examples=self.inputs[nodeid], failures=1, stop="done"
            )
        else:
            self.log.count(nodeid, self.inputs[nodeid], 0)


class EveryTestFailed(Exception):
    """Each test a worker holds has a failure (HypoFuzz fuzzes a test until its first)."""


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
