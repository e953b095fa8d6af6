"""Target availability of the real FlashInfer family, against a fake `flashinfer` package: a failing
flashinfer.gdn_prefill import makes the prefill target unavailable with its reason and leaves the decode targets
alone; a release without a semantics row for a path makes that target unavailable, not an error."""
import sys

import pytest

from fuzz.targets import FAMILIES, TARGETS, flashinfer, set_overrides

BY_NAME = {t.name: t for t in TARGETS}
DECODE = "def gated_delta_rule_decode_pretranspose(): pass\ndef gated_delta_rule_mtp(): pass\n"


@pytest.fixture
def fake_flashinfer(tmp_path, monkeypatch):
    """Install a fake flashinfer (gdn_decode, and a gdn_prefill from the test) at a chosen version."""
    before = {name: f.override for name, f in FAMILIES.items() if f.override}

    def install(prefill_source: str, version: str = "0.7.4"):
        (tmp_path / "flashinfer").mkdir()
        (tmp_path / "flashinfer" / "__init__.py").write_text("")
        (tmp_path / "flashinfer" / "gdn_decode.py").write_text(DECODE)
        (tmp_path / "flashinfer" / "gdn_prefill.py").write_text(prefill_source)
        monkeypatch.syspath_prepend(str(tmp_path))
        monkeypatch.setattr(flashinfer, "installed_version", lambda dist: version)
        set_overrides({})

    yield install
    for name in [m for m in sys.modules if m == "flashinfer" or m.startswith("flashinfer.")]:
        del sys.modules[name]
    set_overrides(before)


def test_prefill_import_failure_leaves_decode_targets_alone(fake_flashinfer):
    fake_flashinfer("raise ImportError('cuda.bindings is missing')\n")
    prefill = BY_NAME["flashinfer-prefill-chunk"].unavailable_reason("cpu")
    assert "import flashinfer.gdn_prefill failed (ImportError: cuda.bindings is missing)" in prefill
    # the decode target gets past its API: only the device stops it here
    assert BY_NAME["flashinfer-pretranspose-fp32"].unavailable_reason("cpu").startswith("needs a CUDA GPU")


def test_release_without_a_semantics_row_is_unavailable(fake_flashinfer):
    fake_flashinfer("def chunk_gated_delta_rule(): pass\n", version="0.7.2.post1")
    reason = BY_NAME["flashinfer-prefill-chunk"].unavailable_reason("cpu")
    assert reason.startswith("no semantics row for flashinfer.prefill.chunk at version 0.7.2.post1")
