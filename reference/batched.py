"""The oracle over a whole batch at once: one loop over time, requests and value heads vectorized.

`reference.ops` is the definition: `_serve` runs each request through `run_sequence`, one at a time, and reads
like the equations. This module computes the same contracts with the same arithmetic for batches that are too
large for that loop, on the device where the inputs live (CPU or CUDA):

    for t in range(T_max):                                 every running request n and value head h at once
        S[n]    = exp(g[n, t]) * S[n]
        u[n]    = beta[n, t] * (v[n, t] - S[n] k^[n, t])
        S[n]    = S[n] + u[n] k^[n, t]^T
        o[n, t] = S[n] q^[n, t]                            (the output reads the updated state)

A request whose sequence has ended keeps its S: the loop holds the requests longest first, so those still running
at step t are a prefix of the batch and are updated in place (no masks, no state-sized allocation per step).

Shapes (B requests, T tokens each, H qk heads, HV value heads, P pool slots), as in reference.ops:
    q, k  [B, T, H, K]      v  [B, T, HV, V]      a, b / g, beta  [B, T, HV]
    pool  [P, HV, V, K]  (layout "vk")  or  [P, HV, K, V]  ("kv"), any strides (a view of a larger buffer is fine)
    read_slots, write_slots  [B]   token_slots [B, T]   intermediate [R, steps, HV, V, K] (or K, V)
Prefill packs tokens instead: q, k [N_tok, H, K], v [N_tok, HV, V], gates [N_tok, HV], cu_seqlens [N + 1].

Contracts (PadContract, Precision, split write slots, token_slots, intermediate rows, disable_state_update, the
caller's output buffer) mean exactly what they mean in reference.ops; each call takes its reference.ops twin's own
parameters (`_like`), and arguments are validated by the same functions (reference.checks, called in the same order),
with the same messages. Where several requests write one pool slot (padded rows redirected to slot 0, repeated
slots) or one intermediate row, the last request wins, as in the sequential loop; for token_slots the order is
(request, step).

What differs is what comes back. The pool is never cloned or converted: only the slots the contract reads are
gathered, and the result is sparse (`SparseResult`: the output, the written slots with their new states, the
written intermediate rows with theirs). `to_pool_result` turns it into the `reference.ops.PoolResult` the
sequential oracle returns (a full copy of the pool) for tests and small callers.

Host reads: none inside the loop. Before it, prefill reads cu_seqlens (the loop count T_max and its validation)
and an intermediate buffer reads max(intermediate_rows) (its validation), as reference.ops does; after it, picking
the last writer of each slot and row compacts the written set (one device sync each for pool and intermediate).
Requests that read no state (skipped or zero-state rows) gather slot 0 and discard it (torch.where; nothing is
gathered from an empty pool); no other slot is read.

Numerics: per element the same operations in the same order as run_sequence (the gates by the same gate_values
call on the same tensor, l2norm, scale, exp(g) * S, the two einsums over K, every rounding point of the Precision),
so results are bit-identical to reference.ops wherever torch evaluates an op on a batch as it does on one request.
That is not guaranteed: a BLAS or CUDA kernel may sum the batched [N*HV, V, K] einsum over K in another order than
the per-request [HV, V, K] one, and a transcendental may round differently in a vectorised loop than in its scalar
tail (torch's CPU sigmoid does under AVX2, but gate_values runs on the same tensor in both oracles; exp, taken on
[n, HV] here and on [HV] there, did not). Then results agree within a few ulps of the compute dtype relative to the
largest value (what tests/reference/test_oracle_batched.py checks: 4 ulps), except where such a difference straddles a
rounding to a narrower dtype (a bf16 output, a bf16 state stored every step): there the two may be one ulp of that dtype
apart. Seen: on CPU (torch 2.13, AVX512 and AVX2 kernels) every example the tests drew was bit-identical, with their
tolerance set to zero; on an H200 (torch 2.11, CUDA) 558 of 600 were and all were within the 4 ulps, and a large
float32 model with bf16 outputs and states (B=96, T=12, HV=32, K=V=128) was one bf16 ulp apart.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass

import torch

from reference.checks import intermediate_inputs, offsets, one_token, packed_inputs, pool_inputs, verify_inputs
from reference.contracts import PadContract
from reference.ops import PoolResult, decode, prefill, verify
from reference.recurrence import gate_values, l2normalize


@dataclass(frozen=True)
class SparseResult:
    """What a batched call wrote.

    output:     [B, T, HV, V] (verify/decode) or [N_tok, HV, V] (prefill), as PoolResult.output.
    slots:      [n] int64, distinct: the pool slots the contract wrote, in the order of their last writes.
    states:     [n, HV, *state] in the pool's dtype and layout: what slots[i] holds after the call.
    rows:       [m] int64, distinct: the intermediate rows written, likewise (None without a buffer).
    row_states: [m, T, HV, *state] in the intermediate's dtype: steps 0..T-1 of rows[i] (steps >= T untouched).
    Every other pool slot and intermediate entry is as the caller's buffer had it.
    """

    output: torch.Tensor
    slots: torch.Tensor
    states: torch.Tensor
    rows: torch.Tensor | None = None
    row_states: torch.Tensor | None = None

    @property
    def written_slots(self) -> frozenset:
        return frozenset(self.slots.tolist())

    @property
    def written_rows(self) -> frozenset:
        return frozenset() if self.rows is None else frozenset(self.rows.tolist())


def to_pool_result(result: SparseResult, pool: torch.Tensor, intermediate: torch.Tensor | None = None) -> PoolResult:
    """The PoolResult reference.ops returns for the same call: copies of `pool` and `intermediate` (the buffers
    passed to the call) with the written slots and rows set."""
    new_pool = pool.clone()
    new_pool[result.slots.to(pool.device)] = result.states.to(pool.device)
    new_inter = None
    if intermediate is not None:
        new_inter = intermediate.clone()
        if result.rows is not None and result.rows.numel():
            new_inter[result.rows.to(intermediate.device), : result.row_states.shape[1]] = result.row_states.to(
                intermediate.device
            )
    return PoolResult(result.output, new_pool, new_inter, result.written_slots, result.written_rows)


def _like(definition: Callable) -> Callable:
    """The batched twin of a reference.ops call: `definition`'s parameters (names, order, defaults), bound as there
    and handed to the decorated body by keyword, so the two oracles take the same arguments by construction."""
    sig = inspect.signature(definition).replace(return_annotation="SparseResult")

    def twin(body: Callable) -> Callable:
        @functools.wraps(body)
        def call(*args, **kwargs):
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            return body(**bound.arguments)

        call.__signature__ = sig
        return call

    return twin


@_like(decode)
def batched_decode(q, k, v, gates, pool, read_slots, **options) -> SparseResult:
    """reference.ops.decode, batched: one token per request (T = 1), state written back to the pool."""
    one_token(q)
    return batched_verify(q, k, v, gates, pool, read_slots, **options)


@_like(verify)
def batched_verify(
    q, k, v, gates, pool, read_slots, *, precision, disable_state_update, token_slots, output, **serving
) -> SparseResult:
    """reference.ops.verify, batched: T tokens per request (shapes in the module doc).

    intermediate [R, steps, HV, ...]: the state after step t of request n goes to row intermediate_rows[n]
        (default: the batch row n; -1 = none), returned as SparseResult.rows / row_states.
    disable_state_update: the pool is not written (verify before acceptance).
    token_slots [B, T]: per-token scatter, pool[token_slots[n, t]] = state after t; no final write-back then.
    output [B, T, HV, V]: what the caller's output buffer held (kept for rows the contract skips).
    """
    B, T, HV, V, flat = verify_inputs(q, k, v, gates, token_slots, disable_state_update)
    g, beta = gate_values(gates, precision)
    out = _serve(
        *(flat(x) for x in (q, k, v, g, beta)),
        [T] * B,
        pool,
        read_slots,
        precision=precision,
        write_back=not disable_state_update and token_slots is None,
        token_slots=token_slots,
        output=None if output is None else flat(output),
        **serving,
    )
    return dataclasses.replace(out, output=out.output.reshape(B, T, HV, V))


@_like(prefill)
def batched_prefill(q, k, v, gates, cu_seqlens, pool, read_slots, *, precision, **serving) -> SparseResult:
    """reference.ops.prefill, batched: sequence n is tokens cu_seqlens[n]:cu_seqlens[n+1] of the packed inputs
    (q, k [N_tok, H, K], v [N_tok, HV, V], gates [N_tok, HV], cu_seqlens [N + 1]), starting from pool[read_slots[n]]
    and written back to pool[write_slots[n]] (default the same). An empty sequence reads, writes and stores nothing.
    cu_seqlens is read on the host once."""
    N_tok = packed_inputs(q, k, v, gates)
    g, beta = gate_values(gates, precision)
    cu = offsets(cu_seqlens, N_tok)
    lengths = [b - a for a, b in zip(cu, cu[1:])]
    return _serve(q, k, v, g, beta, lengths, pool, read_slots, precision=precision, write_back=True, **serving)


def _serve(
    q,
    k,
    v,
    g,
    beta,
    lengths,
    pool,
    read_slots,
    write_slots,
    *,
    scale,
    use_l2norm,
    layout,
    pad,
    precision,
    write_back,
    intermediate=None,
    intermediate_rows=None,
    token_slots=None,
    output=None,
):
    """reference.ops._serve over the whole batch. `lengths` (host ints) are the sequence lengths of the packed
    tokens; intermediate and token_slots come only with equal lengths (verify). The steps, as the module doc tells
    them:

    1. the pool, slot maps and intermediate buffer checked (reference.checks, as reference.ops does);
    2. `_Requests`: what the contract does with each request's read slot;
    3. `_Schedule`: the requests longest first, so that those still running at step t are a prefix;
    4. `_initial_states`: the slots the requests read, gathered (nothing else of the pool is read);
    5. `_loop`: the loop over time on the inputs as run_sequence sees them (`_inputs`);
    6. `_output`: the rows of skipped requests zeroed or kept, the output's rounding;
    7. `_pool_writes`, `_row_writes`: the last write to each pool slot and intermediate row.
    """
    N, (H, K), (HV, V) = len(lengths), q.shape[1:], v.shape[1:]
    state_shape = pool_inputs(pool, read_slots, write_slots, layout=layout, N=N, HV=HV, V=V, K=K)
    T = max(lengths, default=0)
    intermediate_rows = intermediate_inputs(intermediate, intermediate_rows, state_shape, layout=layout, N=N, T=T)
    if len(set(lengths)) > 1 and (intermediate is not None or token_slots is not None):
        raise ValueError("lengths: intermediate states and token_slots need equal sequence lengths (verify)")

    dev = pool.device
    to_vk = (lambda s: s) if layout == "vk" else (lambda s: s.transpose(-1, -2))
    requests = _Requests.of(read_slots, pad, dev)
    schedule = _Schedule.of(lengths, dev)
    source, reads = schedule.by_length(requests.source), schedule.by_length(requests.reads)
    S = _initial_states(pool, source, reads, to_vk, precision.compute, pad.read == "slot0")  # [N, HV, V, K], loop order
    inter_buf = (
        None if intermediate is None else torch.empty((N, T) + state_shape, dtype=intermediate.dtype, device=dev)
    )
    token_buf = None if token_slots is None else torch.empty((N, T) + state_shape, dtype=pool.dtype, device=dev)
    keep = [buf for buf in (inter_buf, token_buf) if buf is not None]
    qh, kh, vh = _inputs(q, k, v, H, scale, use_l2norm, precision)
    out = _loop(S, qh, kh, vh, g, beta, schedule, precision, pool.dtype, keep, to_vk)
    out = _output(out, requests.skip, schedule.lens, pad, precision, output)
    slots, states = _pool_writes(
        schedule.batch_order(S),
        requests,
        schedule.lens,
        pad,
        pool,
        to_vk,
        state_shape,
        write_back=write_back,
        write_slots=write_slots,
        token_slots=token_slots,
        token_buf=token_buf,
    )
    rows, row_states = _row_writes(intermediate_rows, inter_buf, requests.skip)
    return SparseResult(out, slots, states, rows, row_states)


def _index(x: torch.Tensor, dev: torch.device) -> torch.Tensor:
    return x.to(device=dev, dtype=torch.long)


@dataclass(frozen=True)
class _Requests:
    """What the contract does with each request's read slot; [N] tensors in batch order, on the pool's device.

    read:    the read slot, as given.
    padded:  the read slot is padding.
    skip:    the contract skips the request: no state read or write, its output rows zeroed or kept.
    reads:   the request starts from a pool slot (its own, or slot 0 for a redirected pad), not from zeros.
    source:  the slot it reads: its own, or 0 for a padded one.
    """

    read: torch.Tensor
    padded: torch.Tensor
    skip: torch.Tensor
    reads: torch.Tensor
    source: torch.Tensor

    @staticmethod
    def of(read_slots: torch.Tensor, pad: PadContract, dev: torch.device) -> _Requests:
        read = _index(read_slots, dev)
        padded = pad.is_pad(read)
        skip = padded if pad.read in ("skip_zero", "skip_untouched", "discard") else torch.zeros_like(padded)
        reads = torch.ones_like(padded) if pad.read == "slot0" else ~padded
        return _Requests(read, padded, skip, reads, torch.where(padded, 0, read))


@dataclass(frozen=True)
class _Schedule:
    """The loop's order. It runs the requests longest first (a stable order, from the host's lengths), so the requests
    still running at step t are the first running[t]; the request at loop position i runs packed token token[i, t]
    at step t.

    running:  [T] host ints.
    perm:     [N] batch row of each loop position; None when the batch is already in that order.
    lens:     [N] sequence lengths, batch order.
    token:    [N, T] packed token of each loop position and step.
    """

    running: list[int]
    perm: torch.Tensor | None
    lens: torch.Tensor
    token: torch.Tensor

    @staticmethod
    def of(lengths: list[int], dev: torch.device) -> _Schedule:
        N, T = len(lengths), max(lengths, default=0)
        order = sorted(range(N), key=lambda n: -lengths[n])
        ascending = sorted(lengths)
        running = [N - bisect.bisect_right(ascending, t) for t in range(T)]
        perm = None if order == list(range(N)) else torch.tensor(order, device=dev)
        lens = (
            torch.full((N,), T, device=dev)
            if len(set(lengths)) <= 1
            else torch.tensor(lengths, dtype=torch.long, device=dev)
        )
        starts = torch.cumsum(lens, 0) - lens
        token = (starts if perm is None else starts.index_select(0, perm))[:, None] + torch.arange(T, device=dev)
        return _Schedule(running, perm, lens, token)

    def by_length(self, x: torch.Tensor) -> torch.Tensor:
        """x [N, ...] from batch order to loop order."""
        return x if self.perm is None else x.index_select(0, self.perm)

    def batch_order(self, x: torch.Tensor) -> torch.Tensor:
        """x [N, ...] from loop order back to batch order."""
        return x if self.perm is None else x.index_select(0, torch.argsort(self.perm))


def _inputs(q, k, v, H, scale, use_l2norm, precision) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Inputs as run_sequence sees them: q^ (scaled) and k^ [N_tok, HV, K] expanded to the value heads, v [N_tok, HV,
    V], in the compute dtype."""

    def normed(x):
        x = precision.load(x)
        return precision.round_normalized(l2normalize(x)) if use_l2norm else x

    group = v.shape[1] // H
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    qh = (normed(q) * scale).repeat_interleave(group, 1)  # [N_tok, HV, K]
    kh = normed(k).repeat_interleave(group, 1)
    return qh, kh, precision.load(v)


