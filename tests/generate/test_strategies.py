"""The generator reaches every shipped bug class (hypothesis.find proves a drawing exists), and every drawn
Case round-trips through its coordinate."""

import dataclasses

import pytest
from hypothesis import HealthCheck, Phase, find, given, seed, settings
from hypothesis import strategies as st

from fuzz.generate.profiles import BUDGETS
from fuzz.generate.strategies import cases, large_buckets, large_plan
from fuzz.model import dispatch
from fuzz.model.case import Case
from fuzz.model.engines import ENGINES, edges_for
from fuzz.model.known_bugs import BY_ID
from fuzz.model.support import Support
from fuzz.targets.registry import TARGETS, overridden

BY_NAME = {t.name: t for t in TARGETS}
FIND = settings(
    max_examples=3000, database=None, suppress_health_check=list(HealthCheck), derandomize=True, phases=[Phase.generate]
)  # any witness will do: shrinking huge slot ids costs a minute


@pytest.fixture(autouse=True, scope="module")
def cpu_flashinfer():
    with overridden({"flashinfer": "fuzz.standins.flashinfer_cpu"}):
        yield


def _identity(c: Case) -> bool:
    return c.read_slots == tuple(range(c.B))


REACHABLE = {
    "negative padding index": ("flashinfer-pretranspose-fp32", "decode", lambda c: any(c.padded)),
    "all rows padded": ("flashinfer-mtp-fp32", "verify", lambda c: c.B >= 2 and all(c.padded)),
    "intermediate rows by slot (pool > B, non-identity map)": (
        "flashinfer-mtp-fp32",
        "verify",
        lambda c: c.inter_rows and c.pool > c.B and not _identity(c) and max(c.read_slots) >= c.B,
    ),
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
    "saturated gates": ("sglang-packed", "decode", lambda c: c.decay == "saturated"),
    "softplus threshold crossing": ("sglang-packed", "decode", lambda c: c.decay == "threshold"),
    "bf16 state pool": ("flashinfer-bf16", "verify", lambda c: c.state_dtype == "bf16" and c.T > 1),
    "varlen with an empty sequence": ("fla-recurrent", "prefill", lambda c: 0 in c.seqlens and c.B >= 2),
    "padded prefill read with a real write slot": (
        "flashinfer-prefill-chunk",
        "prefill",
        lambda c: any(p and w >= 0 and n > 0 for p, w, n in zip(c.padded, c.write_slots or (), c.seqlens)),
    ),
}


@pytest.mark.parametrize("bug", REACHABLE, ids=lambda s: s.replace(" ", "_"))
def test_strategy_reaches(bug):
    name, op, predicate = REACHABLE[bug]
    found = find(cases(BY_NAME[name], op, BUDGETS["ci"]), predicate, settings=FIND)
    assert predicate(found)


H200 = dataclasses.replace(BUDGETS["h200"], large_bytes=139 << 30)  # as an H200's free memory sizes it
INT32_ELEMENTS = 2**31


