"""Release contracts (fuzz.targets.contract, fuzz.targets.flashinfer_contract) for any module that reports a release.

A module that reports a FlashInfer release (`__version__`) gets that release's contract, its semantics row and its
known bugs, given as an override as much as installed; a CPU stand-in (RUNS_ON = "cpu") keeps the shape
preconditions without the GPU; a module that reports no release keeps no hardware limits. The stand-in behind a
release's API rejects what the release rejects, and the ci profile draws what it accepts. A library's own "unsupported
on this device" error makes the target unavailable with its reason, in the single-case and the serving tests, never a
RejectedValidInput finding.
"""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings

from fuzz.generate.profiles import BUDGETS
from fuzz.generate.strategies import cases
from fuzz.judge.failures import RejectedValidInput
from fuzz.model.case import Case
from fuzz.model.known_bugs import known_bugs
from fuzz.run.harness import check
from fuzz.standins import flashinfer_cpu
from fuzz.targets import flashinfer
from fuzz.targets.flashinfer_contract import HEAD_128, SM90_PLUS
from fuzz.targets.semantics import semantics_for
from fuzz.targets.unsupported import unsupported_here

BY_NAME = {t.name: t for t in flashinfer.TARGETS}
ROOT = Path(__file__).resolve().parents[2]
CAKE_ON_SM90 = "Cake GDN supports only SM100a/SM103a, got compute capability 9.0"  # jit/cake_gdn.py's phrasing


def _module(name: str, **attributes) -> str:
    """An importable module holding `attributes`; its name (an override spec)."""
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    sys.modules[name] = module
    return name


# ---- defect 1: an override that reports a release was fuzzed without that release's contract -----------------------
def test_an_override_reporting_a_release_gets_its_contract_semantics_and_bugs(override):
    """The 0.7.2.post1 API as a plain module reporting 0.7.2.post1 (no RUNS_ON: it claims the real library's device):
    K = V = 128 and SM90+ as installed, unavailable on the CPU, and the release's semantics row and known bugs."""
    api = flashinfer_cpu.release_api("0.7.2.post1")
    override(
        _module(
            "_gdn_contract_0_7_2",
            __version__="0.7.2.post1",
            **{name: getattr(api, name) for name in flashinfer_cpu.RELEASE_SIGNATURES["0.7.2.post1"]},
        )
    )
    for target in flashinfer.TARGETS:
        sup = target.declared()
        assert target.release() == "0.7.2.post1", target.name
        assert sup.head_dims == HEAD_128 and set(sup.arch) <= set(SM90_PLUS) and sup.arch, target.name
        assert target.unavailable_reason("cpu").startswith("needs a CUDA GPU"), target.name
        assert target.semantics() == semantics_for(target.path, "0.7.2.post1")
        assert target.known_bugs() == known_bugs(target.path, "0.7.2.post1")
    assert any(target.known_bugs() for target in flashinfer.TARGETS)  # the release's masks apply (as installed)


def test_a_cpu_standin_of_a_release_keeps_its_shapes_not_its_gpu(override):
    override("fuzz.standins.flashinfer_cpu:release_0_7_2")
    for target in flashinfer.TARGETS:
        sup = target.declared()
        assert (sup.head_dims, sup.arch) == (HEAD_128, ()), target.name
        assert target.unavailable_reason("cpu") is None, target.name
    override("fuzz.standins.flashinfer_cpu:release_0_6_5")  # 0.6.5's bf16 kernels: T in 1..4
    assert BY_NAME["flashinfer-bf16"].declared().max_T == 4


def test_an_override_reporting_no_release_keeps_no_hardware_limits(override):
    """Today's behaviour, kept: the 0.7.4 stand-in module reports no release, so only Support limits it."""
    override("fuzz.standins.flashinfer_cpu")
    for target in flashinfer.TARGETS:
        sup = target.declared()
        assert target.release() is None and target.contract() is None
        assert (sup.head_dims, sup.arch, sup.max_T) == (None, (), None), target.name


# ---- defect 3: the CPU stand-in accepted what the release rejects ---------------------------------------------------
def _decode(K, V, T=1, state=torch.float32, B=1, HV=1):
    q = torch.randn(B, T, 1, K).to(torch.bfloat16)
    return dict(
        q=q,
        k=q.clone(),
        v=torch.randn(B, T, HV, V).to(torch.bfloat16),
        state=None,
        A_log=torch.zeros(HV),
        a=torch.zeros(B, T, HV).to(torch.bfloat16),
        dt_bias=torch.zeros(HV),
        b=torch.zeros(B, T, HV).to(torch.bfloat16),
        initial_state=torch.zeros(2, HV, V, K, dtype=state),
        initial_state_indices=torch.tensor([1] * B, dtype=torch.int32),
    )


@pytest.mark.parametrize(
    ("release", "K", "V", "T", "state", "message"),
    [
        ("0.7.2.post1", 8, 8, 1, torch.float32, "K=8, V=8"),  # the fp32 asserts: K, V >= 128
        ("0.7.2.post1", 64, 128, 1, torch.bfloat16, "K=64, V=128"),  # bf16 kernels only at K = V = 128
        ("0.6.5", 128, 128, 5, torch.bfloat16, "T=5"),  # 0.6.5: bf16 kernels for T <= 4
    ],
)
def test_the_standin_rejects_what_its_release_rejects(release, K, V, T, state, message):
    api = flashinfer_cpu.release_api(release)
    kw = _decode(K, V, T, state)
    if release == "0.6.5":  # no pool keywords yet: the batch's states are `state`
        kw.update(state=kw.pop("initial_state")[:1], initial_state_indices=None)
        kw.pop("initial_state_indices")
    with pytest.raises(AssertionError, match=message):
        api.gated_delta_rule_decode_pretranspose(**kw)
    ok = _decode(128, 128, min(T, 4), state)
    if release == "0.6.5":
        ok.update(state=ok.pop("initial_state")[:1])
        ok.pop("initial_state_indices")
    api.gated_delta_rule_decode_pretranspose(**ok)  # inside the contract: runs


