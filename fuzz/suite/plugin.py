"""The pytest side of a fuzz run: options, the session, target parametrization, fuzz tests run in rounds, corpus
entries and sanitizer reports for findings, the run summary and --gdn-report, merged over pytest-xdist workers, and
the progress events (--gdn-events, fuzz.suite.event_hooks).

The session (fuzz.suite.session.FuzzSession) is kept on pytest's config (`session_of`), never in a module global: the
hooks read it there, and each fuzz and serving test is given it as a parameter beside its target (`gdn_session`), so
that its body takes no pytest fixture and HypoFuzz can run it as it is.

This module is gdn-fuzz's pytest11 entry point, so pytest loads it wherever gdn-fuzz is installed. It is dormant
until fuzz/conftest.py wakes it (`wake`): a run that collects none of the fuzz suites gets the --gdn-* options and
nothing else (no profiles registered, no configure-time checks, no summary, no exit 5, no GPU chosen). Where no
entry point loaded it (a checkout on PYTHONPATH, PYTEST_DISABLE_PLUGIN_AUTOLOAD), `wake` registers it, once.

Bad input is refused at configure time with one line and pytest's usage-error exit (4): an unknown profile, a GPU
profile without a GPU, an override module that does not import, an unknown family, an unknown mask policy, a count
or time box out of range, a report or live log in a directory that does not exist, a live log to resume that is not
one, a corpus that does not load. A run in which fuzz tests were selected but no example was checked exits 5: a green
run means something ran.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter, defaultdict
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fuzz.generate.profiles import PROFILES, database, register_profiles, unknown_profile
from fuzz.model.known_bugs import MASK_POLICIES
from fuzz.run import kernel_cache
from fuzz.run.events import EventLog, path_for
from fuzz.run.report import FailedTest, RunReport, merge_parts
from fuzz.run.worker import DEFAULT_TIMEOUT
from fuzz.suite.session import FuzzSession, Options, resumable

NOTHING_RAN = 5  # pytest's "no tests collected" status: fuzz tests were selected, none checked an example
OURS = pytest.StashKey[bool]()  # fuzz/conftest.py woke the plugin: the fuzz suites are in this run
SESSION = pytest.StashKey[FuzzSession]()


@dataclass
class Workers:
    """What an xdist controller learns from its workers as each one goes down."""

    fuzz_tests: int = 0  # fuzz tests they collected (each worker's sessionfinish says)
    merged: set[str] = field(default_factory=set)  # the workers whose final report pytest_testnodedown merged


WORKERS = pytest.StashKey[Workers]()


def wake(pluginmanager) -> None:
    """fuzz/conftest.py's call as it loads (its pytest_addoption, before the command line is acted on): register
    this module where no entry point did (pluggy refuses a module registered twice), register the gdn-fuzz Hypothesis
    profiles, and mark the run as ours."""
    module = sys.modules[__name__]
    if not pluginmanager.is_registered(module):
        pluginmanager.register(module, "gdn_fuzz")
    register_profiles()
    pluginmanager.get_plugin("pytestconfig").stash[OURS] = True


def _ours(config) -> bool:
    return config.stash.get(OURS, False)


def _session(config) -> FuzzSession | None:
    return config.stash.get(SESSION, None)


def session_of(config) -> FuzzSession:
    """The run's session, which pytest_configure keeps on the config (for fuzz/test_corpus.py's parameters)."""
    if (session := _session(config)) is None:
        raise RuntimeError("no gdn-fuzz session: run the fuzz tests through pytest (fuzz/conftest.py configures it)")
    return session


def pytest_addoption(parser):
    group = parser.getgroup("gdn-fuzz")
    add = group.addoption
    add(
        "--gdn-target",
        action="append",
        default=[],
        metavar="FAMILY=module.path[:attr]",
        help="fuzz an importable module exposing a family's API (flashinfer, fla, sglang) instead of the installed "
        "library; it runs on the profile's device",
    )
    add(
        "--gdn-require",
        default="",
        metavar="FAMILY,...",
        help="families that must be available: if one cannot be loaded, the run stops before it starts, with one line "
        "(a usage error); a target the loaded release or this GPU cannot run is still reported unavailable",
    )
    add(
        "--gdn-report",
        default=None,
        metavar="FILE.json",
        help="write the run report (examples per target and operation, unavailable targets and why, every distinct "
        "failure with its minimal coordinate, one record per example) as JSON; rewritten after every test",
    )
    add(
        "--gdn-corpus-out",
        default=None,
        metavar="DIR",
        help="write each distinct shrunk failure as a new corpus entry (JSON) into DIR (never over an existing one)",
    )
    add(
        "--gdn-corpus",
        default=None,
        metavar="DIR",
        help="the corpus to replay (default: the checkout's or the installed package's corpus)",
    )
    add(
        "--gdn-shards",
        type=int,
        default=1,
        metavar="K",
        help="run each fuzz test as K shards (own seeds and time boxes), so pytest-xdist has K times the tests to "
        "spread over its workers",
    )
    add("--gdn-examples", type=int, default=None, metavar="N", help="examples per fuzz test (default: the profile's)")
    add(
        "--gdn-test-seconds",
        type=float,
        default=None,
        metavar="SECONDS",
        help="time box per fuzz test: no example is checked after it, except to shrink a failure found in the "
        "last round (--gdn-shrink-seconds)",
    )
    add(
        "--gdn-shrink-seconds",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="with --gdn-test-seconds: how long a round may check new cases after its first failure (default 120)",
    )
    add(
        "--gdn-no-shrink",
        action="store_true",
        default=False,
        help="report each distinct failure's first case, without shrinking (triage runs)",
    )
    add(
        "--gdn-masks",
        default="release",
        choices=MASK_POLICIES,
        help="known-bug masks (fuzz/targets/known_bugs.py): 'release' masks the bugs known for the installed "
        "release (default), 'all' every known bug (the upgrade gate), 'none' none (hunting)",
    )
    add("--gdn-unmask", action="store_const", const="none", dest="gdn_masks", help="the same as --gdn-masks=none")
    add(
        "--gdn-db",
        default=None,
        metavar="DIR|redis://HOST:PORT",
        help="the Hypothesis example database: a directory, or a redis server shared across hosts",
    )
    add(
        "--gdn-live-log",
        default=None,
        metavar="FILE",
        help="append every failing example to FILE as it happens, one JSON line each (survives a killed run)",
    )
    add(
        "--gdn-resume",
        default=None,
        metavar="LIVE_LOG",
        help="the --gdn-live-log of an earlier run: before its rounds, each fuzz test shrinks the failures that run "
        "logged on its target and operation and did not report minimal (a shrink its time box cut off)",
    )
    add(
        "--gdn-isolate",
        action="store_true",
        default=False,
        help="run each check in a worker process restarted after a crash or hang (KernelCrash, KernelHang) instead "
        "of in pytest's process; use it on the GPU profiles: an illegal memory access poisons the CUDA context",
    )
    add(
        "--gdn-timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"with --gdn-isolate: seconds one check may take before it is a KernelHang (default {DEFAULT_TIMEOUT:g})",
    )
    add(
        "--gdn-kernel-cache",
        default=None,
        metavar="DIR",
        help="keep compiled kernels under DIR, one directory per library release (default: "
        "$XDG_CACHE_HOME/gdn-fuzz/kernels); restore it in CI, keyed by the library versions and the GPU arch",
    )
    add(
        "--gdn-workers",
        default=None,
        metavar="N|auto",
        help="pytest-xdist workers (needs pytest-xdist); 'auto' on a GPU profile: the count where distinct cases per "
        "minute peaked for this GPU kind, capped by its free memory and the cores (fuzz.run.workers); "
        "-n auto picks the same on a GPU profile",
    )
    add(
        "--gdn-sanitize",
        action="store_true",
        default=False,
        help="re-run each shrunk KernelCrash / GuardBreach under compute-sanitizer memcheck and attach its report",
    )
    add(
        "--gdn-events",
        default=None,
        metavar="FILE.jsonl",
        help="append progress events to FILE, one JSON line each (fuzz.run.events): tests selected, each test's "
        "start, its examples about once a second, its finish; an xdist worker writes FILE.gwN",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """--gdn-workers: set pytest-xdist's worker count before xdist reads it (this conftest's hook runs before
    xdist's: pluggy calls the later-registered first)."""
    if not _ours(config) or (value := config.getoption("gdn_workers", None)) is None or hasattr(config, "workerinput"):
        return  # (an xdist worker gets the controller's options: it runs no workers of its own)
    if not config.pluginmanager.hasplugin("xdist"):
        raise pytest.UsageError(f"--gdn-workers={value}: needs pytest-xdist (pip install pytest-xdist)")
    try:
        config.option.numprocesses = _workers(config, value)
    except ValueError as e:
        raise pytest.UsageError(str(e)) from e


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """-n auto on a GPU profile: the gdn-fuzz count (fuzz.run.workers); on a CPU profile, xdist's own."""
    profile = config.getoption("hypothesis_profile", None) or "dev"
    if not _ours(config) or profile not in PROFILES or PROFILES[profile].device == "cpu":
        return None
    try:
        return _workers(config, "auto")
    except ValueError:
        return None


