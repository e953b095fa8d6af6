"""Replay corpus/ against every available matching target. An expected failure is a strict xfail: the day the
library fixes the bug it turns into a failure that asks for the entry to be updated. An entry for another release
of the library, or for a library release while the run uses an override module, is listed in the run summary, not
replayed."""

from pathlib import Path

import pytest

from fuzz.judge.failures import KINDS
from fuzz.run import corpus
from fuzz.suite.plugin import session_of
from fuzz.targets.registry import TARGETS

BY_NAME = {t.name: t for t in TARGETS}


def _params(config):
    session = session_of(config)
    directory = config.getoption("gdn_corpus", None)
    try:
        entries = corpus.load_all(Path(directory) if directory else None)
    except corpus.CorpusError as e:
        raise pytest.UsageError(str(e)) from None
    for entry in entries:
        target = BY_NAME.get(entry.target)
        if target is None:
            raise pytest.UsageError(f"{entry.path}: field 'target' names no known target ({entry.target!r})")
        reason = session.reason_unavailable(target)
        if not reason and entry.versions and target.overridden:
            session.corpus_elsewhere.append(
                f"{entry.id} (holds for {entry.library} {entry.versions}; this run uses "
                f"override {target.family.override})"
            )
            continue
        version = None if reason else target.release()
        if version and entry.versions and version not in entry.versions:
            session.corpus_elsewhere.append(f"{entry.id} ({entry.library} {entry.versions}; installed {version})")
            continue
        why = f"{entry.id} not replayed: {target.name} unavailable: {reason}"
        marks = [pytest.mark.skip(reason=why)] if reason else []
        if entry.expect != "pass":
            marks.append(pytest.mark.xfail(raises=KINDS[entry.expect], strict=True, reason=entry.description))
        yield pytest.param(entry, target, session, id=entry.id, marks=marks)


def pytest_generate_tests(metafunc):
    if "entry" in metafunc.fixturenames:
        metafunc.parametrize(("entry", "target", "gdn_session"), list(_params(metafunc.config)))


def test_corpus(entry, target, gdn_session):
    gdn_session.check(target, entry.case).raise_failure()
