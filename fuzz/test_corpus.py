"""Replay corpus/ against every available matching target. An expected failure is a strict xfail: the day the
library fixes the bug it turns into a failure that asks for the entry to be updated. An entry for another release
of the library is listed in the run summary, not replayed."""
import pytest

from fuzz.run import corpus
from fuzz.run.harness import check
from fuzz.targets.registry import TARGETS
from fuzz.judge.verdict import FAILURE_KINDS

BY_NAME = {t.name: t for t in TARGETS}
KIND = {k.__name__: k for k in FAILURE_KINDS}


def _params(config):
    from fuzz.conftest import SESSION

    session = config.stash[SESSION]
    for entry in corpus.load_all():
        target = BY_NAME.get(entry.target)
        if target is None:
            raise corpus.CorpusError(f"{entry.path}: field 'target' names no known target ({entry.target!r})")
        reason = session.reason_unavailable(target)
        version = None if reason else target.family.version()
        if not reason and version and entry.versions and version not in entry.versions:
            # not a test of this installation: listed in the run summary instead
            session.corpus_elsewhere.append(f"{entry.id} ({entry.library} {entry.versions}; installed {version})")
            continue
        why = f"{entry.id} not replayed: {target.name} unavailable: {reason}"
        marks = [pytest.mark.skip(reason=why)] if reason else []
        if entry.expect != "pass":
            marks.append(pytest.mark.xfail(raises=KIND[entry.expect], strict=True, reason=entry.description))
        yield pytest.param(entry, target, id=entry.id, marks=marks)


def pytest_generate_tests(metafunc):
    if "entry" in metafunc.fixturenames:
        metafunc.parametrize(("entry", "target"), list(_params(metafunc.config)))


def test_corpus(entry, target, gdn):
    check(target, entry.case, target.device(gdn.budget.device))
