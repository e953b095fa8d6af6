"""The generator reaches every shipped bug class (hypothesis.find proves a drawing exists), and every drawn
Case round-trips through its coordinate."""
import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from fuzz.case import Case
from fuzz.generate.profiles import BUDGETS
from fuzz.targets.known_bugs import BY_ID
from fuzz.generate.strategies import INT32_ELEMENTS, cases
from fuzz.targets.registry import TARGETS, set_overrides
from fuzz.targets.base import Support

BY_NAME = {t.name: t for t in TARGETS}
FIND = settings(max_examples=3000, database=None, suppress_health_check=list(HealthCheck), derandomize=True,
                phases=[Phase.generate])  # any witness will do: shrinking huge slot ids costs a minute


@pytest.fixture(autouse=True, scope="module")
def cpu_flashinfer():
    set_overrides({"flashinfer": "fuzz.standins.flashinfer_cpu"})
    yield
    set_overrides({})


def _identity(c: Case) -> bool:
    return c.read_slots == tuple(range(c.B))


REACHABLE = {
    "negative padding index": ("flashinfer-pretranspose-fp32", "decode", lambda c: any(c.padded)),
    "all rows padded": ("flashinfer-mtp-fp32", "verify", lambda c: c.B >= 2 and all(c.padded)),
    "intermediate rows by slot (pool > B, non-identity map)": (
        "flashinfer-mtp-fp32", "verify",
        lambda c: c.inter_rows and c.pool > c.B and not _identity(c) and max(c.read_slots) >= c.B),
    "split read/write slots": ("flashinfer-pretranspose-fp32", "decode", lambda c: c.write_slots is not None),
    "per-token scatter": ("flashinfer-mtp-fp32", "verify", lambda c: c.token_slots is not None),
    "strided pool": ("flashinfer-bf16", "verify", lambda c: c.pool_gap > 0),
    "sliced intermediate buffer": ("sglang-sigmoid", "verify", lambda c: c.inter_spare_steps > 0),
    "explicit intermediate rows": ("sglang-sigmoid", "verify", lambda c: c.inter_index is not None),
    "T beyond 4 with state update off": ("flashinfer-mtp-fp32", "verify", lambda c: c.T > 4 and not c.update),
    "fp16 inputs": ("flashinfer-bf16", "decode", lambda c: c.input_dtype == "fp16"),
    "int64 indices": ("flashinfer-bf16", "decode", lambda c: c.index_dtype == "i64"),
    "GVA ratio 4": ("flashinfer-mtp-fp32", "verify", lambda c: c.HV == 4 * c.H),
    "HV not a multiple of H": ("flashinfer-mtp-fp32", "verify", lambda c: c.HV % c.H != 0),
    "K != V": ("fla-recurrent", "verify", lambda c: c.K != c.V),
    "both state layouts": ("fla-recurrent", "decode", lambda c: c.layout == "kv"),
    "saturated gates": ("sglang-packed", "decode", lambda c: c.gate == "saturated"),
    "softplus threshold crossing": ("sglang-packed", "decode", lambda c: c.gate == "threshold"),
    "bf16 state pool": ("flashinfer-bf16", "verify", lambda c: c.state_dtype == "bf16" and c.T > 1),
    "varlen with an empty sequence": ("fla-recurrent", "prefill", lambda c: 0 in c.seqlens and c.B >= 2),
    "padded prefill read with a real write slot": (
        "flashinfer-prefill-chunk", "prefill",
        lambda c: any(p and w >= 0 and n > 0 for p, w, n in zip(c.padded, c.write_slots or (), c.seqlens))),
}


@pytest.mark.parametrize("bug", REACHABLE, ids=lambda s: s.replace(" ", "_"))
def test_strategy_reaches(bug):
    name, op, predicate = REACHABLE[bug]
    found = find(cases(BY_NAME[name], op, BUDGETS["ci"]), predicate, settings=FIND)
    assert predicate(found)


