"""Hypothesis strategies: draw the *structure* of a case inside a target's declared support.

A case is a compile bucket (what a compiled kernel is keyed by: head dims and counts, T, dtypes, layout, strides,
flags; `Bucket`) plus the cheap part (B, slot maps, padding, buffers' spare rows, gates, the seed). On a GPU a new
compile key costs a 1-9 s kernel compile, serialized per kernel module across the processes that share FlashInfer's
cache, while a case inside a compiled one costs well under a millisecond of kernel, so
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

import dataclasses
import functools
import random
from dataclasses import dataclass

from hypothesis import strategies as st

from fuzz.generate.profiles import Budget, stable_draws
from fuzz.model import dispatch
from fuzz.model.case import Case
from fuzz.model.engines import ENGINES, Engine, edges_for, empty_extend
from fuzz.model.footprint import peak_bytes
from fuzz.model.support import Support, TargetView

stable_draws()  # a seed names one case stream, whatever else the process imported

LARGE_SPARE = 64  # slots of a large pool from its first slot whose offset passes 2^31 (2^32): the requests live there


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
    # Case flags that FlashInfer 0.7.4 keys its compiled kernels by beside the above (gdn_decode_bf16_state.py
    # cache_key: cache_steps, pool_size of a strided pool, same_pool, disable_output, per_token_pool_scatter,
    # use_qk_l2norm_in_kernel; gdn_decode_mtp.py: cache_steps, pool_strides_key = (shape[0], *strides) of a strided
    # pool, per_token_pool_scatter, use_qk_l2norm), so a bucket fixes them: drawn per case, every case of a bucket
    # compiled anew.
    l2norm: bool = True
    output_given: bool = True
    spare_steps: int = 0  # intermediate buffer steps past T
    sliced: int = 0  # steps of a longer buffer the case's view leaves out (a sliced [:, :T + spare] view)
    writes: str = "same"  # "same" (write where read), "split" (write_slots), "token" (a slot per token)
    capacity: int = 0  # a strided pool's capacity where the case fits it; 0: drawn per case

    @property
    def dims(self) -> dict[str, int]:
        """Its head counts and head sizes, as Case fields."""
        return {name: getattr(self, name) for name in ("H", "HV", "K", "V")}

    @property
    def dtypes(self) -> dict[str, str]:
        """Its state, input and index dtypes and its state layout, as Case fields."""
        return {name: getattr(self, name) for name in ("state_dtype", "input_dtype", "index_dtype", "layout")}


WRITES = ("same", "split", "token")


def draw_bucket(choice, sup: Support, op: str, budget: Budget) -> Bucket:
    """A bucket inside the support; `choice(options)` picks one (Hypothesis' draw, or a seeded Random's)."""
    K, V = choice(sup.head_dims or budget.head_dims)
    budget = budget.for_dims(K, V)
    if sup.heads:
        H, HV = choice(sup.heads)
    else:
        H = choice((1, 2))
        HV = H * choice(sup.gva_ratios)
    max_T = min(budget.max_T, sup.max_T or budget.max_T)
    min_T = sup.verify_min_T if op == "verify" else 1
    T = {"decode": 1, "prefill": 0}.get(op) or choice([t for t in budget.t_choices if min_T <= t <= max_T])
    engine = ENGINES.get(sup.engine)
    scratch = engine is not None and engine.scratch_rows and op == "verify"  # SGLang's verify: scratch, no update
    update = not scratch and not (engine is None and sup.no_update and op == "verify" and choice((False, True)))
    buffer = sup.intermediate and op == "verify" and (sup.buffer_with_update or not update)
    buffer = buffer and (scratch or engine is None and choice((False, True)))
    strided = sup.strided_pool and max(budget.gaps) > 0 and choice((False, True))
    return Bucket(
        T,
        H,
        HV,
        K,
        V,
        strided=strided,
        buffer=buffer,
        update=update,
        state_dtype=choice(sup.state_dtypes),
        input_dtype=choice(sup.input_dtypes),
        index_dtype=choice(sup.index_dtypes),
        layout=choice(sup.layouts),
        l2norm=not sup.l2norm_off or choice((True, True, True, True, False)),
        output_given=not sup.output_optional or choice((True, True, True, False)),
        spare_steps=choice((0, 1, 2)) if buffer and sup.spare_steps else 0,
        sliced=choice((0, 1, 2)) if buffer and sup.sliced_intermediate else 0,
        writes=choice(
            tuple(w for w, ok in zip(WRITES, (True, sup.split_write, sup.token_slots and op == "verify")) if ok)
        )
        if sup.pool and engine is None
        else ("token" if engine is not None and engine.accepted and op != "prefill" else "same"),
        capacity=budget.max_pool if strided and budget.plan_size else 0,
    )


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


def large_plan(target_name: str, op: str, sup: Support, budget: Budget) -> tuple[Bucket, ...]:
    """The large tests' buckets: one per pool dtype x index dtype x contiguous or strided pool, the ways a kernel
    computes a slot's offset (the index's type, the slot stride), each with the simplest input dtype and state
    updates on, so the offset and where the write lands are what a large case tests (fp16 inputs and the rest are the
    other tests' business); heads, dims and T from a draw seeded like bucket_plan's."""
    rng = random.Random(f"{target_name}:{op}:large:{budget.plan_seed}")
    strided = (False, True) if sup.strided_pool and max(budget.gaps) > 0 else (False,)
    plan = []
    for state_dtype in sup.state_dtypes:
        for index_dtype in sup.index_dtypes:
            one = dataclasses.replace(
                sup, state_dtypes=(state_dtype,), index_dtypes=(index_dtype,), input_dtypes=sup.input_dtypes[:1]
            )
            bucket = draw_bucket(rng.choice, one, op, budget)  # state updates on: a wrapped write lands in the guard
            bucket = dataclasses.replace(bucket, update=True, buffer=bucket.buffer and sup.buffer_with_update)
            plan += [dataclasses.replace(bucket, strided=s) for s in strided]
    return tuple(plan)


def large_first_slot(bucket: Bucket, gap: int, past: int) -> int:
    """The first slot whose element offset (slot x slot stride) reaches 2^past."""
    return 2**past // ((bucket.HV + gap) * bucket.K * bucket.V) + 1


def large_spare(bucket: Bucket, gap: int, past: int) -> int:
    """Slots of a large pool from its first: LARGE_SPARE, fewer where their offsets would reach 2^(past+1) (a
    stand-in's small width), so every request's offset lies in [2^past, 2^(past+1)) and wraps the same way."""
    stride = (bucket.HV + gap) * bucket.K * bucket.V
    return max(1, min(LARGE_SPARE, 2 ** (past + 1) // stride - large_first_slot(bucket, gap, past)))


def large_case(op: str, bucket: Bucket, gap: int, past: int, budget: Budget) -> Case:
    """The largest case `cases(large=True)` draws in a bucket whose requests' offsets reach 2^past (the most
    requests and buffer rows): its memory bound."""
    first, spare = large_first_slot(bucket, gap, past), large_spare(bucket, gap, past)
    B, T = min(budget.max_B, 4, spare), budget.max_T if op == "prefill" else bucket.T
    rows = B + 3 if bucket.buffer else 0
    return Case(
        op=op,
        **bucket.dims,
        T=T,
        pool=first + spare,
        read_slots=tuple(range(first, first + B)),
        seed=0,
        seqlens=(T,) * B if op == "prefill" else (),
        pool_gap=gap,
        inter_rows=rows,
        inter_steps=T + 2 if rows else 0,
        inter_spare_steps=2 if rows else 0,
        **bucket.dtypes,
        update=bucket.update,
    )


def large_buckets(
    target: TargetView, op: str, budget: Budget, bugs: tuple = ()
) -> tuple[tuple[Bucket, ...], str | None]:
    """The large plan's buckets whose largest case fits budget.large_bytes (fuzz.model.footprint.peak_bytes, with the
    guard below the pool), and, when some do not, why: one line for the targets table."""
    sup, bits, limit = target.declared(bugs), target.offset_bits(), budget.large_bytes or 0
    fits, left = [], []
    for bucket in large_plan(target.name, op, sup, budget):
        gap = max(budget.gaps) if bucket.strided else 0
        need = peak_bytes(large_case(op, bucket, gap, bits, budget), bits)  # offsets past 2^bits: the larger pool
        (fits if need <= limit else left).append((bucket, need))
    if not left:
        return tuple(b for b, _ in fits), None
    smallest = min(need for _, need in left)
    why = (
        f"pools past 2^{bits} elements with their guard need {smallest / 2**30:.1f} GiB or more a case; at most "
        f"{limit / 2**30:.1f} GiB here ({budget.device}{'' if budget.device != 'cpu' else ', a CPU profile'})"
    )
    if fits:
        why = f"{len(left)} of {len(left) + len(fits)} buckets left out: {why}"
    return tuple(b for b, _ in fits), why


@st.composite
def cases(draw, target: TargetView, op: str, budget: Budget, bugs: tuple = (), large: bool = False) -> Case:
    """A case for `op` on `target` inside what it declares, narrowed by the masks of the known bugs given. `large`:
    a pool whose requests' element offsets pass 2^31 or 2^32 (the int32 offset overflow class, signed or unsigned;
    target.offset_bits), a bucket of large_plan that fits the budget's memory (large_buckets), few requests.
    The pieces below take `draw` itself (they are steps of this one strategy, not strategies of their own), so the
    order and kind of the draws, and with them the cases a seed names, are those of one function."""
    sup = target.declared(bugs)
    bucket = _bucket(draw, target, sup, op, budget, bugs, large)
    capped = budget.for_dims(bucket.K, bucket.V)  # heavy head dims on a CPU budget: fewer requests, a smaller pool
    straddle_B = MAX_STRADDLE_B if capped is budget else capped.max_B
    budget = capped
    H, HV, T = bucket.H, bucket.HV, bucket.T
    if H > 1 and sup.invalid_gva and not large and draw(st.integers(0, 19)) == 19:
        HV = H + 1  # illegal GVA ratio: every target must reject it cleanly
    gap, first, spare = _large_pool(draw, target, bucket, budget) if large else (0, 0, 0)
    most = min(budget.max_B, 4, spare) if large else budget.max_B
    B = draw(st.integers(min(sup.least_B(H, T), most), most))
    if not large:
        B = draw(straddle(target, bucket, B, H, HV, sup, straddle_B))
    seqlens = _seqlens(draw, sup, budget, B) if op == "prefill" else ()
    T = max(seqlens) if op == "prefill" else T
    if engine := ENGINES.get(sup.engine):
        inter, slots = _engine_maps(draw, engine, bucket, op, B, T, budget, first, spare, sup.padding)
        if slots["edge"] is None and empty_extend(slots["read_slots"], seqlens, engine.null):
            slots["edge"] = "empty-extend"  # classified, not drawn: the draws stay those of a plain case
    else:
        inter = _intermediate(draw, sup, bucket, B, T)
        slots = draw(
            slot_maps(
                sup,
                target.semantics(),
                B,
                T,
                op,
                bucket.update and not inter["inter_rows"],
                budget,
                first,
                spare,
                buffered=bool(inter["inter_rows"]),
                writes=bucket.writes,
                capacity=bucket.capacity,
            )
        )
    # warm calls: GPU budgets only, about 3% of drawn cases, never beside an int32-overflowing pool
    warm = budget.warm_calls and sup.pool and not large and draw(st.integers(0, 29)) == 29
    return Case(
        op=op,
        H=H,
        HV=HV,
        K=bucket.K,
        V=bucket.V,
        T=T,
        seqlens=seqlens,
        seed=draw(st.integers(0, 2**32 - 1)),
        **slots,
        **inter,
        **bucket.dtypes,
        decay=draw(st.sampled_from(sup.decay_regimes)),
        scale=draw(st.sampled_from(tuple(s for s in budget.scales if sup.scales is None or s in sup.scales))),
        l2norm=bucket.l2norm,
        update=bucket.update,
        pool_gap=draw(st.sampled_from([g for g in budget.gaps if g])) if bucket.strided and not large else gap,
        warm_pool=draw(st.integers(1, budget.max_pool)) if warm else 0,
        output_given=bucket.output_given,
    )


def _bucket(draw, target: TargetView, sup: Support, op: str, budget: Budget, bugs: tuple, large: bool) -> Bucket:
    """The case's compile bucket: one of the large plan's that fit, or, on a planned budget, one of bucket_plan's
    (all but one case in Budget.open_every; among the compiled ones while a warm-up runs beside: compiled_first),
    else one drawn from the whole bucket space (`sup`, the target's support narrowed by `bugs`)."""
    pick = lambda options: draw(st.sampled_from(options))
    if large:
        return pick(large_buckets(target, op, budget, bugs)[0])
    planned = budget.plan_size and draw(st.integers(0, budget.open_every - 1)) < budget.open_every - 1
    if not planned:
        return draw_bucket(pick, sup, op, budget)
    return pick(compiled_first(bucket_plan(target.name, op, sup, budget), budget))


def compiled_first(plan: tuple[Bucket, ...], budget: Budget) -> tuple[Bucket, ...]:
    """The planned buckets a draw picks from: while a warm-up compiles the plan beside the run (Budget.compiled), the
    ones it compiled, where there is any; else the whole plan."""
    if budget.compiled is None:
        return plan
    return tuple(b for b in plan if repr(b) in budget.compiled) or plan


def _large_pool(draw, target: TargetView, bucket: Bucket, budget: Budget) -> tuple[int, int, int]:
    """(gap, first slot, spare slots) of a large case's pool. Every request's offset lies past 2^(bits-1), where a
    signed offset wraps (to below the pool), or past 2^bits, where an unsigned one does (onto the pool's low slots:
    FlashInfer's fp32 pretranspose before 0.6.12). A large strided pool has the budget's widest gap: every large case
    of a bucket then has one pool geometry."""
    gap = max(budget.gaps) if bucket.strided else 0
    bits = target.offset_bits()
    past = draw(st.sampled_from((bits - 1, bits)))
    return gap, large_first_slot(bucket, gap, past), large_spare(bucket, gap, past)


def _seqlens(draw, sup: Support, budget: Budget, B: int) -> tuple[int, ...]:
    """Prefill's B sequence lengths, empty ones among them; not all empty where the target refuses that."""
    max_T = min(budget.max_T, sup.max_T or budget.max_T)
    seqlens = tuple(draw(st.lists(st.integers(0, max_T), min_size=B, max_size=B)))
    if not sup.empty_prefill and not any(seqlens):
        seqlens = (1, *seqlens[1:])
    return seqlens


def _intermediate(draw, sup: Support, bucket: Bucket, B: int, T: int) -> dict:
    """The intermediate buffer's Case fields: rows (B, or B and up to 3 spare), steps (T and the bucket's spare
    steps), the steps its view leaves out, and now and then explicit rows per request (-1: none); zeros without a
    buffer."""
    inter_rows = inter_steps = inter_spare = 0
    if bucket.buffer:
        inter_rows = B if sup.exact_rows or not sup.spare_rows else B + draw(st.integers(0, 3))
        inter_steps, inter_spare = T + bucket.spare_steps, bucket.sliced
    inter_index = None
    if inter_rows and sup.explicit_rows and draw(st.booleans()):
        rows = draw(st.lists(st.integers(0, inter_rows - 1), unique=True, min_size=B, max_size=B))
        inter_index = tuple(-1 if draw(st.integers(0, 5)) == 5 else r for r in rows)
    return dict(inter_rows=inter_rows, inter_steps=inter_steps, inter_spare_steps=inter_spare, inter_index=inter_index)


def _engine_maps(
    draw, engine: Engine, bucket: Bucket, op: str, B: int, T: int, budget: Budget, first: int, spare: int, padding=True
):
    """(intermediate fields, slot fields) of a case under `engine`'s index rules (fuzz.model.engines): the live
    requests first, each on slots of 1..pool-1 (the last one on purpose in about one case in four: a sentinel wrapped
    or remapped lands there), then the CUDA-graph padding at the tail (the engine's null); vLLM: T per-token slots a
    request and an accepted count 1..T that selects its read slot, padded rows null in every column with accepted 1;
    SGLang's verify: a scratch of spec_size + 1 rows by batch row, spec_size >= the live requests and the batch within
    it. About one case in eight to ten probes a contract edge of the engine and op (`_edge`: a one-in-four choice,
    which Hypothesis's weighting toward simple draws makes 6-13% of the ci budget's cases). A large case's slots lie
    in its `spare` slots from `first`. Without `padding` (a known bug's mask) every row is live and no edge pads."""
    token = bucket.writes == "token"
    live = B - draw(st.integers(0, B - 1)) if padding else B  # the zero choice: no padding
    live = min(live, MAX_IDS // T) if token else live
    need = live * T if token else live
    if first:
        pool, low = first + spare, first
        live = min(live, spare // T if token else spare)
        need = live * T if token else live
    else:
        least = need + 1  # slot 0 is reserved
        more = draw(st.sampled_from((0, 1, budget.max_pool)))
        pool = max(bucket.capacity, least) if bucket.capacity else draw(st.integers(least, least + more))
        low = 1
    ids = draw(st.lists(st.integers(low, pool - 1), unique=True, min_size=need, max_size=need))
    if need and draw(st.integers(0, 3)) == 3:  # the last slot, on purpose
        j = draw(st.integers(0, need - 1))
        if pool - 1 in ids:
            ids[ids.index(pool - 1)] = ids[j]
        ids[j] = pool - 1
    null = engine.null
    fields = dict(pool=pool, null=null, token_slots=None, accepted=None, edge=None)
    if token:
        rows = [ids[n * T : (n + 1) * T] for n in range(live)]
        accepted = draw(st.lists(st.integers(1, T), min_size=live, max_size=live))
        fields.update(
            read_slots=[row[a - 1] for row, a in zip(rows, accepted)] + [null] * (B - live),
            token_slots=rows + [[null] * T] * (B - live),
            accepted=accepted + [1] * (B - live),
        )
    else:
        fields["read_slots"] = ids + [null] * (B - live)
    inter = dict(inter_rows=0, inter_steps=0, inter_spare_steps=0, inter_index=None)
    if bucket.buffer:
        spec_size = max(live, B - 1) + draw(st.integers(0, 2))
        inter.update(inter_rows=spec_size + 1, inter_steps=T + bucket.spare_steps, inter_spare_steps=bucket.sliced)
    needs = {
        "pad-past-scratch": inter["inter_rows"] and padding,
        "accepted-zero": token,
        "accepted-past-T": token,
        "flat-indices-multitoken": token and T > 1,
        "empty-extend": False,  # a property of the drawn seqlens, classified by the caller
    }
    edges = [e.id for e in edges_for(engine.name, op) if needs.get(e.id, True)]
    if edges and draw(st.integers(0, 3)) == 3:
        _edge(draw, draw(st.sampled_from(edges)), fields, inter, live, T)
    tuples = lambda x: tuple(map(tuples, x)) if isinstance(x, list) else x
    return inter, {name: tuples(value) for name, value in fields.items()}


def live_rows(case: Case) -> list[int]:
    """The batch rows of live requests, which CUDA-graph padding follows at the tail: a row with a slot of its own
    (vLLM: any per-token slot that is not the null block; a request whose read slot an edge nulls stays live)."""
    if case.token_slots is not None:
        return [n for n, row in enumerate(case.token_slots) if any(s != case.null for s in row)]
    return [n for n, padded in enumerate(case.padded) if not padded]


def _edge(draw, edge: str, fields: dict, inter: dict, live: int, T: int) -> None:
    """Turn the engine case (`fields`, `inter`: its slot and intermediate fields, lists) into one on `edge`
    (fuzz.model.engines.EDGES), in place. A row the edge's contract skips names the null slot as its read slot."""
    fields["edge"] = edge
    null, n = fields["null"], draw(st.integers(0, live - 1))  # the live request the edge lands on
    if edge == "pad-past-scratch":  # a scratch of spec_size + 1 rows, spec_size >= live, the padded tail past it
        inter["inter_rows"] = rows = live + draw(st.integers(0, 1)) + 1
        fields["read_slots"] = fields["read_slots"][:live] + [null] * (rows + draw(st.integers(1, 2)) - live)
    elif edge in ("accepted-zero", "accepted-past-T"):
        fields["accepted"][n] = 0 if edge == "accepted-zero" else draw(st.integers(T + 1, 2 * T))
        fields["read_slots"][n] = null
    elif edge == "flat-indices-multitoken":  # the non-spec path's indices: the block table's first column, no counts
        fields["read_slots"][:live] = [row[0] for row in fields["token_slots"][:live]]
        fields["token_slots"] = fields["accepted"] = None
    elif edge == "slot-zero" and fields["token_slots"] is None:
        fields["read_slots"][n] = 0
    elif edge == "slot-zero":  # a column of the request's slots: its read slot (the row skipped) or a token's store
        column = draw(st.integers(0, T - 1))
        fields["token_slots"][n] = [0 if t == column else s for t, s in enumerate(fields["token_slots"][n])]
        if column == fields["accepted"][n] - 1:
            fields["read_slots"][n] = 0


MAX_STRADDLE_B = 1100  # a threshold that needs more requests than this is left to larger budgets
MAX_IDS = 4096  # slot ids one case draws at most (a slot per token past that: more than Hypothesis draws in a list)


@st.composite
def straddle(
    draw, target: TargetView, bucket: Bucket, B: int, H: int, HV: int, sup: Support, most: int = MAX_STRADDLE_B
) -> int:
    """B, or, for half the cases of a bucket with dispatch thresholds (fuzz.model.dispatch), the batch just short
    of or just past one of them (at most `most` requests), so a test crosses every threshold of its release early,
    not by luck. The zero choice keeps B: a minimal case sheds the crossing unless the failure needs it."""
    sms = dispatch.num_sms()
    rows = [
        (t, above)
        for t in dispatch.thresholds(target.path, target.release())
        if t.applies(max(bucket.T, 1), bucket.buffer, bucket.update)
        for above in (False, True)
        if 1 <= t.batch(above, H, HV, sms) <= most
    ]
    if not rows or draw(st.integers(0, 1)) == 0:
        return B
    threshold, above = draw(st.sampled_from(rows))
    return max(threshold.batch(above, H, HV, sms), sup.least_B(H, bucket.T))


@st.composite
def slot_maps(
    draw,
    sup,
    sem,
    B: int,
    T: int,
    op: str,
    may_scatter: bool,
    budget: Budget,
    first: int = 0,
    spare: int = 0,
    buffered: bool = False,
    writes: str = "",
    capacity: int = 0,
) -> dict:
    """Pool size and slot indices. Slots a call writes are distinct from every slot another row reads or
    writes (overlaps race by every library's contract); a sacrificial slot 0 stays out of reach when
    padding redirects there or 0 is the null slot. Unique integer lists shrink toward the identity map.
    first > 0 (a large case): `spare` slots from `first` on, every request among them (their offsets are what
    overflows); one capacity per bucket, so a compile cache keyed on it sees one pool.
    buffered (a batch-row intermediate buffer): the pool has spare slots, so the slot map is seldom the identity and
    a kernel that indexes the buffer by slot instead of batch row writes the wrong row.
    writes: the bucket's write mode ("same", "split", "token": taken where the case allows it; "": drawn here);
    capacity > 0: the pool's size wherever the requests fit it (a compile key of strided pools)."""
    null = sem.pad.null_index
    if not sup.pool:
        return dict(pool=B, read_slots=tuple(range(B)), null=null)
    reserved = 1 if (null == 0 or "slot0" in (sem.pad.read, sem.pad.write)) else 0
    padded = draw(st.lists(st.booleans(), min_size=B, max_size=B)) if sup.padding else [False] * B
    real = B - sum(padded)
    room = spare if first else B * T + B  # a large pool's requests must fit its spare slots
    token = (
        sup.token_slots
        and may_scatter
        and op == "verify"
        and T >= 2
        and real + B * T <= min(room, MAX_IDS)
        and (writes == "token" if writes else draw(st.booleans()))
    )
    split = not token and sup.split_write and 2 * B <= room and (writes == "split" if writes else draw(st.booleans()))
    extra = B * T if token else B if split else 0
    need = max(reserved + real + extra, 1)
    if first:
        pool, low = first + spare, first
    else:
        more = (1, B, budget.max_pool) if buffered else (0, 1, budget.max_pool)
        least = need + more[0]
        pool = max(capacity, least) if capacity else draw(st.integers(least, need + draw(st.sampled_from(more))))
        low = reserved
    # No ids to draw when every row is padded: pool may then be just the reserved slot 0 (empty range).
    ids = iter(
        draw(st.lists(st.integers(low, pool - 1), unique=True, min_size=real + extra, max_size=real + extra))
        if real + extra
        else ()
    )
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
