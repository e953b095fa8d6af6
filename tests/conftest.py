"""Fixtures shared by the project's tests."""

import sys
from contextlib import ExitStack
from pathlib import Path

import pytest
import torch

from fuzz.generate.profiles import register_profiles
from fuzz.targets.registry import current_overrides, flashinfer, overridden

# The gdn-fuzz Hypothesis profiles (--hypothesis-profile=ci is ours, not Hypothesis's own "ci"), registered before
# pytest loads the profile, whether or not this run also collects the fuzz suites (whose conftest registers them).
register_profiles()

# No test of ours may hang CI (90 min for everything): one that runs past this fails with its stack (pytest-timeout,
# the dev extra), and the run goes on. The longest take about 4 minutes on a 2-core CPU box.
TEST_TIMEOUT = 900


def pytest_collection_modifyitems(items):
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(TEST_TIMEOUT))


@pytest.fixture
def override():
    """override(spec): point the flashinfer family at a module (module.path[:attr]) for one test; whatever overrides
    were set before come back afterwards."""
    before = current_overrides()
    with ExitStack() as restore:
        yield lambda spec: restore.enter_context(overridden({**before, "flashinfer": spec}))


@pytest.fixture
def fake_flashinfer_package(tmp_path, monkeypatch):
    """install(files, version, capability): a fake installed `flashinfer` (files: path in the package -> source; each
    folder gets an empty __init__.py) first on sys.path, reported as `version`; a capability (major, minor), or None
    for no GPU, fakes the device (left as it is when not given). The real family comes back afterwards."""
    restore = ExitStack()

    def install(files: dict, version: str = "0.7.4", capability=...):
        root = tmp_path / "flashinfer"
        for name, source in files.items():
            path = root / name
            for folder in (root, *(root / p for p in Path(name).parents[:-1])):
                folder.mkdir(parents=True, exist_ok=True)
                (folder / "__init__.py").touch()
            path.write_text(source)
        monkeypatch.syspath_prepend(str(tmp_path))
        monkeypatch.setattr(flashinfer, "installed_version", lambda dist: version)
        if capability is not ...:
            monkeypatch.setattr(torch.cuda, "is_available", lambda: capability is not None)
            monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
        restore.enter_context(overridden({}))

    with restore:
        yield install
        for name in [m for m in sys.modules if m == "flashinfer" or m.startswith("flashinfer.")]:
            del sys.modules[name]