def _workers(config, value: str) -> int:
    from fuzz.run.workers import resolve

    profile = config.getoption("hypothesis_profile", None) or "dev"
    return resolve(value, PROFILES[profile].device if profile in PROFILES else "cpu")  # configure refuses it


@pytest.hookimpl(tryfirst=True)  # before Hypothesis's own, which meets an unknown profile with a traceback (exit 3)
def pytest_configure(config):
    if not _ours(config):
        return
    from hypothesis import settings

    # no profile: the dev profile's settings too, not Hypothesis's default (nor its own "ci" under $CI)
    profile = config.getoption("hypothesis_profile", None) or "dev"
    if profile not in PROFILES:
        raise pytest.UsageError(f"--hypothesis-profile={profile}: {unknown_profile(profile)}")
    _check_numbers(config)
    _check_paths(config)
    _check_resume(config)
    budget = PROFILES[profile].budget
    if budget.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before any target imports triton
    else:
        _select_gpu_for_xdist_worker()  # before anything initializes CUDA
        import torch

        if not torch.cuda.is_available():
            raise pytest.UsageError(
                f"--hypothesis-profile={profile} runs on a CUDA GPU, and torch "
                f"{torch.__version__} sees none here; use --hypothesis-profile=ci or dev"
            )
    try:
        cache = kernel_cache.configure(config.getoption("gdn_kernel_cache"))  # before any target loads its library
    except ValueError as e:
        raise pytest.UsageError(str(e)) from e
    from fuzz.targets.registry import FAMILIES, overridden, parse_overrides  # after TRITON_INTERPRET is settled

    try:
        overrides = parse_overrides(config.getoption("gdn_target"))
        restore = ExitStack()  # the families go back to what they were when the run ends (pytest_unconfigure)
        restore.enter_context(overridden(overrides))
    except ValueError as e:
        raise pytest.UsageError(str(e)) from e
    config.add_cleanup(restore.close)
    for family in overrides:
        try:
            FAMILIES[family].api()
        except Exception as e:  # an override the user named must load
            raise pytest.UsageError(f"--gdn-target {family}={overrides[family]}: {e}") from e
    required = frozenset(f for f in config.getoption("gdn_require").split(",") if f)
    if unknown := required - set(FAMILIES):
        raise pytest.UsageError(
            f"--gdn-require: unknown famil{'y' if len(unknown) == 1 else 'ies'} "
            f"{', '.join(sorted(unknown))}; expected some of {', '.join(sorted(FAMILIES))}"
        )
    for family in sorted(required):
        try:
            FAMILIES[family].api()
        except Exception as e:  # a family the user requires must load: its reason, in one line
            raise pytest.UsageError(f"--gdn-require={family}: {family} cannot be loaded here: {e}") from e
    _check_corpus(config)
    if spec := config.getoption("gdn_db"):
        try:
            db = database(spec)
        except ValueError as e:
            raise pytest.UsageError(str(e)) from e
        settings.register_profile(profile, parent=settings.get_profile(profile), database=db)
    settings.load_profile(profile)  # Hypothesis's plugin loads it again after this hook, to the same effect
    given = config.getoption("gdn_test_seconds")
    options = Options(
        isolate=config.getoption("gdn_isolate"),
        timeout=config.getoption("gdn_timeout"),
        test_seconds=given,
        bound_seconds=None if given else PROFILES[profile].time_box,
        shrink_seconds=config.getoption("gdn_shrink_seconds"),
        examples=config.getoption("gdn_examples"),
        shrink=not config.getoption("gdn_no_shrink"),
        masks=config.getoption("gdn_masks"),
        live_log=Path(p) if (p := config.getoption("gdn_live_log")) else None,
        seed=_int_or_none(config.getoption("hypothesis_seed", None)),
        resume=Path(p) if (p := config.getoption("gdn_resume")) else None,
        kernel_cache=cache,
    )
    session = config.stash[SESSION] = FuzzSession(profile, budget, options)
    config.stash[WORKERS] = Workers()
    config.pluginmanager.register(FailedTests(session), "gdn_fuzz_failed_tests")
    examples = (
        f"{options.examples} examples per fuzz test (--gdn-examples)"
        if options.examples
        else f"{settings.default.max_examples} examples per fuzz test (the {profile} profile's)"
    )
    session.report.time_box = (
        examples
        + "; "
        + (
            f"time box: {given:g} s per fuzz test (--gdn-test-seconds), then up to {options.shrink_seconds:g} s to "
            "shrink what its last round found"
            if given
            else f"time bound: {options.bound_seconds:g} s per fuzz test, shrinking "
            f"included (the {profile} profile's; --gdn-test-seconds sets a time box)"
        )
    )


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session):
    """--gdn-events: written by the process that runs the tests (not an xdist controller: its workers do)."""
    fuzz, config = _session(session.config), session.config
    if fuzz is None or not (path := config.getoption("gdn_events")) or config.pluginmanager.has_plugin("dsession"):
        return
    from fuzz.suite.event_hooks import TestEvents

    worker = getattr(config, "workerinput", {}).get("workerid")
    fuzz.events = EventLog(path_for(Path(path), worker))
    config.pluginmanager.register(TestEvents(config, fuzz), "gdn_fuzz_events")