def test_a_case_outside_the_contract_is_rejected_through_the_harness(override):
    """What the ci profile drew for a release's stand-in before (K = 8): the stand-in now rejects it as the release
    does, so it must not be drawn (next test)."""
    override("fuzz.standins.flashinfer_cpu:release_0_7_2")
    case = Case(op="decode", H=1, HV=2, K=8, V=8, T=1, pool=3, read_slots=(1,), seed=1)
    result = check(BY_NAME["flashinfer-pretranspose-fp32"], case, "cpu")
    assert result.failure is not None and result.failure.kind == RejectedValidInput.__name__
    assert "K=8, V=8" in result.failure.notes[0]


# ---- defect 4: the ci profile drew the CPU dims for a release's stand-in --------------------------------------------
@pytest.mark.parametrize("name", ["flashinfer-bf16", "flashinfer-mtp-fp32"])
def test_the_ci_profile_draws_what_the_release_accepts_within_a_cpu_budget(name, override):
    override("fuzz.standins.flashinfer_cpu:release_0_7_2")
    target, budget, drawn = BY_NAME[name], BUDGETS["ci"], []
    op = "verify"

    @settings(max_examples=40, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(case=cases(target, op, budget, target.known_bugs()))
    def run(case):
        drawn.append(case)

    run()
    assert drawn and all((c.K, c.V) == (128, 128) for c in drawn)
    # K = V = 128 on a CPU: few requests, few spare slots past those they need (slot 0, a read and a write or a slot
    # per token each), short calls (Budget.for_dims)
    assert all(c.B <= budget.heavy_B and c.T <= budget.heavy_T for c in drawn)
    assert all(c.pool <= 1 + c.B * (1 + c.T) + budget.heavy_pool for c in drawn)
    result = check(target, drawn[-1], "cpu")
    assert result.failure is None, result.failure.message


# ---- defect 2: the library's "unsupported on this device" was judged RejectedValidInput -----------------------------
@pytest.mark.parametrize(
    ("cls", "message", "unsupported"),
    [
        ("CakeGDNUnsupportedError", CAKE_ON_SM90, True),
        ("CakeGDNUnsupportedError", "unsupported decode head mapping", False),  # the inputs, not the device
        (
            "BackendSupportedError",
            "gated_delta_rule_decode does not support backend 'cake_gdn' with capability 90",
            True,
        ),
        ("BackendSupportedError", "Backend 'x' is not supported for gated_delta_rule_decode", False),
        ("RuntimeError", CAKE_ON_SM90, False),  # the phrasing alone is not enough: the library's class too
    ],
)
def test_unsupported_here_is_an_explicit_classifier(cls, message, unsupported):
    error = type(cls, (NotImplementedError,), {})(message)
    assert (unsupported_here(error) == f"{cls}: {message}") if unsupported else unsupported_here(error) is None


def _unsupported_module(name: str) -> str:
    class CakeGDNUnsupportedError(NotImplementedError):
        pass

    def gated_delta_rule_decode_pretranspose(*args, **kwargs):
        raise CakeGDNUnsupportedError(CAKE_ON_SM90)

    return _module(
        name,
        CakeGDNUnsupportedError=CakeGDNUnsupportedError,
        gated_delta_rule_decode_pretranspose=gated_delta_rule_decode_pretranspose,
    )


def test_unsupported_on_this_device_makes_the_check_unavailable_not_a_finding(override):
    override(_unsupported_module("_gdn_contract_unsupported"))
    case = Case(op="decode", H=1, HV=1, K=8, V=8, T=1, pool=2, read_slots=(1,), seed=0)
    result = check(BY_NAME["flashinfer-pretranspose-fp32"], case, "cpu")
    assert result.failure is None and result.outcome == "unavailable"
    assert result.unavailable == f"CakeGDNUnsupportedError: {CAKE_ON_SM90}"


UNSUPPORTED_MODULE = f"""
class CakeGDNUnsupportedError(NotImplementedError):
    pass


def gated_delta_rule_decode_pretranspose(*args, **kwargs):
    raise CakeGDNUnsupportedError({CAKE_ON_SM90!r})
"""


def test_fuzz_and_serving_tests_skip_a_target_the_library_says_this_device_cannot_run(tmp_path):
    """Through pytest: the single-case decode test and the serving test of the target end skipped with the library's
    reason (the run passes), where both failed with a RejectedValidInput finding before."""
    (tmp_path / "gdn_unsupported_here.py").write_text(UNSUPPORTED_MODULE)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "fuzz/test_decode.py",
            "fuzz/test_serving.py",
            "--hypothesis-profile=ci",
            "-k",
            "flashinfer-pretranspose-fp32",
            "-q",
            "-rs",
            "-p",
            "no:warnings",
            "-p",
            "no:cacheprovider",
            "--gdn-examples=4",
            "--gdn-target",
            "flashinfer=gdn_unsupported_here",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "PYTHONPATH": f"{ROOT}:{tmp_path}"},
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    skipped = [line for line in out.splitlines() if line.startswith("SKIPPED") and "supports only SM100a" in line]
    assert len(skipped) == 2, out[-3000:]  # test_decode and test_serving, each with the library's reason
    assert " failed" not in out