def test_large_pool_cases_reach_int32_overflow_and_other_cases_never():
    """The large-pool tests draw every case with requests past the int32 element offsets; the others none."""
    target = BY_NAME["flashinfer-mtp-fp32"]

    @settings(max_examples=30, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(cases(target, "verify", BUDGETS["h200"], large=True))
    def every_large_case(c):
        assert c.pool * c.HV * c.K * c.V > INT32_ELEMENTS
        real = [s for s in c.read_slots if s >= 0] + [s for s in c.write_slots or () if s >= 0]
        assert not real or max(real) * c.HV * c.K * c.V >= INT32_ELEMENTS

    every_large_case()
    with pytest.raises(Exception, match="No examples"):
        find(cases(target, "verify", BUDGETS["h200"]), lambda c: c.pool * c.HV * c.K * c.V > INT32_ELEMENTS,
             settings=FIND)


def test_gpu_budgets_draw_warm_calls_on_a_larger_pool_and_cpu_budgets_never():
    """Compile caches keyed without the pool's capacity: a warm call first, on a strided pool too."""
    target = BY_NAME["flashinfer-mtp-fp32"]
    found = find(cases(target, "verify", BUDGETS["h200"]), lambda c: c.warm_pool > 0 and c.pool_gap > 0, settings=FIND)
    assert Case.parse(repr(found)).warm_pool == found.warm_pool
    with pytest.raises(Exception, match="No examples"):
        find(cases(target, "verify", BUDGETS["ci"]), lambda c: c.warm_pool > 0, settings=FIND)


def test_cpu_budget_never_draws_large_pools():
    target = BY_NAME["flashinfer-mtp-fp32"]
    with pytest.raises(Exception, match="No examples"):
        find(cases(target, "verify", BUDGETS["ci"]), lambda c: c.pool > 1000, settings=FIND)


@pytest.mark.parametrize("target", TARGETS, ids=str)
@settings(max_examples=40, database=None, suppress_health_check=list(HealthCheck), deadline=None)
@given(data=st.data())
def test_drawn_cases_round_trip_and_respect_support(target, data):
    op = data.draw(st.sampled_from(sorted(target.support.ops)))
    bugs = target.known_bugs()
    case = data.draw(cases(target, op, BUDGETS["ci"], bugs))
    assert Case.parse(repr(case)) == case
    assert Case.from_json(case.to_json()) == case
    sup = target.declared(bugs)
    assert case.state_dtype in sup.state_dtypes and case.layout in sup.layouts
    written = [s for s in (case.write_slots or case.read_slots) if s >= 0 and not (case.null == 0 and s == 0)]
    assert len(written) == len(set(written)), "duplicate written slots race by contract"
    assert all(s < case.pool for s in case.read_slots)
    if not sup.pool:
        assert _identity(case) and case.pool == case.B
    if case.inter_rows:
        assert case.inter_steps >= case.T
        assert sup.buffer_with_update or not case.update
    assert case.input_dtype in sup.input_dtypes and case.index_dtype in sup.index_dtypes
    pad = target.semantics().pad
    if case.write_slots and pad.read == pad.write == "slot0" and case.null in case.write_slots:
        # slot 0 is scratch written in this call: a row that read it must not store what it computed
        assert all(w == case.null for p, w in zip(case.padded, case.write_slots) if p)
    if case.op == "prefill" and not sup.empty_prefill:
        assert any(case.seqlens)


def test_a_known_bug_narrows_what_is_drawn():
    sup = Support(ops=frozenset({"verify"}), verify_min_T=3)
    narrow = sup.narrowed(index_dtypes=("i32",), verify_min_T=2, strided_pool=False, gva_ratios=(2, 4))
    assert narrow.index_dtypes == ("i32",) and narrow.gva_ratios == (2, 4) and not narrow.strided_pool
    assert narrow.verify_min_T == 3  # a minimum only rises
    assert sup.narrowed(verify_min_T=5).verify_min_T == 5
    # SGLang 0.5.23 loses writes to strided pools and accepts HV % H != 0 (corpus/): those draws are masked
    target = BY_NAME["sglang-recurrent"]
    assert target.support.strided_pool and target.support.invalid_gva
    bugs = target.known_bugs()
    assert {b.id for b in bugs} == {"sglang-unchecked-gva", "sglang-strided-write-lost"}
    assert not target.declared(bugs).strided_pool and not target.declared(bugs).invalid_gva
    assert target.known_bugs("none") == () and target.declared(target.known_bugs("none")).strided_pool


def test_the_wide_vec_mask_draws_buffers_only_without_state_updates(monkeypatch):
    """FlashInfer 0.7.4's bf16 MTP skips the final write-back with a buffer at B*HV >= 128 (`wide-vec-no-writeback`):
    its mask keeps buffers to disable_state_update cases, and those are still drawn."""
    target = BY_NAME["sglang-sigmoid"]
    monkeypatch.setattr(target, "support", target.support.narrowed(**BY_ID["wide-vec-no-writeback"].mask))
    buffered = find(cases(target, "verify", BUDGETS["ci"]), lambda c: c.inter_rows > 0, settings=FIND)
    assert not buffered.update
    with pytest.raises(Exception, match="No examples"):
        find(cases(target, "verify", BUDGETS["ci"]), lambda c: c.inter_rows > 0 and c.update, settings=FIND)