# Numeric options: (the least value, whether it is allowed).
_LEAST = {
    "gdn_shards": (1, True),
    "gdn_examples": (1, True),
    "gdn_test_seconds": (0, False),
    "gdn_shrink_seconds": (0, True),
    "gdn_timeout": (0, False),
}


def _check_numbers(config) -> None:
    for name, (least, allowed) in _LEAST.items():
        value = config.getoption(name, None)
        if value is not None and (value < least or value == least and not allowed):
            raise pytest.UsageError(
                f"--{name.replace('_', '-')}={value:g}: expected a number {'>=' if allowed else '>'} {least}"
            )


def _check_paths(config) -> None:
    """Files the run writes as it goes: their directories must exist before the first example, not after it."""
    for name in ("gdn_report", "gdn_live_log", "gdn_events"):
        if (path := config.getoption(name)) and not Path(path).resolve().parent.is_dir():
            raise pytest.UsageError(
                f"--{name.replace('_', '-')}={path}: no directory {Path(path).parent} to write it in"
            )


def _check_resume(config) -> None:
    """Every fuzz test reads the live log to resume: a missing or unreadable one stops the run here."""
    if not (path := config.getoption("gdn_resume")):
        return
    if not Path(path).is_file():
        raise pytest.UsageError(f"--gdn-resume={path}: no such file (the --gdn-live-log of an earlier run)")
    try:
        resumable(Path(path), "", "")  # every line read as a test reads it (none is on target "")
    except (ValueError, KeyError, TypeError) as e:
        raise pytest.UsageError(f"--gdn-resume={path}: not a --gdn-live-log ({type(e).__name__}: {e})") from None