def _loop(S, qh, kh, vh, g, beta, schedule, precision, store_dtype, keep, to_vk) -> torch.Tensor:
    """The loop over time on S [N, HV, V, K] (compute dtype, loop order), updated in place: each line is
    run_sequence's, on the running requests' states S[:n]. Returns the output [N_tok, HV, V] in the compute dtype;
    each buffer of `keep` ([N, T, *state], any dtype) gets every request's state after each step t at [:, t]."""
    P = precision.round_product  # the identity unless a tensor-core kernel is modelled
    out = torch.zeros(vh.shape, dtype=S.dtype, device=S.device)
    uk = torch.empty_like(S)  # u k^T, reused: the state-sized temporaries are updated in place
    for t, n in enumerate(schedule.running):
        at = schedule.token[:n, t]
        q_t, k_t, v_t, g_t, beta_t = (x.index_select(0, at) for x in (qh, kh, vh, g, beta))
        S_n = S[:n].mul_(torch.exp(g_t)[:, :, None, None])
        Sk = P(torch.einsum("nhvk,nhk->nhv", P(S_n), k_t))
        u = P(beta_t[:, :, None] * (v_t - Sk))
        S_n.add_(torch.mul(u[:, :, :, None], k_t[:, :, None, :], out=uk[:n]))
        out.index_copy_(0, at, torch.einsum("nhvk,nhk->nhv", P(S_n), q_t))
        if precision.state_each_step:
            S_n.copy_(S_n.to(store_dtype))
        for buf in keep:
            buf[:, t] = to_vk(S)
    return out


