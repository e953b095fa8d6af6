"""Target availability of the real FlashInfer family, against a fake `flashinfer` package: a failing
flashinfer.gdn_prefill import makes the prefill target unavailable with its reason and leaves the decode targets
alone; a release without a semantics row for a path makes that target unavailable, not an error."""

import pytest

from fuzz.targets.registry import TARGETS

BY_NAME = {t.name: t for t in TARGETS}
DECODE = (
    "def gated_delta_rule_decode_pretranspose(*args, **kwargs): pass\ndef gated_delta_rule_mtp(*args, **kwargs): pass\n"
)


@pytest.fixture
def fake_flashinfer(fake_flashinfer_package):
    """A fake flashinfer: gdn_decode, and a gdn_prefill from the test, at a chosen version."""
    return lambda prefill_source, version="0.7.4": fake_flashinfer_package(
        {"gdn_decode.py": DECODE, "gdn_prefill.py": prefill_source}, version
    )


def test_prefill_import_failure_leaves_decode_targets_alone(fake_flashinfer):
    fake_flashinfer("raise ImportError('cuda.bindings is missing')\n")
    prefill = BY_NAME["flashinfer-prefill-chunk"].unavailable_reason("cpu")
    assert "import flashinfer.gdn_prefill failed (ImportError: cuda.bindings is missing)" in prefill
    # the decode target gets past its API: only the device stops it here
    assert BY_NAME["flashinfer-pretranspose-fp32"].unavailable_reason("cpu").startswith("needs a CUDA GPU")


def test_release_without_a_semantics_row_is_unavailable(fake_flashinfer):
    fake_flashinfer("def chunk_gated_delta_rule(*args, **kwargs): pass\n", version="0.6.4")  # before FlashInfer GDN
    reason = BY_NAME["flashinfer-prefill-chunk"].unavailable_reason("cpu")
    assert reason.startswith("its contract is modelled for releases") and "not for 0.6.4" in reason, reason
    assert "no semantics row for flashinfer.prefill.chunk" in reason
