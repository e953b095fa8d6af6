"""The pytest side of a fuzz run: options (fuzz.suite.options), the session, target parametrization and fuzz tests
run in rounds, corpus entries and sanitizer reports for findings. The run's report and summary, merged over pytest-xdist
workers, are fuzz.suite.summary's hooks; the progress events (--gdn-events) fuzz.suite.event_hooks'; the device each
process uses fuzz.suite.device's. Those hook objects are registered as the run is configured, beside its session.

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

import dataclasses
import os
import sys
from contextlib import ExitStack
from typing import TYPE_CHECKING

import pytest

from fuzz.suite.options import Options, register

if TYPE_CHECKING:  # the rest is imported as the plugin wakes: a dormant plugin imports neither torch nor Hypothesis
    from fuzz.generate.profiles import Profile
    from fuzz.suite.session import FuzzSession

OURS = pytest.StashKey[bool]()  # fuzz/conftest.py woke the plugin: the fuzz suites are in this run
SESSION = pytest.StashKey["FuzzSession"]()


def wake(pluginmanager) -> None:
    """fuzz/conftest.py's call as it loads (its pytest_addoption, before the command line is acted on): register
    this module where no entry point did (pluggy refuses a module registered twice), register the gdn-fuzz Hypothesis
    profiles, and mark the run as ours."""
    from fuzz.generate.profiles import register_profiles

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
    register(parser.getgroup("gdn-fuzz"))


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
    from fuzz.generate.profiles import PROFILES

    profile = PROFILES.get(config.getoption("hypothesis_profile", None) or "dev")
    if not _ours(config) or profile is None or profile.device == "cpu":
        return None
    try:
        return _workers(config, "auto")
    except ValueError:
        return None


def _workers(config, value: str) -> int:
    """The count; for `auto` on a GPU profile, the line saying what it chose and whether a sweep measured it."""
    from fuzz.run import workers

    count = workers.resolve(value, _profile(config).device)
    if value == "auto" and _profile(config).device != "cpu":
        print(workers.auto_line(workers.visible_gpus(), os.cpu_count() or 1), file=sys.stderr)
    return count


def _profile(config) -> Profile:
    """The run's profile; with no --hypothesis-profile, dev (not Hypothesis's default, nor its own "ci" under $CI)."""
    from fuzz.generate.profiles import PROFILES, unknown_profile

    name = config.getoption("hypothesis_profile", None) or "dev"
    if name not in PROFILES:
        raise pytest.UsageError(f"--hypothesis-profile={name}: {unknown_profile(name)}")
    return PROFILES[name]


@pytest.hookimpl(tryfirst=True)  # before Hypothesis's own, which meets an unknown profile with a traceback (exit 3)
def pytest_configure(config):
    if not _ours(config):
        return
    from hypothesis import settings

    from fuzz.generate.profiles import database
    from fuzz.run import kernel_cache
    from fuzz.suite import device
    from fuzz.suite.session import FuzzSession
    from fuzz.suite.summary import RunSummary

    profile = _profile(config)  # its settings too, with no --hypothesis-profile: dev's
    try:
        options = Options.read(config.getoption, profile)
        device.prepare(profile)
        # before any target loads its library
        options = dataclasses.replace(options, kernel_cache=kernel_cache.configure(options.kernel_cache_dir))
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None
    _load_families(config, options)
    _check_corpus(options)
    if options.db:
        try:
            db = database(options.db)
        except ValueError as e:
            raise pytest.UsageError(str(e)) from e
        settings.register_profile(profile.name, parent=settings.get_profile(profile.name), database=db)
    settings.load_profile(profile.name)  # Hypothesis's plugin loads it again after this hook, to the same effect
    session = config.stash[SESSION] = FuzzSession(profile.name, profile.budget, options)
    config.pluginmanager.register(RunSummary(session), "gdn_fuzz_summary")
    session.report.time_box = options.time_box(profile.name, settings.default.max_examples)


def _load_families(config, options: Options) -> None:
    """Point the families at the run's overrides (--gdn-target) until the run ends, and load each family the user
    named (an override, or --gdn-require): one that does not load stops the run here, with its reason in one line."""
    from fuzz.targets.registry import FAMILIES, overridden, parse_overrides  # after TRITON_INTERPRET is settled

    try:
        overrides = parse_overrides(list(options.targets))
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
    required = frozenset(f for f in options.require.split(",") if f)
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


def _check_corpus(options: Options) -> None:
    """A corpus that cannot be replayed stops the run here, in one line (during collection it would be a
    traceback)."""
    from fuzz.run import corpus

    try:
        corpus.load_all(options.corpus)
    except corpus.CorpusError as e:
        raise pytest.UsageError(str(e)) from None


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session):
    """The progress events, in the process that runs the tests (not an xdist controller: its workers do): to
    --gdn-events, and to the run's live progress on its terminal or in its log (fuzz.suite.live)."""
    run, config = _session(session.config), session.config
    if run is None or config.pluginmanager.has_plugin("dsession"):
        return
    from fuzz.run.events import EventLog, path_for
    from fuzz.suite.event_hooks import TestEvents
    from fuzz.suite.live import LiveProgress

    path, live = run.options.events, LiveProgress.of(config)
    if not path and live is None:
        return
    worker = getattr(config, "workerinput", {}).get("workerid")
    run.events = EventLog(path_for(path, worker) if path else None, live.add if live else None)
    config.pluginmanager.register(TestEvents(config, run), "gdn_fuzz_events")


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
    accepts = getattr(metafunc.function, "gdn_accepts", None)  # a serving test's own choice of targets (chains)
    for target in TARGETS if serving else targets_for(op):
        if accepts is not None and not accepts(target):
            continue
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
        shards = session.options.shards
        params += [
            pytest.param(target, session, id=target.name if shards == 1 else f"{target.name}-shard{k}", marks=marks)
            for k in range(shards)
        ]
    metafunc.parametrize(("target", "gdn_session"), params)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """A fuzz test runs in rounds (fuzz.suite.session, fuzz.suite.rounds); its distinct failures fail it with one line
    each, but for those on a contract edge unless --gdn-edges fail (the run summary lists them)."""
    fn, config = pyfuncitem.obj, pyfuncitem.config
    if getattr(fn, "gdn", None) is None or (session := _session(config)) is None:
        return None
    target = pyfuncitem.callspec.params["target"]  # an available one: pytest_generate_tests skips the others
    found = session.run_test(pyfuncitem.nodeid, target, fn.gdn.op, fn)
    if not found:
        return True
    if session.options.sanitize:
        from fuzz.run.sanitize import sanitize_records

        sanitize_records(target, found, session.budget.device)
    if directory := session.options.corpus_out:
        from fuzz.run.corpus import save_failure
        from fuzz.run.environment import environment

        session.report.environment = session.report.environment or environment()  # the entries say where found
        for record in found:
            record.corpus = str(save_failure(directory, target, record.failure, session.report.environment))
            session.new_corpus.append(record.corpus)
    found = [r for r in found if session.options.fails_test(r.failure.key)]
    if not found:
        return True
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