def _output(out, skip, lens, pad, precision, output) -> torch.Tensor:
    """The output rows of skipped requests: zeros, or what the caller's buffer held (discard too: its rows are
    undefined, and reference.ops keeps the caller's there); then the output's rounding."""
    if pad.read in ("skip_zero", "skip_untouched", "discard"):
        owner = torch.repeat_interleave(torch.arange(len(lens), device=out.device), lens, output_size=out.shape[0])
        kept = 0.0 if pad.read == "skip_zero" or output is None else output.to(device=out.device, dtype=out.dtype)
        out = torch.where(skip[owner][:, None, None], kept, out)
    return out if precision.output is None else out.to(precision.output)


def _pool_writes(
    S, requests, lens, pad, pool, to_vk, state_shape, *, write_back, write_slots, token_slots, token_buf
) -> tuple[torch.Tensor, torch.Tensor]:
    """(slots, states) as _last_writer gives them: per-token scatter (token_buf, in (request, step) order), or each
    request's final state S (batch order) to the write slot the contract picks, or nothing."""
    dev = pool.device
    if token_slots is not None:
        tslots = _index(token_slots, dev)
        targets = torch.where(~pad.is_pad(tslots) & ~requests.skip[:, None], tslots, -1)  # [N, T], order (n, t)
        bank = token_buf.flatten(0, 1)
    elif write_back:
        targets, bank = _write_targets(requests, lens, pad, write_slots), to_vk(S).to(pool.dtype)
    else:
        targets, bank = torch.full((0,), -1, dtype=torch.long, device=dev), pool.new_empty((0,) + state_shape)
    return _last_writer(targets.flatten(), bank)