def _check_corpus(config) -> None:
    """A corpus that cannot be replayed stops the run here, in one line (during collection it would be a
    traceback)."""
    from fuzz.run import corpus

    directory = config.getoption("gdn_corpus")
    try:
        corpus.load_all(Path(directory) if directory else None)
    except corpus.CorpusError as e:
        raise pytest.UsageError(str(e)) from None


def _int_or_none(value) -> int | None:
    try:
        return None if value is None else int(value)
    except ValueError:
        raise pytest.UsageError(f"--hypothesis-seed={value}: expected an integer") from None


def _select_gpu_for_xdist_worker() -> None:
    """Under pytest-xdist on a host with several GPUs, worker gwN runs on GPU N mod count (of those CUDA_VISIBLE_DEVICES
    lists, if it is set), so `-n` a multiple of the GPUs puts as many workers on each. It must run before anything
    initializes CUDA: torch.cuda.device_count() asks NVML and leaves CUDA uninitialized."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")  # is_available() through NVML as well
    if len(devices := visible_gpus()) > 1:
        os.environ["CUDA_VISIBLE_DEVICES"] = devices[int(worker.removeprefix("gw")) % len(devices)]


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES entries, without initializing CUDA."""
    if (visible := os.environ.get("CUDA_VISIBLE_DEVICES")) is not None:
        return [d.strip() for d in visible.split(",") if d.strip()]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


