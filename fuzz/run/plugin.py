"""The pytest side of a fuzz run (fuzz/conftest.py imports these hooks): options, the session, target
parametrization, fuzz tests run in rounds, corpus entries and sanitizer reports for findings, the run summary and
--gdn-report, merged over pytest-xdist workers.

Bad input is refused at configure time with one line and pytest's usage-error exit (4): an unknown profile, a GPU
profile without a GPU, an override module that does not import, an unknown family, an unknown mask policy. A run in
which fuzz tests were selected but no example was checked exits 5: a green run means something ran.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fuzz.generate.profiles import PROFILES, budget_for, database, register_profiles
from fuzz.run.report import RunReport
from fuzz.run.session import FuzzSession, Options
from fuzz.run.worker import DEFAULT_TIMEOUT
from fuzz.targets.known_bugs import MASK_POLICIES

register_profiles()
ACTIVE: FuzzSession | None = None  # this process's session (fuzz.run.session.active_session)
NOTHING_RAN = 5  # pytest's "no tests collected" status: fuzz tests were selected, none checked an example


def pytest_addoption(parser):
    group = parser.getgroup("gdn-fuzz")
    add = group.addoption
    add("--gdn-target", action="append", default=[], metavar="FAMILY=module.path[:attr]",
        help="fuzz an importable module exposing a family's API (flashinfer, fla, sglang) instead of the installed "
             "library; it runs on the profile's device")
    add("--gdn-require", default="", metavar="FAMILY,...",
        help="families that must be available: if one cannot be loaded, its targets fail instead of being reported "
             "unavailable (a target the loaded release or this GPU cannot run is still reported unavailable)")
    add("--gdn-report", default=None, metavar="FILE.json",
        help="write the run report (examples per target and operation, unavailable targets and why, every distinct "
             "failure with its minimal coordinate, one record per example) as JSON; rewritten after every test")
    add("--gdn-corpus-out", default=None, metavar="DIR",
        help="write each distinct shrunk failure as a new corpus entry (JSON) into DIR (never over an existing one)")
    add("--gdn-corpus", default=None, metavar="DIR", help="the corpus to replay (default: the checkout's or the "
        "installed package's corpus)")
    add("--gdn-examples", type=int, default=None, metavar="N",
        help="examples per fuzz test (default: the profile's)")
    add("--gdn-test-seconds", type=float, default=None, metavar="SECONDS",
        help="time box per fuzz test: no example is checked after it, except to shrink a failure found in the "
             "last round (--gdn-shrink-seconds)")
    add("--gdn-shrink-seconds", type=float, default=120.0, metavar="SECONDS",
        help="with --gdn-test-seconds: how long a round may check new cases after its first failure (default 120)")
    add("--gdn-no-shrink", action="store_true", default=False,
        help="report each distinct failure's first case, without shrinking (triage runs)")
    add("--gdn-masks", default="release", choices=MASK_POLICIES,
        help="known-bug masks (fuzz/targets/known_bugs.py): 'release' masks the bugs known for the installed "
             "release (default), 'all' every known bug (the upgrade gate), 'none' none (hunting)")
    add("--gdn-unmask", action="store_const", const="none", dest="gdn_masks", help="the same as --gdn-masks=none")
    add("--gdn-db", default=None, metavar="DIR|redis://HOST:PORT",
        help="the Hypothesis example database: a directory, or a redis server shared across hosts")
    add("--gdn-live-log", default=None, metavar="FILE",
        help="append every failing example to FILE as it happens, one JSON line each (survives a killed run)")
    add("--gdn-isolate", action="store_true", default=False,
        help="run each check in a worker process restarted after a crash or hang (KernelCrash, KernelHang) instead "
             "of in pytest's process; use it on the GPU profiles: an illegal memory access poisons the CUDA context")
    add("--gdn-timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
        help=f"with --gdn-isolate: seconds one check may take before it is a KernelHang (default {DEFAULT_TIMEOUT:g})")
    add("--gdn-sanitize", action="store_true", default=False,
        help="re-run each shrunk KernelCrash / GuardBreach under compute-sanitizer memcheck and attach its report")


def pytest_configure(config):
    global ACTIVE
    profile = config.getoption("hypothesis_profile", None) or "dev"
    if profile not in PROFILES:
        raise pytest.UsageError(f"--hypothesis-profile={profile}: not a gdn-fuzz profile; expected one of "
                                f"{', '.join(PROFILES)}")
    budget = budget_for(profile)
    if budget.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before any target imports triton
    else:
        _select_gpu_for_xdist_worker()  # before anything initializes CUDA
        import torch

        if not torch.cuda.is_available():
            raise pytest.UsageError(f"--hypothesis-profile={profile} runs on a CUDA GPU, and torch "
                                    f"{torch.__version__} sees none here; use --hypothesis-profile=ci or dev")
    from fuzz.targets.registry import FAMILIES, set_overrides  # after TRITON_INTERPRET is settled

    overrides = {}
    for spec in config.getoption("gdn_target"):
        family, sep, module = spec.partition("=")
        if not sep or not module:
            raise pytest.UsageError(f"--gdn-target {spec!r}: expected FAMILY=module.path[:attr]")
        overrides[family] = module
    try:
        set_overrides(overrides)
    except ValueError as e:
        raise pytest.UsageError(str(e)) from e
    for family in overrides:
        try:
            FAMILIES[family].api()
        except Exception as e:  # noqa: BLE001 - an override the user named must load
            raise pytest.UsageError(f"--gdn-target {family}={overrides[family]}: {e}") from e
    required = frozenset(f for f in config.getoption("gdn_require").split(",") if f)
    if unknown := required - set(FAMILIES):
        raise pytest.UsageError(f"--gdn-require: unknown famil{'y' if len(unknown) == 1 else 'ies'} "
                                f"{', '.join(sorted(unknown))}; expected some of {', '.join(sorted(FAMILIES))}")
    if spec := config.getoption("gdn_db"):
        from hypothesis import settings

        try:
            db = database(spec)
        except ValueError as e:
            raise pytest.UsageError(str(e)) from e
        settings.register_profile(profile, parent=settings.get_profile(profile), database=db)
    options = Options(required=required, isolate=config.getoption("gdn_isolate"),
                      timeout=config.getoption("gdn_timeout"), test_seconds=config.getoption("gdn_test_seconds"),
                      shrink_seconds=config.getoption("gdn_shrink_seconds"),
                      examples=config.getoption("gdn_examples"), shrink=not config.getoption("gdn_no_shrink"),
                      masks=config.getoption("gdn_masks"),
                      live_log=Path(p) if (p := config.getoption("gdn_live_log")) else None,
                      seed=_int_or_none(config.getoption("hypothesis_seed", None)))
    ACTIVE = FuzzSession(profile, budget, options)


def _int_or_none(value) -> int | None:
    try:
        return None if value is None else int(value)
    except ValueError:
        raise pytest.UsageError(f"--hypothesis-seed={value}: expected an integer") from None


def _select_gpu_for_xdist_worker() -> None:
    """Under pytest-xdist on a host with several GPUs, worker gwN runs on GPU N mod count. torch.cuda.device_count()
    asks NVML and leaves CUDA uninitialized, so CUDA_VISIBLE_DEVICES still takes effect after it."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker or "CUDA_VISIBLE_DEVICES" in os.environ:
        return
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    import torch

    count = torch.cuda.device_count()
    if count > 1:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(int(worker.removeprefix("gw")) % count)


