"""The SM100-only FlashInfer targets (Cake decode, ReplaySSM) on the CPU.

Through the override stand-in fuzz.standins.flashinfer_sm100_cpu: explicit cases pass, a short derandomized
Hypothesis run finds nothing, and a planted bug per contract is caught with its failure class (so the passes above
can fail). Against a fake installed `flashinfer` (no GPU needed): the real targets report the compute capability they
need, then what else a Blackwell host must have, and drawn Cake cases stay on the manifest's (H, HV) pairs
(`scripts/check_cake_manifest.py WHEEL` checks the declared pairs against a wheel's manifest).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz.generate.profiles import BUDGETS
from fuzz.generate.strategies import cases
from fuzz.judge.failures import (
    GdnFailure,
    IntermediateMismatch,
    NonFinite,
    PoolCorruption,
    StateMismatch,
    UnwrittenOutput,
)
from fuzz.model.case import Case
from fuzz.model.known_bugs import masked_reason
from fuzz.run.harness import check_or_raise as check
from fuzz.standins.flashinfer_sm100_cpu import CakeGDNUnsupportedError, FlashInferSM100CPU
from fuzz.targets.registry import flashinfer_sm100

BY_NAME = {t.name: t for t in flashinfer_sm100.TARGETS}
STANDIN = "fuzz.standins.flashinfer_sm100_cpu"
CAKE = ("flashinfer-cake-bf16", "flashinfer-cake-fp32", "flashinfer-cake-kmajor")
REPLAY = "flashinfer-replayssm"
COMMON = dict(K=8, V=16, seed=7, input_dtype="bf16", index_dtype="i32")


EXPLICIT = {
    # a padded read (output untouched, nothing stored), a padded write (output written, no store), a strided pool
    "flashinfer-cake-bf16": Case(
        op="decode",
        H=2,
        HV=4,
        T=1,
        pool=6,
        read_slots=(3, -1, 1),
        write_slots=(4, 2, -1),
        state_dtype="bf16",
        pool_gap=1,
        **COMMON,
    ),
    # a padded read: its output row is written as 0
    "flashinfer-cake-fp32": Case(
        op="decode", H=1, HV=2, T=1, pool=3, read_slots=(2, -1), state_dtype="fp32", decay="mixed", **COMMON
    ),
    "flashinfer-cake-kmajor": Case(
        op="decode", H=1, HV=4, T=1, pool=2, read_slots=(0, 1), state_dtype="fp32", layout="kv", **COMMON
    ),
    # full acceptance with a padded row and every prefix committed into the buffer; int64 verify slots
    REPLAY: Case(
        op="verify",
        H=1,
        HV=2,
        T=4,
        pool=5,
        read_slots=(3, -1, 0),
        inter_rows=4,
        inter_steps=5,
        state_dtype="fp32",
        **{**COMMON, "index_dtype": "i64"},
    ),
}
NOUPDATE = Case(
    op="verify",
    H=2,
    HV=4,
    T=3,
    pool=4,
    read_slots=(1, 2),
    update=False,
    state_dtype="fp32",
    l2norm=False,
    **{**COMMON, "input_dtype": "fp16"},
)


@pytest.mark.parametrize("name", sorted(EXPLICIT))
def test_explicit_cases_pass_through_the_override(name, override):
    override(STANDIN)
    check(BY_NAME[name], EXPLICIT[name], "cpu")


def test_replayssm_noupdate_commits_nothing(override):
    """accept 0 (noupdate) leaves the pool bit-identical; fp16 inputs, no l2norm."""
    override(STANDIN)
    check(BY_NAME[REPLAY], NOUPDATE, "cpu")


def test_invalid_head_ratio_is_rejected_cleanly(override):
    override(STANDIN)
    for name in (*CAKE, REPLAY):
        case = EXPLICIT[name].replace(H=2, HV=3)
        check(BY_NAME[name], case, "cpu")  # raises AcceptedInvalidInput if the call ran


@pytest.mark.parametrize("name", sorted(EXPLICIT))
def test_derandomized_fuzz_finds_nothing(name, override):
    override(STANDIN)
    target, op = BY_NAME[name], next(iter(BY_NAME[name].support.ops))
    seen = []

    @settings(
        max_examples=60,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    @given(cases(target, op, BUDGETS["ci"]))
    def run(case: Case) -> None:
        seen.append(case)
        check(target, case, "cpu")

    run()
    assert len(seen) >= 60
    assert any(any(c.padded) for c in seen) or name == "flashinfer-cake-kmajor"
    if name == REPLAY:
        assert any(c.inter_rows for c in seen) and any(not c.update for c in seen)


# ---- planted bugs: one per contract the targets judge --------------------------------------------------------
class CommitDropsLastToken(FlashInferSM100CPU):
    def commit_row(self, S, rawk, rawv, log_g, beta, hmap, accepted, use_l2norm, track=None):
        return super().commit_row(S, rawk, rawv, log_g, beta, hmap, accepted - 1, use_l2norm, track)


class WindowNotCached(FlashInferSM100CPU):
    """Verify leaves the windows as allocated (NaN): the commit replays garbage."""

    def cache_window(self, windows, slot, k, v, log_g, beta):
        pass


class CommitWrongBelowFull(FlashInferSM100CPU):
    """Right at full acceptance (what the pool sees), one token short of every other prefix but the first."""

    def commit_row(self, S, rawk, rawv, log_g, beta, hmap, accepted, use_l2norm, track=None):
        accepted = accepted if accepted in (1, rawk.shape[1]) else accepted - 1
        return super().commit_row(S, rawk, rawv, log_g, beta, hmap, accepted, use_l2norm, track)


class CakePadRedirectsToSlot0(FlashInferSM100CPU):
    """The CuTe bf16 contract (-1 reads slot 0) on the Cake path, whose kernels skip the row."""

    def read_slot(self, path, idx):
        if path == "cake-bf16":
            return idx.clamp(min=0), torch.ones_like(idx, dtype=torch.bool)
        return super().read_slot(path, idx)


class CakeFp32PadNotZeroed(FlashInferSM100CPU):
    def pad_output(self, out, rows):
        pass


COMMIT_DROPS_LAST = CommitDropsLastToken()
WINDOW_NOT_CACHED = WindowNotCached()
COMMIT_WRONG_BELOW_FULL = CommitWrongBelowFull()
CAKE_PAD_TO_SLOT0 = CakePadRedirectsToSlot0()
CAKE_FP32_PAD_NOT_ZEROED = CakeFp32PadNotZeroed()

PLANTED = {
    "COMMIT_DROPS_LAST": (REPLAY, EXPLICIT[REPLAY], StateMismatch),
    "WINDOW_NOT_CACHED": (REPLAY, EXPLICIT[REPLAY], NonFinite),
    "COMMIT_WRONG_BELOW_FULL": (REPLAY, EXPLICIT[REPLAY], IntermediateMismatch),
    "CAKE_PAD_TO_SLOT0": ("flashinfer-cake-bf16", EXPLICIT["flashinfer-cake-bf16"], PoolCorruption),
    "CAKE_FP32_PAD_NOT_ZEROED": ("flashinfer-cake-fp32", EXPLICIT["flashinfer-cake-fp32"], UnwrittenOutput),
}


@pytest.mark.parametrize("mutant", sorted(PLANTED))
def test_planted_bug_is_caught(mutant, override):
    name, case, failure = PLANTED[mutant]
    override(f"{__name__}:{mutant}")
    with pytest.raises(GdnFailure) as caught:
        check(BY_NAME[name], case, "cpu")
    assert isinstance(caught.value, failure), f"{type(caught.value).__name__}: {caught.value}"


def test_a_prefix_only_commit_bug_needs_the_buffer(override):
    """COMMIT_WRONG_BELOW_FULL is right where the pool looks: only the committed prefixes show it."""
    override(f"{__name__}:COMMIT_WRONG_BELOW_FULL")
    check(BY_NAME[REPLAY], EXPLICIT[REPLAY].replace(inter_rows=0, inter_steps=0), "cpu")


# ---- the stand-in's host contract ----------------------------------------------------------------------------
def _decode_inputs(B=2, H=1, HV=2, K=8, V=16, dtype=torch.bfloat16):
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(B, 1, H, K, generator=g).to(dtype) for _ in range(2))
    v = torch.randn(B, 1, HV, V, generator=g).to(dtype)
    a, b = (torch.randn(B, 1, HV, generator=g).to(dtype) for _ in range(2))
    return dict(q=q, k=k, v=v, A_log=torch.zeros(HV), a=a, dt_bias=torch.zeros(HV), b=b)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(dtype=torch.float16), "BF16 Q/K/V"),
        (dict(index=torch.int64), "int32 state indices"),
        (dict(use_qk_l2norm=False), "L2 normalization"),
        (dict(no_pool=True), "indexed state pool"),
    ],
)
def test_cake_host_contract_fails_closed(change, message):
    x = _decode_inputs(dtype=change.get("dtype", torch.bfloat16))
    pool = torch.zeros(3, 2, 16, 8, dtype=torch.bfloat16)
    slots = torch.tensor([0, 2], dtype=change.get("index", torch.int32))
    with pytest.raises(CakeGDNUnsupportedError, match=message):
        FlashInferSM100CPU().gated_delta_rule_decode_pretranspose(
            **x,
            state=pool if change.get("no_pool") else None,
            initial_state=None if change.get("no_pool") else pool,
            initial_state_indices=None if change.get("no_pool") else slots,
            use_qk_l2norm=change.get("use_qk_l2norm", True),
            backend="cake_gdn",
        )


def test_cake_out_of_pool_slot_is_skipped_like_padding():
    x = _decode_inputs()
    pool = torch.randn(3, 2, 16, 8).to(torch.bfloat16)
    before, out = pool.clone(), torch.full((2, 1, 2, 16), 7.0, dtype=torch.bfloat16)
    FlashInferSM100CPU().gated_delta_rule_decode_pretranspose(
        **x,
        state=None,
        output=out,
        initial_state=pool,
        initial_state_indices=torch.tensor([5, 1], dtype=torch.int32),
        backend="cake_gdn",
    )
    assert torch.equal(out[0], torch.full_like(out[0], 7.0)) and not torch.equal(out[1], torch.full_like(out[1], 7.0))
    assert torch.equal(pool[[0, 2]], before[[0, 2]]) and not torch.equal(pool[1], before[1])


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(T=2), "T >= 3"),
        (dict(disable_state_update=False), "frozen"),
        (dict(rawv_dtype=torch.float32), "replayssm_rawv"),
    ],
)
def test_replayssm_verify_contract(kw, message):
    B, T, H, HV, K, V, P = 1, kw.get("T", 3), 1, 2, 8, 16, 2
    q = k = torch.zeros(B, T, H, K, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=message):
        FlashInferSM100CPU().gated_delta_rule_mtp(
            q,
            k,
            torch.zeros(B, T, HV, V, dtype=torch.bfloat16),
            torch.zeros(P, HV, V, K),
            torch.tensor([1]),
            torch.zeros(HV),
            torch.zeros(B, T, HV, dtype=torch.bfloat16),
            torch.zeros(HV),
            torch.zeros(B, T, HV, dtype=torch.bfloat16),
            disable_state_update=kw.get("disable_state_update", True),
            cache_replayssm=True,
            replayssm_rawv=torch.zeros(P, HV, T, V, dtype=kw.get("rawv_dtype", torch.bfloat16)),
            replayssm_rawk=torch.zeros(P, H, T, K, dtype=torch.bfloat16),
            replayssm_g=torch.zeros(P, HV, T),
            replayssm_beta=torch.zeros(P, HV, T),
        )


def test_replayssm_commit_tracks_a_step_and_refuses_tcgen05_at_short_windows():
    L, P, H, HV, T, D = 1, 3, 1, 2, 3, 8
    g = torch.Generator().manual_seed(1)
    ckpt = torch.randn(L, P, HV, D, D, generator=g)
    rawv = torch.randn(L, P, HV, T, D, generator=g).to(torch.bfloat16)
    rawk = torch.randn(L, P, H, T, D, generator=g).to(torch.bfloat16)
    log_g, beta = -torch.rand(L, P, HV, T, generator=g), torch.rand(L, P, HV, T, generator=g)
    caches = (rawv, rawk, log_g, beta)
    one = lambda x: torch.tensor([x], dtype=torch.int32)
    standin = FlashInferSM100CPU()
    with pytest.raises(ValueError, match="tcgen05"):
        standin.gated_delta_rule_replayssm_commit(ckpt.clone(), *caches, one(0), one(1), backend="tcgen05")
    two = ckpt.clone()
    standin.gated_delta_rule_replayssm_commit(two, *caches, one(0), one(2))
    tracked = ckpt.clone()
    standin.gated_delta_rule_replayssm_commit(
        tracked, *caches, one(0), one(3), track_state_indices=one(2), track_steps=one(1)
    )
    assert torch.equal(tracked[0, 2], two[0, 0])  # the state after 2 tokens, saved on the way to 3
    assert not torch.equal(tracked[0, 0], two[0, 0]) and torch.equal(tracked[0, 1], ckpt[0, 1])


# ---- the real targets, against a fake installed flashinfer -------------------------------------------------------
GDN_DECODE = "".join(
    f"def {name}(*args, **kwargs): pass\n"
    for name in (
        "gated_delta_rule_decode_pretranspose",
        "gated_delta_rule_mtp",
        "gated_delta_rule_decode",
        "gated_delta_rule_replayssm_commit",
    )
)


@pytest.fixture
def fake_flashinfer(fake_flashinfer_package, tmp_path):
    """A fake flashinfer 0.7.4 and a fake GPU of a chosen compute capability (None: no GPU)."""
    cuda_home = tmp_path / "cuda"

    def install(capability, cake_available=True, nvcc=True):
        if nvcc:
            (cuda_home / "bin").mkdir(parents=True, exist_ok=True)
            (cuda_home / "bin" / "nvcc").write_text("")
        fake_flashinfer_package(
            {
                "gdn_decode.py": GDN_DECODE + f"_CAKE_GDN_AVAILABLE = {cake_available}\n",
                "jit/cpp_ext.py": f"def get_cuda_path():\n    return {str(cuda_home)!r}\n",
                "gdn_kernels/gdn_replayssm_spec_fold.py": "",
            },
            capability=capability,
        )

    return install


def test_real_targets_name_compute_capability_10_off_a_gpu(fake_flashinfer):
    fake_flashinfer(None)
    for name in CAKE:
        assert BY_NAME[name].unavailable_reason("cpu") == "needs a CUDA GPU, compute capability (10,); device here: cpu"
    assert BY_NAME[REPLAY].unavailable_reason("cpu").startswith("needs a CUDA GPU, compute capability (10, 12)")


def test_real_targets_on_an_h200(fake_flashinfer):
    fake_flashinfer((9, 0))
    for name in CAKE:
        assert BY_NAME[name].unavailable_reason("cuda") == "needs compute capability major in (10,); this GPU is sm_9x"
    assert BY_NAME[REPLAY].unavailable_reason("cuda") == "needs compute capability major in (10, 12); this GPU is sm_9x"


def test_real_targets_on_a_b200(fake_flashinfer):
    fake_flashinfer((10, 0))
    for name in (*CAKE, REPLAY):
        assert BY_NAME[name].unavailable_reason("cuda") is None, name
    for name in (*CAKE, REPLAY):
        assert masked_reason(BY_NAME[name].known_bugs(), sorted(BY_NAME[name].support.ops)[0]) is None, name


@settings(max_examples=60, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_cake_draws_stay_on_the_manifest_heads(fake_flashinfer, data):
    """Off-manifest geometries fail closed (CakeGDNUnsupportedError): only an illegal GVA ratio may leave them."""
    fake_flashinfer((10, 0))
    target = BY_NAME[data.draw(st.sampled_from(CAKE))]
    case = data.draw(cases(target, "decode", BUDGETS["h200"]))
    assert (case.H, case.HV) in target.support.heads or case.HV == case.H + 1


@pytest.mark.parametrize(
    "capability, kw, reason",
    [
        ((10, 0), dict(cake_available=False), "_CAKE_GDN_AVAILABLE is False"),
        ((10, 0), dict(nvcc=False), "bin/nvcc does not exist"),
        ((10, 1), {}, "Cake GDN compiles for compute capability"),
    ],
)
def test_cake_needs_its_backend_nvcc_and_a_listed_sm100(fake_flashinfer, capability, kw, reason):
    fake_flashinfer(capability, **kw)
    for name in CAKE:
        assert reason in BY_NAME[name].unavailable_reason("cuda")


def test_replayssm_on_sm120_needs_12_0(fake_flashinfer):
    fake_flashinfer((12, 1))
    assert (
        BY_NAME[REPLAY].unavailable_reason("cuda")
        == "ReplaySSM needs compute capability 10.x or 12.0; this GPU is (12, 1)"
    )
    fake_flashinfer((12, 0))
    assert BY_NAME[REPLAY].unavailable_reason("cuda") is None