def pytest_generate_tests(metafunc):
    spec = getattr(metafunc.function, "gdn", None)
    op = spec.op if spec else None
    serving = getattr(metafunc.function, "gdn_serving", False)  # fuzz.suite.serving: every op of a target, one pool
    if (
        (op is None and not serving)
        or "target" not in metafunc.fixturenames
        or (session := _session(metafunc.config)) is None
    ):
        return
    from fuzz.targets.registry import TARGETS, targets_for

    large = spec.large if spec else False
    params = []
    for target in TARGETS if serving else targets_for(op):
        if large and not target.support.pool:
            continue  # no pool, no slot offsets to overflow
        reason = session.reason_unavailable(target)
        masks = (
            []
            if reason
            else [session.masked_reason(target, o) for o in (sorted(target.support.ops) if serving else [op])]
        )
        masked = bool(masks) and all(masks) and "; ".join(masks)  # serving: unavailable once every op is masked
        if large and not reason:
            reason = session.large_unavailable(target, op)
        marks = []
        if reason:
            marks.append(pytest.mark.skip(reason=f"{target.name} unavailable: {reason}"))
        elif masked:
            marks.append(pytest.mark.skip(reason=f"{target.name} unavailable for {op or 'serving'}: {masked}"))
        shards = metafunc.config.getoption("gdn_shards")
        params += [
            pytest.param(target, session, id=target.name if shards == 1 else f"{target.name}-shard{k}", marks=marks)
            for k in range(shards)
        ]
    metafunc.parametrize(("target", "gdn_session"), params)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """A fuzz test runs in rounds (fuzz.suite.session, fuzz.suite.rounds); its distinct failures fail it with one line
    each."""
    fn, config = pyfuncitem.obj, pyfuncitem.config
    if getattr(fn, "gdn", None) is None or (session := _session(config)) is None:
        return None
    target = pyfuncitem.callspec.params["target"]  # an available one: pytest_generate_tests skips the others
    found = session.run_test(pyfuncitem.nodeid, target, fn.gdn.op, fn)
    if not found:
        return True
    if config.getoption("gdn_sanitize"):
        from fuzz.run.sanitize import sanitize_records

        sanitize_records(target, found, target.device(session.budget.device))
    if directory := config.getoption("gdn_corpus_out"):
        from fuzz.run.corpus import save_failure
        from fuzz.run.environment import environment

        session.report.environment = session.report.environment or environment()  # the entries say where found
        for record in found:
            record.corpus = str(save_failure(Path(directory), target, record.failure, session.report.environment))
            session.new_corpus.append(record.corpus)
    first = found[0].failure  # the FAILED line of pytest's short summary shows this one
    lines = [
        f"{first.kind}: {first.message.splitlines()[0][:400]}",
        f"{len(found)} distinct failure(s) of {target.name} {fn.gdn.op} (shrunk; kind x bucket x cause):",
    ]
    for record in found:
        f = record.failure
        lines.append(f"  {f.kind}: {f.message.splitlines()[0][:600]}")
        lines += [f"    {line}" for note in f.notes for line in note.splitlines()[:12]]
    pytest.fail("\n".join(lines), pytrace=False)


@dataclass(frozen=True)
class FailedTests:
    """Failed tests that are not fuzz findings (corpus replays, strict xfails that passed, errors, a crashed xdist
    worker's test) go into the run report's errors, so the gate and the campaign see them. Registered as a plugin
    beside the session: pytest_runtest_logreport is given no config to find it."""

    session: FuzzSession

    def pytest_runtest_logreport(self, report):
        if report.failed:
            self.session.report.errors.append(
                FailedTest(
                    report.nodeid, report.when, str(getattr(report.longrepr, "reprcrash", report.longrepr))[:2000]
                )
            )