def pytest_generate_tests(metafunc):
    op = getattr(metafunc.function, "gdn_op", None)
    if op is None or "target" not in metafunc.fixturenames:
        return
    from fuzz.targets.registry import targets_for

    params = []
    for target in targets_for(op):
        reason = ACTIVE.reason_unavailable(target)
        masked = not reason and ACTIVE.masked_reason(target, op)
        marks = []
        if reason and not ACTIVE.must_run(target):
            marks.append(pytest.mark.skip(reason=f"{target.name} unavailable: {reason}"))
        elif masked:
            marks.append(pytest.mark.skip(reason=f"{target.name} unavailable for {op}: {masked}"))
        params.append(pytest.param(target, id=target.name, marks=marks))
    metafunc.parametrize("target", params)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """A fuzz test runs in rounds (fuzz.run.session); its distinct failures fail it with one line each."""
    fn = pyfuncitem.obj
    if getattr(fn, "gdn_op", None) is None:
        return None
    target = pyfuncitem.callspec.params["target"]
    reason = ACTIVE.reason_unavailable(target)
    if reason:  # reached only for a --gdn-require'd family
        pytest.fail(f"{target.name} is required but unavailable: {reason}", pytrace=False)
    found = ACTIVE.run_test(pyfuncitem.nodeid, target, fn.gdn_op, fn)
    if not found:
        return True
    config = pyfuncitem.config
    if config.getoption("gdn_sanitize"):
        from fuzz.run.sanitize import sanitize_records

        sanitize_records(target, found, target.device(ACTIVE.budget.device))
    if directory := config.getoption("gdn_corpus_out"):
        from fuzz.run.corpus import save_failure

        for record in found:
            record.corpus = str(save_failure(Path(directory), target, record.failure, ACTIVE.report.environment))
            ACTIVE.new_corpus.append(record.corpus)
    lines = [f"{len(found)} distinct failure(s) of {target.name} {fn.gdn_op} (shrunk; kind x bucket x cause):"]
    for record in found:
        f = record.failure
        lines.append(f"  {f.kind}: {f.message.splitlines()[0][:600]}")
        lines += [f"    {line}" for note in f.notes for line in note.splitlines()[:12]]
    pytest.fail("\n".join(lines), pytrace=False)


