"""pytest wiring: profiles, --gdn-target overrides, target parametrization and the run summary."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from fuzz.generate.profiles import budget_for, register_profiles
from fuzz.run.session import FuzzSession
from fuzz.run.worker import DEFAULT_TIMEOUT

register_profiles()


def pytest_addoption(parser):
    group = parser.getgroup("gdn-fuzz")
    group.addoption("--gdn-target", action="append", default=[], metavar="FAMILY=module.path[:attr]",
                    help="fuzz an importable module exposing a family's API (flashinfer, fla, sglang) instead of "
                         "the installed library; it runs on the profile's device")
    group.addoption("--gdn-report", default=None, metavar="FILE.json",
                    help="write the run's summary (examples per target and operation, unavailable targets and "
                         "why, failures with their reproduction coordinates) as JSON")
    group.addoption("--gdn-corpus-out", default=None, metavar="DIR",
                    help="write each shrunk failure as a corpus entry (JSON) into DIR; `git add` makes it a "
                         "regression test")
    group.addoption("--gdn-require", default="", metavar="FAMILY,...",
                    help="families that must be available: if one cannot be loaded, its targets fail instead of "
                         "skipping (a target the loaded release or this GPU cannot run is still skipped, with why)")
    group.addoption("--gdn-isolate", action="store_true", default=False,
                    help="run each check in a worker process restarted after a crash or hang (KernelCrash, "
                         "KernelHang failures) instead of in pytest's process; off by default, use it on the GPU "
                         "profiles (h200, b200): an illegal memory access poisons the CUDA context of its process")
    group.addoption("--gdn-timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                    help=f"with --gdn-isolate: seconds one check may take before it is a KernelHang "
                         f"(default {DEFAULT_TIMEOUT:g})")
    group.addoption("--gdn-sanitize", action="store_true", default=False,
                    help="re-run each shrunk KernelCrash / GuardBreach under compute-sanitizer memcheck (caching "
                         "allocator off) and attach its report to the failure (GPU profiles)")
    group.addoption("--gdn-test-seconds", type=float, default=None, metavar="SECONDS",
                    help="time box per fuzz test: after SECONDS it checks no more examples and the summary marks it "
                         "with the count it ran (a test that has failed keeps going until shrunk)")


def pytest_configure(config):
    profile = config.getoption("hypothesis_profile", None) or "default"
    budget = budget_for(profile)
    if budget.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before any target imports triton
    from fuzz.targets.registry import set_overrides  # imported after TRITON_INTERPRET is settled

    overrides = {}
    for spec in config.getoption("gdn_target"):
        family, sep, module = spec.partition("=")
        if not sep or not module:
            raise pytest.UsageError(f"--gdn-target {spec!r}: expected FAMILY=module.path")
        overrides[family] = module
    try:
        set_overrides(overrides)
    except ValueError as e:
        raise pytest.UsageError(str(e)) from e
    required = frozenset(f for f in config.getoption("gdn_require").split(",") if f)
    config.stash[SESSION] = FuzzSession(profile, budget, required, isolate=config.getoption("gdn_isolate"),
                                        timeout=config.getoption("gdn_timeout"),
                                        test_seconds=config.getoption("gdn_test_seconds"))


SESSION = pytest.StashKey[FuzzSession]()


@pytest.fixture(scope="session")
def gdn(pytestconfig) -> FuzzSession:
    return pytestconfig.stash[SESSION]


def pytest_generate_tests(metafunc):
    op = getattr(metafunc.function, "gdn_op", None)
    if op is None or "target" not in metafunc.fixturenames:
        return
    from fuzz.targets.registry import targets_for

    session = metafunc.config.stash[SESSION]
    params = []
    for target in targets_for(op):
        reason = session.reason_unavailable(target)
        masked = not reason and target.semantics().masked_reason(op)
        skip = reason and not session.must_run(target)
        marks = [pytest.mark.skip(reason=f"{target.name} unavailable: {reason}")] if skip else []
        marks += [pytest.mark.skip(reason=f"{target.name} unavailable for {op}: {masked}")] if masked else []
        params.append(pytest.param(target, id=target.name, marks=marks))
    metafunc.parametrize("target", params)


def pytest_runtest_logreport(report):
    if report.failed and report.when == "call":
        FAILURES.append({"test": report.nodeid, "message": str(getattr(report.longrepr, "reprcrash", report.longrepr)),
                         "sanitizer": [text for title, text in report.sections if title.startswith("compute-san")]})


FAILURES: list[dict] = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """With --gdn-corpus-out, a fuzz test's final (shrunk) failures become corpus entries; with --gdn-sanitize,
    its crashes and guard breaches get a memcheck report."""
    report = yield
    directory = item.config.getoption("gdn_corpus_out")
    target = getattr(item, "callspec", None) and item.callspec.params.get("target")
    if not (report.failed and call.when == "call" and target is not None):
        return report
    if item.config.getoption("gdn_sanitize"):
        from fuzz.run.sanitize import sanitizer_sections

        device = target.device(item.config.stash[SESSION].budget.device)
        report.sections += sanitizer_sections(target, call.excinfo.value, device)
    if directory and "entry" not in item.fixturenames:
        from fuzz.run.corpus import save_failures

        for path in save_failures(Path(directory), target, call.excinfo.value):
            item.config.stash[SESSION].new_corpus.append(str(path))
    return report


def pytest_runtest_teardown(item):
    """--gdn-report is rewritten after every test, so a run killed later (a campaign round cut off while it
    shrinks) still leaves the counts and failures of the tests it finished."""
    if item.config.getoption("gdn_report") and SESSION in item.config.stash:
        from fuzz.targets.registry import TARGETS

        item.config.stash[SESSION].write_report(item.config.getoption("gdn_report"), TARGETS, FAILURES)


def pytest_terminal_summary(terminalreporter, config):
    if SESSION not in config.stash:
        return
    from fuzz.targets.registry import TARGETS

    session = config.stash[SESSION]
    terminalreporter.section("gdn-fuzz targets")
    for line in session.summary_lines(TARGETS):
        terminalreporter.write_line(line)
    for entry in session.corpus_elsewhere:
        terminalreporter.write_line(f"  corpus entry not replayed, it holds for another release: {entry}")
    for path in session.new_corpus:
        terminalreporter.write_line(f"  new corpus entry: {path}")
    if config.getoption("gdn_report"):
        session.write_report(config.getoption("gdn_report"), TARGETS, FAILURES)
