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
caller's output buffer) mean exactly what they mean in reference.ops; arguments are validated by the same checks,
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
largest value (what tests/test_oracle_batched.py checks: 4 ulps), except where such a difference straddles a rounding
to a narrower dtype (a bf16 output, a bf16 state stored every step): there the two may be one ulp of that dtype
apart. Seen: on CPU (torch 2.13, AVX512 and AVX2 kernels) every example the tests drew was bit-identical, with their
tolerance set to zero; on an H200 (torch 2.11, CUDA) 558 of 600 were and all were within the 4 ulps, and a large
float32 model with bf16 outputs and states (B=96, T=12, HV=32, K=V=128) was one bf16 ulp apart.
"""
from __future__ import annotations

import bisect
import dataclasses
from dataclasses import dataclass

import torch

from reference.checks import expect_index, expect_shape
from reference.contracts import EXACT, SKIP_PADDING, PadContract, Precision
from reference.ops import Layout, PoolResult, _gates, _one_token, _prefill_inputs, _verify_inputs
from reference.recurrence import Gates, l2normalize


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
            new_inter[result.rows.to(intermediate.device), : result.row_states.shape[1]] = \
                result.row_states.to(intermediate.device)
    return PoolResult(result.output, new_pool, new_inter, result.written_slots, result.written_rows)


def batched_decode(q, k, v, gates: Gates, pool, read_slots, *, write_slots=None, scale=None, use_l2norm=True,
                   layout: Layout = "vk", pad: PadContract = SKIP_PADDING, precision: Precision = EXACT,
                   output=None) -> SparseResult:
    """reference.ops.decode, batched: one token per request (T = 1), state written back to the pool."""
    _one_token(q)
    return batched_verify(q, k, v, gates, pool, read_slots, write_slots=write_slots, scale=scale,
                          use_l2norm=use_l2norm, layout=layout, pad=pad, precision=precision, output=output)


def batched_verify(q, k, v, gates: Gates, pool, read_slots, *, write_slots=None, scale=None, use_l2norm=True,
                   layout: Layout = "vk", pad: PadContract = SKIP_PADDING, precision: Precision = EXACT,
                   disable_state_update=False, intermediate=None, intermediate_rows=None, token_slots=None,
                   output=None) -> SparseResult:
    """reference.ops.mtp_verify, batched: T tokens per request (shapes in the module doc).

    intermediate [R, steps, HV, ...]: the state after step t of request n goes to row intermediate_rows[n]
        (default: the batch row n; -1 = none), returned as SparseResult.rows / row_states.
    disable_state_update: the pool is not written (verify before acceptance).
    token_slots [B, T]: per-token scatter, pool[token_slots[n, t]] = state after t; no final write-back then.
    output [B, T, HV, V]: what the caller's output buffer held (kept for rows the contract skips).
    """
    B, T, HV, V, flat = _verify_inputs(q, k, v, token_slots, disable_state_update)
    g, beta = _gates(gates, (B, T, HV), "[B, T, HV]", precision)
    out = _serve(flat(q), flat(k), flat(v), flat(g), flat(beta), [T] * B, pool, read_slots, write_slots,
                 scale=scale, use_l2norm=use_l2norm, layout=layout, pad=pad, precision=precision,
                 write_back=not disable_state_update and token_slots is None, intermediate=intermediate,
                 intermediate_rows=intermediate_rows, token_slots=token_slots,
                 output=None if output is None else flat(output))
    return dataclasses.replace(out, output=out.output.reshape(B, T, HV, V))


def batched_prefill(q, k, v, gates: Gates, cu_seqlens, pool, read_slots, *, write_slots=None, scale=None,
                    use_l2norm=True, layout: Layout = "vk", pad: PadContract = SKIP_PADDING,
                    precision: Precision = EXACT) -> SparseResult:
    """reference.ops.prefill, batched: sequence n is tokens cu_seqlens[n]:cu_seqlens[n+1] of the packed inputs,
    starting from pool[read_slots[n]] and written back to pool[write_slots[n]] (default the same). An empty
    sequence reads, writes and stores nothing. cu_seqlens is read on the host once."""
    g, beta, cu = _prefill_inputs(q, k, v, gates, cu_seqlens, precision)
    return _serve(q, k, v, g, beta, [b - a for a, b in zip(cu, cu[1:])], pool, read_slots, write_slots,
                  scale=scale, use_l2norm=use_l2norm, layout=layout, pad=pad, precision=precision, write_back=True)


def _serve(q, k, v, g, beta, lengths, pool, read_slots, write_slots, *, scale, use_l2norm, layout, pad,
           precision, write_back, intermediate=None, intermediate_rows=None, token_slots=None, output=None):
    """reference.ops._serve over the whole batch. `lengths` (host ints) are the sequence lengths of the packed
    tokens; intermediate and token_slots come only with equal lengths (verify)."""
    N = len(lengths)
    N_tok, H, K = q.shape
    HV, V = v.shape[1:]
    state_shape = (HV, V, K) if layout == "vk" else (HV, K, V)
    what = "[P, HV, V, K]" if layout == "vk" else "[P, HV, K, V]"
    if layout not in ("vk", "kv"):
        raise ValueError(f"layout: expected 'vk' or 'kv', got {layout!r}")
    expect_shape("pool", pool, (None,) + state_shape, what)
    expect_index("read_slots", read_slots, (N,), "[B]")
    if write_slots is not None:
        expect_index("write_slots", write_slots, (N,), "[B]")
    T = max(lengths, default=0)
    if intermediate is not None:
        expect_shape("intermediate", intermediate, (None, None) + state_shape, "[R, steps, " + what[4:])
        if intermediate.shape[1] < T:
            raise ValueError(f"intermediate: expected [R, steps >= T = {T}, ...], got steps = {intermediate.shape[1]}")
        intermediate_rows = torch.arange(N) if intermediate_rows is None else intermediate_rows
        expect_index("intermediate_rows", intermediate_rows, (N,), "[B]")
        if N and int(intermediate_rows.max()) >= intermediate.shape[0]:
            raise ValueError("intermediate: expected R > every intermediate_rows entry, "
                             f"got R = {intermediate.shape[0]}")
    uniform = all(n == T for n in lengths)  # verify
    if not uniform and (intermediate is not None or token_slots is not None):
        raise ValueError("lengths: intermediate states and token_slots need equal sequence lengths (verify)")

    dev, c = pool.device, precision.compute
    P = precision.round_product  # the identity unless a tensor-core kernel is modelled
    scale = K ** -0.5 if scale is None else scale
    to_vk = (lambda s: s) if layout == "vk" else (lambda s: s.transpose(-1, -2))
    group = HV // H
    index = lambda x: x.to(device=dev, dtype=torch.long)  # noqa: E731

    # Per request: what the contract does with its read slot.
    read = index(read_slots)
    padded = _is_pad(pad, read)
    skip = padded if pad.read in ("skip_zero", "skip_untouched") else torch.zeros_like(padded)
    reads = torch.ones_like(padded) if pad.read == "slot0" else ~padded

    # The loop runs the requests longest first (a stable order, from the host's lengths), so the requests still
    # running at step t are the first running[t]; request order[i]'s step t is packed token start[order[i]] + t.
    order = sorted(range(N), key=lambda n: -lengths[n])
    ascending = sorted(lengths)
    running = [N - bisect.bisect_right(ascending, t) for t in range(T)]
    perm = None if order == list(range(N)) else torch.tensor(order, device=dev)
    by_length = lambda x: x if perm is None else x.index_select(0, perm)  # noqa: E731
    lens = torch.full((N,), T, device=dev) if uniform else torch.tensor(lengths, dtype=torch.long, device=dev)
    token = by_length(torch.cumsum(lens, 0) - lens)[:, None] + torch.arange(T, device=dev)  # [N, T]
    S = _initial_states(pool, by_length(torch.where(padded, 0, read)), by_length(reads), to_vk, c,
                        pad.read == "slot0")  # [N, HV, V, K] in the compute dtype, in the loop's order

    # Inputs as run_sequence sees them: q^ (scaled) and k^ expanded to the value heads.
    def normed(x):
        x = precision.load(x)
        return precision.round_normalized(l2normalize(x)) if use_l2norm else x

    qh = (normed(q) * scale).repeat_interleave(group, 1)  # [N_tok, HV, K]
    kh = normed(k).repeat_interleave(group, 1)
    vh = precision.load(v)  # [N_tok, HV, V]
    out = torch.zeros(N_tok, HV, V, dtype=c, device=dev)
    uk = torch.empty_like(S)  # u k^T, reused: the state-sized temporaries are updated in place
    inter_buf = None if intermediate is None else torch.empty(
        (N, T) + state_shape, dtype=intermediate.dtype, device=dev)
    token_buf = None if token_slots is None else torch.empty((N, T) + state_shape, dtype=pool.dtype, device=dev)

    for t in range(T):  # each line is run_sequence's, on the running requests' states S[:n] in place
        n, at = running[t], token[: running[t], t]
        q_t, k_t, v_t, g_t, beta_t = (x.index_select(0, at) for x in (qh, kh, vh, g, beta))
        S_n = S[:n].mul_(torch.exp(g_t)[:, :, None, None])
        Sk = P(torch.einsum("nhvk,nhk->nhv", P(S_n), k_t))
        u = P(beta_t[:, :, None] * (v_t - Sk))
        S_n.add_(torch.mul(u[:, :, :, None], k_t[:, :, None, :], out=uk[:n]))
        out.index_copy_(0, at, torch.einsum("nhvk,nhk->nhv", P(S_n), q_t))
        if precision.state_each_step:
            S_n.copy_(S_n.to(pool.dtype))
        if inter_buf is not None:
            inter_buf[:, t] = to_vk(S)
        if token_buf is not None:
            token_buf[:, t] = to_vk(S)
    if perm is not None:  # back to batch order
        S = S.index_select(0, torch.argsort(perm))

    # Output rows of skipped requests: zeros, or what the caller's buffer held.
    if pad.read in ("skip_zero", "skip_untouched"):
        owner = torch.repeat_interleave(torch.arange(N, device=dev), lens, output_size=N_tok)
        kept = 0.0 if pad.read == "skip_zero" or output is None else output.to(device=dev, dtype=c)
        out = torch.where(skip[owner][:, None, None], kept, out)
    if precision.output is not None:
        out = out.to(precision.output)

    # Pool writes: per-token scatter, or the final state to the write slot the contract picks.
    if token_slots is not None:
        tslots = index(token_slots)
        targets = torch.where(~_is_pad(pad, tslots) & ~skip[:, None], tslots, -1)  # [N, T], order (n, t)
        bank = token_buf.flatten(0, 1)
    elif write_back:
        if write_slots is None:  # one pool: a zero-state row is not written back; a slot-0 read writes slot 0
            target, ok = torch.where(padded, 0, read), ~(padded & (pad.read == "zero_state"))
        else:  # split pools follow the write slot
            write = index(write_slots)
            write_pad = _is_pad(pad, write)
            target, ok = torch.where(write_pad, 0, write), ~write_pad | (pad.write == "slot0")
        targets = torch.where(ok & ~skip & (lens > 0), target, -1)
        bank = to_vk(S).to(pool.dtype)
    else:
        targets, bank = torch.full((0,), -1, dtype=torch.long, device=dev), pool.new_empty((0,) + state_shape)
    slots, states = _last_writer(targets.flatten(), bank)

    rows = row_states = None
    if intermediate is not None:
        r = index(intermediate_rows)
        rows, row_states = _last_writer(torch.where((r >= 0) & ~skip, r, -1), inter_buf)
    return SparseResult(out, slots, states, rows, row_states)


def _is_pad(pad: PadContract, index: torch.Tensor) -> torch.Tensor:
    """PadContract.is_pad over an index tensor."""
    return index < 0 if pad.sentinel == "negative" else index <= 0


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
