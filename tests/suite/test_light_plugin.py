"""The dormant plugin is light: gdn-fuzz's pytest11 entry point is loaded by every pytest run in an environment where
gdn-fuzz is installed, and it used to import torch (through its options and its session), so every such run took
2.9-3.3 s to start instead of 1.2 s. Until fuzz/conftest.py wakes it, importing it and registering its options imports
none of torch, numpy or triton, and no part of Hypothesis that pytest's own Hypothesis plugin does not import anyway
(it imports Hypothesis late, for its terminal summary), checked in a child pytest process that collects nothing of
ours."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.child_pytest import python_run

ROOT = Path(__file__).resolve().parents[2]
NEVER = {"torch", "numpy", "triton"}

# A plugin of the child run: what its process imported by the time the run ends.
PROBE = """
import json, os, sys


def pytest_unconfigure(config):
    with open(os.environ["MODULES_OUT"], "w") as f:
        json.dump(sorted(sys.modules), f)
"""


def imported(tmp_path: Path, *plugins: str) -> set[str]:
    """The modules a pytest run in an empty directory imported, with only pytest's Hypothesis plugin, the
    probe and `plugins` loaded (no entry point: the checkout on PYTHONPATH, as fuzz/conftest.py finds it)."""
    (tmp_path / "gdn_probe.py").write_text(PROBE)
    (tmp_path / "test_theirs.py").write_text("def test_theirs():\n    assert True\n")
    out = tmp_path / "modules.json"
    plugins = [arg for plugin in ("_hypothesis_pytestplugin", *plugins, "gdn_probe") for arg in ("-p", plugin)]
    proc = python_run(
        *("-m", "pytest", "-q", *plugins, "-p", "no:cacheprovider"),
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join((str(tmp_path), str(ROOT))),
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "MODULES_OUT": str(out),
        },
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    return set(json.loads(out.read_text()))


def test_the_dormant_plugin_imports_nothing_heavy(tmp_path):
    without = imported(tmp_path)  # pytest and its Hypothesis plugin alone
    loaded = imported(tmp_path, "fuzz.suite.plugin")
    assert "fuzz.suite.plugin" in loaded, "the plugin did not load"
    heavy = sorted(name for name in loaded if name.partition(".")[0] in NEVER)
    assert not heavy, f"the dormant plugin imported {len(heavy)} modules of torch, numpy or triton: {heavy[:10]}"
    more = sorted(name for name in loaded - without if name.partition(".")[0] == "hypothesis")
    assert not more, f"the dormant plugin imported {len(more)} Hypothesis modules: {more[:10]}"