def pytest_runtest_teardown(item):
    """--gdn-report is rewritten after every test, so a run killed later still leaves what its finished tests
    found. An xdist worker writes its own part beside it (REPORT.gwN), which the controller's merged report replaces
    at the end and fuzz.run.report.load merges when a killed run left no merged report."""
    path = item.config.getoption("gdn_report")
    if path and (session := _session(item.config)) is not None:
        worker = getattr(item.config, "workerinput", {}).get("workerid")
        _complete(session).write(f"{path}.{worker}" if worker else path)


def _complete(session: FuzzSession) -> RunReport:
    """The report with every registry target listed (those no test asked about too) and the environment."""
    from fuzz.run.environment import environment
    from fuzz.targets.registry import TARGETS

    for target in TARGETS:
        session.reason_unavailable(target)
    if not session.report.environment:
        session.report.environment = environment()
    # this process ran isolated checks (an xdist controller never does: it merges)
    if (s := session.workers.stats()).calls:
        session.report.isolation = Counter(
            calls=s.calls,
            starts=s.starts,
            restarts=s.restarts,
            crashes=s.crashes,
            hangs=s.hangs,
            start_seconds=round(sum(s.start_seconds), 2),
            first_seconds=round(sum(s.first_seconds), 2),
            firsts=len(s.first_seconds),
        )
    return session.report


def pytest_sessionfinish(session, exitstatus):
    config = session.config
    if (fuzz := _session(config)) is None:
        return
    report = _complete(fuzz)
    fuzz_tests = sum(getattr(getattr(i, "obj", None), "gdn", None) is not None for i in session.items)
    if hasattr(config, "workerinput"):  # an xdist worker: the controller merges and reports
        config.workeroutput["gdn_report"] = json.dumps(report.to_json())
        config.workeroutput["gdn_fuzz_tests"] = fuzz_tests
        return
    path = config.getoption("gdn_report")
    workers = config.stash[WORKERS]
    # a worker that died or sent nothing back: its last per-test part stands in for its final report
    found = merge_parts(report, path, skip=workers.merged, errors=False) if path else {}
    if fuzz.budget.plan_size and fuzz.options.kernel_cache:  # a GPU profile: was its plan compiled ahead?
        from fuzz.run.warm import status

        ran = defaultdict(set)
        for target, op in report.examples:
            ran[target].add(op)
        report.warm = status(
            ran, fuzz.options.kernel_cache.directories.values(), fuzz.profile, fuzz.budget, fuzz.options.masks
        )
    if path:
        report.write(path)
        for part in found.values():
            part.unlink()
    fuzz_tests += workers.fuzz_tests  # under xdist the controller collects nothing itself
    if exitstatus == 0 and not config.option.collectonly and (fuzz_tests or report.tests) and not report.examples:
        fuzz.nothing_ran = True
        session.exitstatus = NOTHING_RAN


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """xdist controller: merge each worker's report."""
    if (fuzz := _session(node.config)) is None:
        return
    output, workers = getattr(node, "workeroutput", {}), node.config.stash[WORKERS]
    workers.fuzz_tests += output.get("gdn_fuzz_tests", 0)
    if data := output.get("gdn_report"):
        worker = RunReport.from_json(json.loads(data))
        worker.errors = []  # the controller's pytest_runtest_logreport saw the same failed reports (and crashes)
        fuzz.report.merge(worker)
        workers.merged.add(node.gateway.id)


def pytest_terminal_summary(terminalreporter, config):
    if (fuzz := _session(config)) is None or hasattr(config, "workerinput"):
        return
    report = fuzz.report
    terminalreporter.section("gdn-fuzz targets")
    for line in report.summary_lines():
        terminalreporter.write_line(line)
    for entry in fuzz.corpus_elsewhere:
        terminalreporter.write_line(f"  corpus entry not replayed: {entry}")
    for path in fuzz.new_corpus:
        terminalreporter.write_line(f"  new corpus entry: {path}")
    if fuzz.nothing_ran:
        why = (
            "each one stopped before its first example (time box?)"
            if report.tests
            else "every selected target is unavailable or masked, see above"
        )
        terminalreporter.write_line(
            f"gdn-fuzz: fuzz tests were selected but no example ran ({why}): exit status 5", red=True
        )