def pytest_runtest_logreport(report):
    """Failed tests that are not fuzz findings (corpus replays, strict xfails that passed, errors) go into the run
    report's errors, so the gate and the campaign see them."""
    if ACTIVE is not None and report.failed:
        ACTIVE.report.errors.append({"test": report.nodeid, "when": report.when,
                                     "message": str(getattr(report.longrepr, "reprcrash", report.longrepr))[:2000]})


def pytest_runtest_teardown(item):
    """--gdn-report is rewritten after every test, so a run killed later still leaves what its finished tests
    found (not on xdist workers: the controller writes the merged report)."""
    path = item.config.getoption("gdn_report")
    if path and ACTIVE is not None and not hasattr(item.config, "workerinput"):
        _complete(ACTIVE).write(path)


def _complete(session: FuzzSession) -> RunReport:
    """The report with every registry target listed (those no test asked about too) and the environment."""
    from fuzz.run.environment import environment
    from fuzz.targets.registry import TARGETS

    for target in TARGETS:
        session.reason_unavailable(target)
    if not session.report.environment:
        session.report.environment = environment()
    return session.report


def pytest_sessionfinish(session, exitstatus):
    if ACTIVE is None:
        return
    config = session.config
    report = _complete(ACTIVE)
    if hasattr(config, "workerinput"):  # an xdist worker: the controller merges and reports
        config.workeroutput["gdn_report"] = json.dumps(report.to_json())
        return
    if path := config.getoption("gdn_report"):
        report.write(path)
    fuzz_tests = [i for i in session.items if getattr(getattr(i, "obj", None), "gdn_op", None)]
    if exitstatus == 0 and not config.option.collectonly and (fuzz_tests or report.tests) and not report.examples:
        ACTIVE.nothing_ran = True
        session.exitstatus = NOTHING_RAN


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """xdist controller: merge each worker's report."""
    data = getattr(node, "workeroutput", {}).get("gdn_report")
    if data and ACTIVE is not None:
        ACTIVE.report.merge(RunReport.from_json(json.loads(data)))


def pytest_terminal_summary(terminalreporter, config):
    if ACTIVE is None or hasattr(config, "workerinput"):
        return
    report = ACTIVE.report
    terminalreporter.section("gdn-fuzz targets")
    for line in report.summary_lines():
        terminalreporter.write_line(line)
    for entry in ACTIVE.corpus_elsewhere:
        terminalreporter.write_line(f"  corpus entry not replayed: {entry}")
    for path in ACTIVE.new_corpus:
        terminalreporter.write_line(f"  new corpus entry: {path}")
    if ACTIVE.options.isolate:
        from fuzz.run.worker import stats

        s = stats()
        cost = f", {sum(s.start_seconds) / len(s.start_seconds):.2f} s per start" if s.start_seconds else ""
        terminalreporter.write_line(f"  isolated in worker processes (timeout {ACTIVE.options.timeout:g} s): "
                                    f"{s.calls} calls, {s.starts} starts ({s.restarts} restarts{cost}), "
                                    f"{s.crashes} crashes, {s.hangs} hangs")
    if ACTIVE.nothing_ran:
        terminalreporter.write_line("gdn-fuzz: fuzz tests were selected but no example ran (every selected target "
                                    "is unavailable, see above): exit status 5", red=True)


__all__ = ["pytest_addoption", "pytest_configure", "pytest_generate_tests", "pytest_pyfunc_call",
           "pytest_runtest_logreport", "pytest_runtest_teardown", "pytest_sessionfinish", "pytest_testnodedown",
           "pytest_terminal_summary"]
