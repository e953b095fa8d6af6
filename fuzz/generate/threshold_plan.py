"""The threshold plan: a fuzz test's first cases, on both sides of every dispatch threshold of its target's release.

A contract that depends on dispatch (the same call, another behaviour past a threshold: FlashInfer's bf16 wide_vec
kernel leaves the pool unwritten from B*HV = 128 on when a buffer is given and updates are on) is found by a uniform B
only by luck, and by the strategies' straddle (half the cases of a bucket) only in a bucket whose flags are the ones
that matter. So each fuzz test first checks a fixed list of cases (fuzz.suite.rounds, the "plan" stage): for each
threshold of the release (fuzz.model.dispatch) and each setting of the flags that pick a kernel (an intermediate
buffer or none, state updates on or off, the pool's dtype, the fewest or the most tokens), the simplest case just short
of it and the first past it. Kernel thresholds come first, then tile thresholds, then the longest T; at most
Budget.threshold_cases in all (fewer on a CPU). A target whose path has no thresholds (fla, SGLang) has an empty plan,
so its test draws what it drew before.

On a planned budget (a GPU's) a case lies in the first bucket of the bucket plan that has its flags, where there is
one, so the kernels `gdn-fuzz warm` compiled serve it; `gdn-fuzz warm` compiles the threshold plan too (fuzz.run.warm).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from fuzz.generate.profiles import Budget
from fuzz.generate.strategies import MAX_STRADDLE_B, Bucket, bucket_plan, draw_bucket
from fuzz.model import dispatch
from fuzz.model.case import Case, CaseError
from fuzz.model.support import Support, TargetView


@dataclasses.dataclass(frozen=True)
class Flags:
    """What picks a kernel beside the thresholds' quantity: tokens, a buffer, state updates, the pool's dtype."""

    T: int
    buffer: bool
    update: bool
    state_dtype: str


def threshold_cases(target: TargetView, op: str, budget: Budget, bugs: tuple = ()) -> tuple[Case, ...]:
    """The plan of `op` on `target` inside what it declares narrowed by `bugs` (its known bugs' masks), in the order
    it is checked: no case twice, at most budget.threshold_cases."""
    if not budget.threshold_cases or not any(t.path == target.path for t in dispatch.TABLE):
        return ()  # (before reading the release, which may import the library)
    sup = target.declared(bugs)
    rows = dispatch.thresholds(target.path, target.release())
    if op not in sup.ops or not rows:
        return ()
    base = draw_bucket(lambda options: options[0], sup, op, budget)  # the simplest bucket: first of every choice
    H, HV = widest_heads(sup)
    base = dataclasses.replace(base, H=H, HV=HV)
    planned = bucket_plan(target.name, op, sup, budget) if budget.plan_size else ()
    sms, found = dispatch.num_sms(), {}
    for threshold, flags, above in _sides(rows, _settings(sup, op, budget.for_dims(base.K, base.V))):
        bucket = next((b for b in planned if _flags(b) == flags), None) or dataclasses.replace(
            base, **dataclasses.asdict(flags)
        )
        B = threshold.batch(above, bucket.H, bucket.HV, sms)
        if not 1 <= B <= MAX_STRADDLE_B or B < sup.least_B(bucket.H, bucket.T):
            continue
        try:
            case = simplest_case(target, op, bucket, B, budget.for_dims(bucket.K, bucket.V), sup)
        except CaseError:
            continue  # a batch this bucket's geometry cannot hold
        found.setdefault(repr(case), case)
        if len(found) == budget.threshold_cases:
            break
    return tuple(found.values())


def widest_heads(sup: Support) -> tuple[int, int]:
    """(H, HV) with the most value heads the support allows (the fewest query heads among them): a threshold on B*HV
    is then crossed with the fewest requests, the cheapest case."""
    pairs = sup.heads or [(h, h * r) for h in (1, 2) for r in sup.gva_ratios]
    return max(pairs, key=lambda p: (p[1], -p[0]))


def _settings(sup: Support, op: str, budget: Budget) -> list[Flags]:
    """Every setting of the kernel-picking flags the support allows for `op`: updates on first, a buffer before none
    (the verify paths' own feature, where contracts that switch at a threshold were found: each setting compiles
    kernels of its own on a GPU, so the first ones checked are the likeliest), the pool dtypes in order; T: the
    fewest tokens, then the most."""
    if op == "verify":
        allowed = [t for t in budget.t_choices if sup.verify_min_T <= t <= min(budget.max_T, sup.max_T or budget.max_T)]
        Ts = sorted({min(allowed), max(allowed)}) if allowed else []
    else:
        Ts = [{"decode": 1, "prefill": 0}[op]]
    updates = (True, False) if sup.no_update and op == "verify" else (True,)
    with_buffer = sup.intermediate and op == "verify"
    buffers = lambda update: (True, False) if with_buffer and (sup.buffer_with_update or not update) else (False,)
    return [
        Flags(T, buffer, update, dtype)
        for T in Ts
        for update in updates
        for buffer in buffers(update)
        for dtype in sup.state_dtypes
    ]


def _sides(rows, settings: list[Flags]) -> Iterator[tuple[dispatch.Threshold, Flags, bool]]:
    """(threshold, flags, above) in the plan's order: kernel thresholds, then tile thresholds, at the fewest tokens;
    then both at the most; each setting below, then above."""
    fewest = settings[0].T if settings else 0
    for tier in ((True, True), (False, True), (True, False), (False, False)):  # (kernel?, fewest tokens?)
        for t in rows:
            if t.kernel != tier[0]:
                continue
            for flags in settings:
                if (flags.T == fewest) == tier[1] and t.applies(max(flags.T, 1), flags.buffer, flags.update):
                    yield t, flags, False
                    yield t, flags, True


def _flags(bucket: Bucket) -> Flags:
    return Flags(bucket.T, bucket.buffer, bucket.update, bucket.state_dtype)


def simplest_case(target: TargetView, op: str, bucket: Bucket, B: int, budget: Budget, sup: Support) -> Case:
    """The simplest case of a bucket at batch B: every request real, slots in order after the reserved one, the
    bucket's write mode, buffer geometry, flags and pool capacity (what the library keys its kernels by). `sup`: the
    support the bucket was drawn in. The threshold plan's cases, and the cases `gdn-fuzz warm` compiles."""
    sem = target.semantics()
    T = max(bucket.T, 1) if op != "prefill" else min(budget.max_T, sup.max_T or budget.max_T)
    null = sem.pad.null_index
    fields = dict(pool=B, read_slots=tuple(range(B)), null=null)
    if sup.pool:
        low = 1 if (null == 0 or "slot0" in (sem.pad.read, sem.pad.write)) else 0
        reads = tuple(range(low, low + B))
        nxt = low + B
        if bucket.writes == "token" and op == "verify" and T >= 2 and bucket.update and not bucket.buffer:
            fields["token_slots"] = tuple(tuple(range(nxt + i * T, nxt + (i + 1) * T)) for i in range(B))
            nxt += B * T
        elif bucket.writes == "split":
            fields["write_slots"] = tuple(range(nxt, nxt + B))
            nxt += B
        need = nxt + (1 if bucket.buffer else 0)
        fields.update(pool=max(bucket.capacity, need), read_slots=reads)
    gap = min((g for g in budget.gaps if g), default=0) if bucket.strided else 0
    return Case(
        op=op,
        **bucket.dims,
        T=T,
        seed=0,
        seqlens=(T,) * B if op == "prefill" else (),
        pool_gap=gap,
        inter_rows=B if bucket.buffer else 0,
        inter_steps=T + bucket.spare_steps if bucket.buffer else 0,
        inter_spare_steps=bucket.sliced if bucket.buffer else 0,
        **bucket.dtypes,
        l2norm=bucket.l2norm,
        update=bucket.update,
        output_given=bucket.output_given,
        **fields,
    )


__all__ = ["Flags", "simplest_case", "threshold_cases", "widest_heads"]
