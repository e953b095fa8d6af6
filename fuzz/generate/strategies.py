"""Hypothesis strategies: draw the *structure* of a case inside a target's declared support.

A case is a compile bucket (what a compiled kernel is keyed by: head dims and counts, T, dtypes, layout, strides,
flags; `Bucket`) plus the cheap part (B, slot maps, padding, buffers' spare rows, gates, the seed). On a GPU a new
bucket costs a 1-9 s kernel compile while a case inside a compiled one costs well under a millisecond of kernel, so
GPU budgets draw buckets from a fixed plan most of the time (`bucket_plan`: a deterministic sample of the bucket
space, simplest first, the same in every process, so an example database and a corpus replay decode the same cases)
and open an unplanned one now and then (one case in `Budget.open_every`); the CPU budgets draw every bucket freely.

Every shipped bug class is reachable: pools below / equal to / far above B with non-identity slot maps, padding from
none to all rows, split read/write slots, T past 4, GVA ratios 1/2/4 and an illegal one, K != V, bf16/fp16/fp32
inputs, int32/int64 indices, strided pools, sliced intermediate buffers, output=None, saturated gates, calls after a
warm-up call on a larger pool (compile caches keyed without the capacity) and, in tests of their own (`large`), pools
whose top slots' element offsets pass int32 (8 GiB on a GPU).
Rare features are drawn as one nonzero value of a small integer (its largest): Hypothesis shrinks toward zero, so
minimal cases shed them unless they matter.
"""
from __future__ import annotations

import functools
import random
from dataclasses import dataclass

from hypothesis import strategies as st

from fuzz.case import Case

from fuzz.generate.profiles import Budget
from fuzz.targets.base import Support, Target

INT32_ELEMENTS = 2**31


@dataclass(frozen=True, order=True)
class Bucket:
    """The compile-relevant part of a case (fields ordered simplest first for sorting)."""

    T: int  # prefill: 0 (varlen: the longest sequence is not a compile constant)
    H: int
    HV: int
    K: int
    V: int
    strided: bool
    buffer: bool  # an intermediate buffer
    update: bool
    state_dtype: str
    input_dtype: str
    index_dtype: str
    layout: str


def draw_bucket(choice, sup: Support, op: str, budget: Budget) -> Bucket:
    """A bucket inside the support; `choice(options)` picks one (Hypothesis' draw, or a seeded Random's)."""
    K, V = choice(sup.head_dims or budget.head_dims)
    if sup.heads:
        H, HV = choice(sup.heads)
    else:
        H = choice((1, 2))
        HV = H * choice(sup.gva_ratios)
    max_T = min(budget.max_T, sup.max_T or budget.max_T)
    min_T = sup.verify_min_T if op == "verify" else 1
    T = {"decode": 1, "prefill": 0}.get(op) or choice([t for t in budget.t_choices if min_T <= t <= max_T])
    update = not (sup.no_update and op == "verify" and choice((False, True)))
    buffer = (sup.intermediate and op == "verify" and (sup.buffer_with_update or not update)
              and choice((False, True)))
    return Bucket(T, H, HV, K, V, strided=sup.strided_pool and max(budget.gaps) > 0 and choice((False, True)),
                  buffer=buffer, update=update, state_dtype=choice(sup.state_dtypes),
                  input_dtype=choice(sup.input_dtypes), index_dtype=choice(sup.index_dtypes),
                  layout=choice(sup.layouts))


@functools.lru_cache(maxsize=256)
def bucket_plan(target_name: str, op: str, sup: Support, budget: Budget) -> tuple[Bucket, ...]:
    """Budget.plan_size distinct buckets of this target and operation, from a Random seeded by their names and
    Budget.plan_seed: the same plan in every process and on every host."""
    rng = random.Random(f"{target_name}:{op}:{budget.plan_seed}")
    plan: set[Bucket] = set()
    for _ in range(budget.plan_size * 20):
        if len(plan) == budget.plan_size:
            break
        plan.add(draw_bucket(rng.choice, sup, op, budget))
    return tuple(sorted(plan))