def _write_targets(requests, lens, pad, write_slots) -> torch.Tensor:
    """[N] the slot each request's final state goes to, -1 for none."""
    if write_slots is None:  # one pool: a zero-state row is not written back; a slot-0 read writes slot 0
        target, ok = requests.source, ~(requests.padded & (pad.read == "zero_state"))
    else:  # split pools follow the write slot
        write = _index(write_slots, requests.read.device)
        write_pad = pad.is_pad(write)
        target, ok = torch.where(write_pad, 0, write), ~write_pad | (pad.write == "slot0")
    return torch.where(ok & ~requests.skip & (lens > 0), target, -1)


def _row_writes(intermediate_rows, inter_buf, skip) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(rows, row_states) as _last_writer gives them, each request's steps to its row (-1: none); (None, None)
    without an intermediate buffer."""
    if inter_buf is None:
        return None, None
    r = _index(intermediate_rows, skip.device)
    return _last_writer(torch.where((r >= 0) & ~skip, r, -1), inter_buf)


def _initial_states(pool, slot, reads, to_vk, c, everyone_reads):
    """[N, HV, V, K] in the compute dtype: pool[slot[n]] where reads[n], else zeros. Only those slots are read
    (rows that read nothing gather slot 0 and drop it); the pool is never copied or converted as a whole."""
    if pool.shape[0] == 0:
        if bool(reads.any()):
            raise IndexError("pool: a request reads a slot of an empty pool")
        return torch.zeros((slot.shape[0],) + tuple(to_vk(pool).shape[1:]), dtype=c, device=pool.device)
    S = to_vk(pool.index_select(0, torch.where(reads, slot, 0))).to(c)
    return S if everyone_reads else torch.where(reads[:, None, None, None], S, 0.0)


def _last_writer(targets: torch.Tensor, bank: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """targets [M] (-1: no write) in the order the sequential oracle writes; bank [M, ...] what each would write.
    Returns (the distinct targets, the last write to each) in the order of those last writes; the bank itself,
    uncopied, when every entry is such a last write."""
    if targets.numel() == 0:
        return targets.new_zeros(0), bank[:0]
    ordered, perm = torch.sort(targets, stable=True)  # equal targets stay in write order
    last = torch.ones_like(ordered, dtype=torch.bool)
    last[:-1] = ordered[1:] != ordered[:-1]
    keep = perm[last & (ordered >= 0)].sort().values  # the one device sync: how many distinct targets were written
    if keep.numel() == targets.numel():
        return targets, bank
    return targets.index_select(0, keep), bank.index_select(0, keep)