@pytest.mark.parametrize("name", ["flashinfer-mtp-fp32", "flashinfer-bf16", "sglang-recurrent"])
def test_large_pool_cases_reach_int32_overflow_and_other_cases_never(name):
    """The large-pool tests draw every case with every request's element offset (slot x slot stride, gaps included)
    in [2^31, 2^32) (a signed int32 wraps it) or in [2^32, 2^33) (an unsigned one does), on every pool dtype, index
    dtype and contiguous or strided pool of the target; the other tests draw none."""
    target, seen, reach = BY_NAME[name], set(), set()

    @settings(max_examples=150, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(cases(target, "verify", H200, large=True))
    def every_large_case(c):
        stride = (c.HV + c.pool_gap) * c.K * c.V
        slots = [s for s in (*c.read_slots, *(c.write_slots or ()), *sum(c.token_slots or (), ())) if s >= 0]
        past = 31 if min(slots, default=c.pool - 1) * stride < 2**32 else 32
        assert all(2**past <= s * stride < 2 ** (past + 1) for s in slots), c
        seen.add((c.state_dtype, c.index_dtype, c.pool_gap > 0))
        reach.add(past)

    every_large_case()
    sup = target.declared()
    assert seen == {
        (d, i, g)
        for d in sup.state_dtypes
        for i in sup.index_dtypes
        for g in ((False, True) if sup.strided_pool else (False,))
    }
    assert reach == {31, 32}
    with pytest.raises(Exception, match="No examples"):
        find(cases(target, "verify", H200), lambda c: c.pool * c.HV * c.K * c.V > INT32_ELEMENTS, settings=FIND)


def test_large_cases_are_not_drawn_where_they_do_not_fit():
    """The memory a large case needs (its pool and the 2^31-element guard below it) is checked against the budget:
    a device with less has no large test, and says why."""
    target = BY_NAME["flashinfer-mtp-fp32"]
    fits, why = large_buckets(target, "verify", dataclasses.replace(H200, large_bytes=12 << 30))
    assert not fits and "GiB" in why, why  # an fp32 pool past 2^31 elements and its guard: 16 GiB
    assert large_buckets(target, "verify", H200) == (large_plan(target.name, "verify", target.declared(), H200), None)


def test_gpu_budgets_draw_warm_calls_on_a_larger_pool_and_cpu_budgets_never():
    """Compile caches keyed without the pool's capacity: a warm call first, on a strided pool too."""
    target = BY_NAME["flashinfer-mtp-fp32"]
    found = find(cases(target, "verify", BUDGETS["h200"]), lambda c: c.warm_pool > 0 and c.pool_gap > 0, settings=FIND)
    assert Case.parse(repr(found)).warm_pool == found.warm_pool
    with pytest.raises(Exception, match="No examples"):
        find(cases(target, "verify", BUDGETS["ci"]), lambda c: c.warm_pool > 0, settings=FIND)


def test_cpu_budget_never_draws_large_pools():
    """Outside the large-pool test no pool comes near int32 element offsets (a CPU holds the largest drawn: the pools
    of the requests that cross a dispatch threshold, about a thousand slots)."""
    target = BY_NAME["flashinfer-mtp-fp32"]
    with pytest.raises(Exception, match="No examples"):
        find(cases(target, "verify", BUDGETS["ci"]), lambda c: c.pool * c.HV * c.K * c.V > 2**24, settings=FIND)


@pytest.mark.parametrize(
    ("name", "op", "T", "buffer", "update"),
    [
        ("flashinfer-bf16", "verify", 2, True, True),
        ("flashinfer-mtp-fp32", "verify", 1, False, True),
        ("flashinfer-decode-kmajor", "decode", 1, False, True),
        ("flashinfer-prefill-chunk", "prefill", 1, False, True),
    ],
)
def test_every_dispatch_threshold_is_crossed_both_ways(name, op, T, buffer, update):
    """fuzz.model.dispatch: for each threshold of the target, cases just short of it and just past it are drawn
    (hypothesis.find proves each side is reachable; straddle draws them for half the cases of such a bucket)."""
    target = BY_NAME[name]
    rows = [t for t in dispatch.thresholds(target.path, target.release()) if t.applies(T, buffer, update)]
    assert rows, name
    sms = dispatch.num_sms()
    for t in rows:
        for above in (False, True):

            def crossed(c, t=t, above=above):
                return (
                    (c.T >= T if op == "verify" else True)
                    and bool(c.inter_rows) == buffer
                    and c.update == update
                    and t.applies(max(c.T, 1), bool(c.inter_rows), c.update)
                    and c.B == t.batch(above, c.H, c.HV, sms)
                )

            if t.batch(above, 1, 1, sms) > 1100:
                continue
            found = find(cases(target, op, BUDGETS["ci"]), crossed, settings=FIND)
            assert t.side(found.B, found.H, found.HV, sms) == (t.above if above else t.below), (t, found)


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


def _stream(target_name: str, op: str, n: int = 80) -> list[str]:
    """The first `n` cases one seed draws for (target, op), as coordinates."""
    drawn: list[str] = []

    @settings(max_examples=n, database=None, suppress_health_check=list(HealthCheck), phases=[Phase.generate])
    @seed(20261203)
    @given(cases(BY_NAME[target_name], op, BUDGETS["ci"]))
    def draw(case):
        drawn.append(repr(case))

    draw()
    return drawn


def test_a_seed_draws_the_same_cases_whatever_else_was_imported(tmp_path, monkeypatch):
    """Hypothesis mixes constants from the source of imported local modules into its draws; gdn-fuzz turns that off
    (profiles.stable_draws), else a test run alone and the same test after others, or a gate's two sides, would
    draw different cases from one seed. A module full of small integers is imported between two draws."""
    before = _stream("flashinfer-mtp-fp32", "verify")
    (tmp_path / "gdn_many_constants.py").write_text("VALUES = (" + ", ".join(str(i) for i in range(2, 400)) + ")\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    importlib.import_module("gdn_many_constants")
    assert _stream("flashinfer-mtp-fp32", "verify") == before


# --- engine targets: the engines' index rules and their contract edges (fuzz.model.engines) -------------------------
class EngineView:
    """A TargetView of a glue target of `engine` (no adapter: the strategies read only this)."""

    path = "test.engine"

    def __init__(self, engine: str, **support):
        self.name = f"fake-{engine}"
        self.support = Support(ops=frozenset({"decode", "verify"}), engine=engine, **support)

    def release(self):
        return None

    def declared(self, bugs=()):
        return self.support

    def semantics(self):
        from fuzz.targets.semantics import Semantics
        from reference import PadContract

        return Semantics(pad=PadContract("negative" if ENGINES[self.support.engine].null < 0 else "zero", "discard"))

    def offset_bits(self):
        return 32


SGLANG_VIEW = EngineView("sglang", intermediate=True, no_update=True, strided_pool=True)
VLLM_VIEW = EngineView("vllm", token_slots=True)


def _live(c: Case) -> list[int]:
    return [n for n, p in enumerate(c.padded) if not p]


ENGINE_CLASSES = {
    "sglang: -1 padding at the tail": (SGLANG_VIEW, "decode", lambda c: c.B >= 2 and c.read_slots[-1] == -1),
    "sglang: the last slot named": (SGLANG_VIEW, "decode", lambda c: c.pool >= 4 and c.pool - 1 in c.read_slots),
    "sglang: a verify scratch of spec_size + 1 rows past the batch": (
        SGLANG_VIEW,
        "verify",
        lambda c: c.inter_rows > c.B >= 2 and not c.update and c.edge is None,
    ),
    "vllm: null-block padding at the tail, accepted 1": (
        VLLM_VIEW,
        "verify",
        lambda c: c.T >= 2 and c.read_slots[-1] == 0 and c.token_slots[-1] == (0,) * c.T and c.accepted[-1] == 1,
    ),
    "vllm: an accepted count that reads an inner column": (
        VLLM_VIEW,
        "verify",
        lambda c: any(1 < c.accepted[n] < c.T for n in _live(c)),
    ),
    "vllm: the last slot named": (
        VLLM_VIEW,
        "verify",
        lambda c: c.pool >= 6 and any(c.pool - 1 in row for row in c.token_slots),
    ),
    **{
        f"{view.support.engine} {op}: edge {edge.id}": (view, op, lambda c, e=edge.id: c.edge == e)
        for view in (SGLANG_VIEW, VLLM_VIEW)
        for op in ("decode", "verify")
        for edge in edges_for(view.support.engine, op)
    },
}


@pytest.mark.parametrize("drawn", ENGINE_CLASSES, ids=lambda s: s.replace(" ", "_"))
def test_engine_targets_draw_each_class_and_each_edge(drawn):
    view, op, predicate = ENGINE_CLASSES[drawn]
    found = find(cases(view, op, BUDGETS["ci"]), predicate, settings=FIND)
    assert predicate(found) and Case.parse(repr(found)) == found


@pytest.mark.parametrize("view", [SGLANG_VIEW, VLLM_VIEW], ids=lambda v: v.support.engine)
@pytest.mark.parametrize("op", ["decode", "verify"])
@settings(max_examples=80, database=None, suppress_health_check=list(HealthCheck), deadline=None, derandomize=True)
@given(data=st.data())
def test_engine_cases_keep_the_engines_rules(view, op, data):
    """Live slots in 1..pool-1, distinct, padded rows (the engine's null) only after the live ones; vLLM: T slots a
    request, the read slot the accepted count's column, padded rows null in every column with accepted 1 (but on the
    flat-indices-multitoken edge: the non-spec path's one index a request over T > 1 tokens, no per-token slots and
    no counts); SGLang's verify: no update, a scratch by batch row with a row per batched request. An edge case breaks
    only its edge."""
    c = data.draw(cases(view, op, BUDGETS["ci"]))
    engine = ENGINES[view.support.engine]
    assert Case.parse(repr(c)) == c and c.null == engine.null
    assert c.edge is None or c.edge in {e.id for e in edges_for(engine.name, op)}
    rows = c.token_slots or tuple((s,) for s in c.read_slots)
    live = [n for n, row in enumerate(rows) if any(s != engine.null for s in row)]  # an edge row is a request too
    inner = [n for n in range(max(live, default=-1)) if n not in live]
    # padding only at the tail, a live request first; but vLLM's one-column request named on the null slot (slot-zero)
    # is a null row like padding
    assert (live and live[0] == 0 and not inner) or (c.edge == "slot-zero" and c.T == 1 and len(inner) <= 1), c
    named = [s for n in live for s in rows[n]]
    if c.edge == "slot-zero":
        named = [s for s in named if s != 0]
    assert all(1 <= s < c.pool for s in named) and len(set(named)) == len(named)
    if engine.accepted and c.edge == "flat-indices-multitoken":
        assert op == "verify" and c.T > 1 and c.token_slots is None and c.accepted is None
        assert all(c.read_slots[n] == 0 for n in range(c.B) if n not in live)
    elif engine.accepted:
        assert c.token_slots is not None and len(c.accepted) == c.B
        for n, (acc, read, row) in enumerate(zip(c.accepted, c.read_slots, c.token_slots)):
            if n not in live:
                assert row == (0,) * c.T and acc == 1 and read == 0
            elif 1 <= acc <= c.T:
                assert read == row[acc - 1]
            else:
                assert c.edge in ("accepted-zero", "accepted-past-T") and read == 0
        assert sum(not 1 <= a <= c.T for a in c.accepted) == (c.edge in ("accepted-zero", "accepted-past-T"))
        assert sum(s == 0 for n in live for s in c.token_slots[n]) == (c.edge == "slot-zero" and c.T > 1)
    else:
        assert c.token_slots is None and c.accepted is None
        assert sum(s == 0 for s in c.read_slots) == (c.edge == "slot-zero")
    if engine.scratch_rows and op == "verify":
        assert not c.update and c.inter_index is None and c.inter_rows >= len(live) + 1
        assert (c.inter_rows < c.B) == (c.edge == "pad-past-scratch")


def test_kernel_targets_draw_no_engine_fields():
    """A target without an engine draws what it drew before the engines came: no accepted counts, no edges."""
    for name, op in (("flashinfer-mtp-fp32", "verify"), ("sglang-sigmoid", "verify"), ("fla-recurrent", "decode")):
        with pytest.raises(Exception, match="No examples"):
            find(cases(BY_NAME[name], op, BUDGETS["ci"]), lambda c: c.accepted or c.edge, settings=FIND)