@st.composite
def cases(draw, target: Target, op: str, budget: Budget, bugs: tuple = (), large: bool = False) -> Case:
    """A case for `op` on `target` inside what it declares, narrowed by the masks of the known bugs given. `large`:
    a pool whose top slots' element offsets pass int32 (int32 offset overflow), few requests."""
    sup = target.declared(bugs)
    sem = target.semantics()
    pick = lambda options: draw(st.sampled_from(options))  # noqa: E731
    planned = budget.plan_size and draw(st.integers(0, budget.open_every - 1)) < budget.open_every - 1
    bucket = pick(bucket_plan(target.name, op, sup, budget)) if planned else draw_bucket(pick, sup, op, budget)
    H, HV, T = bucket.H, bucket.HV, bucket.T
    if H > 1 and sup.invalid_gva and draw(st.integers(0, 19)) == 19:
        HV = H + 1  # illegal GVA ratio: every target must reject it cleanly
    most = min(budget.max_B, 4) if large else budget.max_B
    B = draw(st.integers(min(sup.single_head_min_B if H == 1 else 1, most), most))
    seqlens = ()
    if op == "prefill":
        max_T = min(budget.max_T, sup.max_T or budget.max_T)
        seqlens = tuple(draw(st.lists(st.integers(0, max_T), min_size=B, max_size=B)))
        if not sup.empty_prefill and not any(seqlens):
            seqlens = (1, *seqlens[1:])
        T = max(seqlens)
    inter_rows = inter_steps = inter_spare = 0
    if bucket.buffer:
        inter_rows = B if sup.exact_rows else B + draw(st.integers(0, 3))
        inter_steps = T + (draw(st.integers(0, 2)) if sup.spare_steps else 0)
        inter_spare = draw(st.integers(0, 2)) if sup.sliced_intermediate else 0
    inter_index = None
    if inter_rows and sup.explicit_rows and draw(st.booleans()):
        rows = draw(st.lists(st.integers(0, inter_rows - 1), unique=True, min_size=B, max_size=B))
        inter_index = tuple(-1 if draw(st.integers(0, 5)) == 5 else r for r in rows)
    elements = bucket.K * bucket.V * HV
    slots = draw(slot_maps(sup, sem, B, T, op, bucket.update and not inter_rows, budget,
                           INT32_ELEMENTS // elements + 1 if large else 0))
    # warm calls: GPU budgets only, about 3% of drawn cases, never beside an int32-overflowing pool
    warm = budget.warm_calls and sup.pool and not large and draw(st.integers(0, 29)) == 29
    return Case(
        op=op, H=H, HV=HV, K=bucket.K, V=bucket.V, T=T, seqlens=seqlens, seed=draw(st.integers(0, 2**32 - 1)),
        **slots, inter_rows=inter_rows, inter_steps=inter_steps, inter_spare_steps=inter_spare, inter_index=inter_index,
        state_dtype=bucket.state_dtype, input_dtype=bucket.input_dtype, index_dtype=bucket.index_dtype,
        layout=bucket.layout, gate=draw(st.sampled_from(sup.gate_regimes)), scale=draw(st.sampled_from(budget.scales)),
        l2norm=not (sup.l2norm_off and draw(st.integers(0, 4)) == 4), update=bucket.update,
        pool_gap=draw(st.sampled_from([g for g in budget.gaps if g])) if bucket.strided else 0,
        warm_pool=draw(st.integers(1, budget.max_pool)) if warm else 0,
        output_given=not (sup.output_optional and draw(st.integers(0, 3)) == 3),
    )


@st.composite
def slot_maps(draw, sup, sem, B: int, T: int, op: str, may_scatter: bool, budget: Budget, min_pool: int = 0) -> dict:
    """Pool size and slot indices. Slots a call writes are distinct from every slot another row reads or
    writes (overlaps race by every library's contract); a sacrificial slot 0 stays out of reach when
    padding redirects there or 0 is the null slot. Unique integer lists shrink toward the identity map.
    min_pool > 0: at least that many slots, with requests on the top ones (their offsets are what overflows)."""
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
    low = reserved
    if min_pool:  # requests on the top slots, whose element offsets pass int32
        pool = max(pool, min_pool + real + extra)
        low = max(reserved, min_pool, pool - 4 * (real + extra))
    # No ids to draw when every row is padded: pool may then be just the reserved slot 0 (empty range).
    ids = iter(draw(st.lists(st.integers(low, pool - 1), unique=True, min_size=real + extra,
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
