"""Hypothesis strategies: draw the *structure* of a case inside a target's declared support.

The compile-relevant part (T, heads, head dims, dtypes, layout, flags) comes from small sets so GPU
campaigns revisit compiled buckets; the cheap part (B, slot maps, padding, values via the seed) varies
freely. Every shipped bug class is reachable: pools below / equal to / far above B with non-identity
slot maps, padding from none to all rows, split read/write slots, T past 4, GVA ratios 1/2/4 and an
illegal one, K != V, bf16/fp16/fp32 inputs, int32/int64 indices, strided pools, sliced intermediate
buffers, saturated gates, and (GPU) slot ids whose element offset overflows int32 and warm calls on
a larger pool first (compile caches keyed without the pool's capacity).
Rare features are drawn as one nonzero value of a small integer (its largest; a middle one for 8 GiB pools,
since Hypothesis draws bounds more often than their share): Hypothesis shrinks toward zero, so minimal cases
shed them unless they matter.
"""
from __future__ import annotations

from hypothesis import strategies as st

from fuzz.case import Case
from fuzz.generate.materialize import GATE_REGIMES
from fuzz.generate.profiles import Budget
from fuzz.targets.base import Target

GATES = tuple(GATE_REGIMES) + ("mixed",)
INT32_ELEMENTS = 2**31


@st.composite
def cases(draw, target: Target, op: str, budget: Budget, bugs: tuple = ()) -> Case:
    """A case for `op` on `target` inside what it declares, narrowed by the masks of the known bugs given."""
    sup = target.declared(bugs)
    sem = target.semantics()
    K, V = draw(st.sampled_from(sup.head_dims or budget.head_dims))
    if sup.heads:
        H, HV = draw(st.sampled_from(sup.heads))
    else:
        H = draw(st.sampled_from((1, 2)))
        HV = H * draw(st.sampled_from(sup.gva_ratios))
    if H > 1 and sup.invalid_gva and draw(st.integers(0, 19)) == 19:
        HV = H + 1  # illegal GVA ratio: every target must reject it cleanly
    max_T = min(budget.max_T, sup.max_T or budget.max_T)
    min_T = sup.verify_min_T if op == "verify" else 1
    T = 1 if op == "decode" else draw(st.sampled_from([t for t in budget.t_choices if min_T <= t <= max_T]))
    B = draw(st.integers(1, budget.max_B))
    seqlens = tuple(draw(st.lists(st.integers(0, max_T), min_size=B, max_size=B))) if op == "prefill" else ()
    if op == "prefill" and not sup.empty_prefill and not any(seqlens):
        seqlens = (1, *seqlens[1:])
    if op == "prefill":
        T = max(seqlens)
    update = not (sup.no_update and op == "verify" and draw(st.booleans()))
    inter_rows = inter_steps = inter_spare = 0
    if sup.intermediate and op == "verify" and (sup.buffer_with_update or not update) and draw(st.booleans()):
        inter_rows = B if sup.exact_rows else B + draw(st.integers(0, 3))
        inter_steps = T + (draw(st.integers(0, 2)) if sup.spare_steps else 0)
        inter_spare = draw(st.integers(0, 2)) if sup.sliced_intermediate else 0
    inter_index = None
    if inter_rows and sup.explicit_rows and draw(st.booleans()):
        rows = draw(st.lists(st.integers(0, inter_rows - 1), unique=True, min_size=B, max_size=B))
        inter_index = tuple(-1 if draw(st.integers(0, 5)) == 5 else r for r in rows)
    slots = draw(slot_maps(sup, sem, B, T, op, update and not inter_rows, budget, K * V * HV))
    # warm calls: GPU budgets only, about 3% of drawn cases (300 drawn: 8), never beside an 8 GiB pool
    warm = (budget.warm_calls and sup.pool and slots["pool"] * K * V * HV < INT32_ELEMENTS
            and draw(st.integers(0, 9)) == 9)
    return Case(
        op=op, H=H, HV=HV, K=K, V=V, T=T, seqlens=seqlens, seed=draw(st.integers(0, 2**32 - 1)),
        **slots, inter_rows=inter_rows, inter_steps=inter_steps, inter_spare_steps=inter_spare, inter_index=inter_index,
        state_dtype=draw(st.sampled_from(sup.state_dtypes)), input_dtype=draw(st.sampled_from(sup.input_dtypes)),
        index_dtype=draw(st.sampled_from(sup.index_dtypes)), layout=draw(st.sampled_from(sup.layouts)),
        gate=draw(st.sampled_from(GATES)), scale=draw(st.sampled_from(budget.scales)),
        l2norm=not (sup.l2norm_off and draw(st.integers(0, 4)) == 4), update=update,
        pool_gap=draw(st.sampled_from(budget.gaps)) if sup.strided_pool else 0,
        warm_pool=draw(st.integers(1, budget.max_pool)) if warm else 0,
    )


@st.composite
def slot_maps(draw, sup, sem, B: int, T: int, op: str, may_scatter: bool, budget: Budget, slot_elems: int) -> dict:
    """Pool size and slot indices. Slots a call writes are distinct from every slot another row reads or
    writes (overlaps race by every library's contract); a sacrificial slot 0 stays out of reach when
    padding redirects there or 0 is the null slot. Unique integer lists shrink toward the identity map."""
    null = sem.pad.null_index
    if not sup.pool:
        return dict(pool=B, read_slots=tuple(range(B)), null=null)
    reserved = 1 if (null == 0 or "slot0" in (sem.pad.read, sem.pad.write)) else 0
    padded = draw(st.lists(st.booleans(), min_size=B, max_size=B))
    real = B - sum(padded)
    token = sup.token_slots and may_scatter and op == "verify" and T >= 2 and draw(st.booleans())
    split = not token and sup.split_write and draw(st.booleans())
    extra = B * T if token else B if split else 0
    need = max(reserved + real + extra, 1)
    pool = draw(st.integers(need, need + draw(st.sampled_from((0, 1, budget.max_pool)))))
    # 8 GiB pools: rare, and alone in memory. 13, not a bound: Hypothesis draws integer bounds far more often than 1/30.
    if budget.large_slots and draw(st.integers(0, 29)) == 13:
        pool = max(pool, INT32_ELEMENTS // slot_elems + need + 1)  # top slots' element offsets pass int32
    # No ids to draw when every row is padded: pool may then be just the reserved slot 0 (empty range).
    ids = iter(draw(st.lists(st.integers(reserved, pool - 1), unique=True, min_size=real + extra,
                             max_size=real + extra)) if real + extra else ())
    out = dict(pool=pool, read_slots=tuple(null if p else next(ids) for p in padded), null=null)
    if token:
        out["token_slots"] = tuple(tuple(next(ids) for _ in range(T)) for _ in range(B))
    elif split:
        writes = tuple(null if draw(st.integers(0, 5)) == 5 else next(ids) for _ in range(B))
        if sem.pad.read == sem.pad.write == "slot0" and null in writes:
            # Slot 0 is scratch that this call writes: a padded read of it is undefined, and so is any state
            # derived from it. Such rows write nowhere either (FlashInfer bf16: the H200 showed it racing).
            writes = tuple(null if p else w for p, w in zip(padded, writes))
        out["write_slots"] = writes
    return out
