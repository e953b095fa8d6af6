"""Decode, MTP verify and varlen prefill over a state pool addressed by slot indices.

Shapes (B requests, T tokens each, H qk heads, HV value heads, P pool slots):
    q, k  [B, T, H, K]      v  [B, T, HV, V]      a, b / g, beta  [B, T, HV]
    pool  [P, HV, V, K]  (layout "vk", FlashInfer / SGLang >= 0.5.12)  or  [P, HV, K, V]  ("kv", fla default)
    read_slots, write_slots  [B]   token_slots [B, T]   intermediate [R, steps, HV, V, K] (or K, V)
Prefill packs tokens instead: q, k [N_tok, H, K], v [N_tok, HV, V], gates [N_tok, HV], cu_seqlens [N+1].

Inputs are never modified: every call returns new tensors (output, pool, intermediate) and the pool
keeps its dtype, so untouched slots come back bit-identical.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import torch

from reference.checks import (
    expect_index,
    expect_shape,
    intermediate_inputs,
    offsets,
    one_token,
    packed_inputs,
    pool_inputs,
    verify_inputs,
)
from reference.contracts import EXACT, SKIP_PADDING, PadContract, Precision
from reference.gates import Gates
from reference.recurrence import gate_values, run_sequence

Layout = Literal["vk", "kv"]


@dataclass(frozen=True)
class PoolResult:
    """output: [B, T, HV, V] (verify/decode) or [N_tok, HV, V] (prefill); pool and intermediate:
    the buffers after the call (intermediate is None when none was given)."""

    output: torch.Tensor
    pool: torch.Tensor
    intermediate: torch.Tensor | None
    written_slots: frozenset = frozenset()  # pool slots the contract wrote (all others are bit-identical)
    written_rows: frozenset = frozenset()  # intermediate rows the contract wrote


def decode(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    gates: Gates,
    pool: torch.Tensor,
    read_slots: torch.Tensor,
    *,
    write_slots: torch.Tensor | None = None,
    scale: float | None = None,
    use_l2norm: bool = True,
    layout: Layout = "vk",
    pad: PadContract = SKIP_PADDING,
    precision: Precision = EXACT,
    output: torch.Tensor | None = None,
) -> PoolResult:
    """One token per request (T = 1), state written back to the pool. Shapes as in the module doc."""
    one_token(q)
    return verify(
        q,
        k,
        v,
        gates,
        pool,
        read_slots,
        write_slots=write_slots,
        scale=scale,
        use_l2norm=use_l2norm,
        layout=layout,
        pad=pad,
        precision=precision,
        output=output,
    )


def verify(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    gates: Gates,
    pool: torch.Tensor,
    read_slots: torch.Tensor,
    *,
    write_slots: torch.Tensor | None = None,
    scale: float | None = None,
    use_l2norm: bool = True,
    layout: Layout = "vk",
    pad: PadContract = SKIP_PADDING,
    precision: Precision = EXACT,
    disable_state_update: bool = False,
    intermediate: torch.Tensor | None = None,
    intermediate_rows: torch.Tensor | None = None,
    token_slots: torch.Tensor | None = None,
    output: torch.Tensor | None = None,
) -> PoolResult:
    """T tokens per request. Extras over decode:

    intermediate [R, steps, HV, ...]: the state after step t of request n goes to
        intermediate[row, t] with row = intermediate_rows[n] (default: the batch row n; -1 = none).
    disable_state_update: the pool is not written (verify before acceptance).
    token_slots [B, T]: FLA/vLLM style per-token scatter, pool[token_slots[n, t]] = state after t;
        the final write-back to write_slots is then skipped.
    output [B, T, HV, V]: what the caller's output buffer held (kept for rows the contract skips).
    """
    B, T, HV, V, flat = verify_inputs(q, k, v, gates, token_slots, disable_state_update)
    g, beta = gate_values(gates, precision)
    cu = [n * T for n in range(B + 1)]
    out = _serve(
        flat(q),
        flat(k),
        flat(v),
        flat(g),
        flat(beta),
        cu,
        pool,
        read_slots,
        write_slots,
        scale=scale,
        use_l2norm=use_l2norm,
        layout=layout,
        pad=pad,
        precision=precision,
        write_back=not disable_state_update and token_slots is None,
        intermediate=intermediate,
        intermediate_rows=intermediate_rows,
        token_slots=token_slots,
        output=None if output is None else flat(output),
    )
    return dataclasses.replace(out, output=out.output.reshape(B, T, HV, V))


def prefill(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    gates: Gates,
    cu_seqlens: torch.Tensor,
    pool: torch.Tensor,
    read_slots: torch.Tensor,
    *,
    write_slots: torch.Tensor | None = None,
    scale: float | None = None,
    use_l2norm: bool = True,
    layout: Layout = "vk",
    pad: PadContract = SKIP_PADDING,
    precision: Precision = EXACT,
) -> PoolResult:
    """Varlen prefill: sequence n is tokens cu_seqlens[n]:cu_seqlens[n+1] of the packed inputs
    (q, k [N_tok, H, K], v [N_tok, HV, V], gates [N_tok, HV], cu_seqlens [N + 1]), starting from
    pool[read_slots[n]] and written back to pool[write_slots[n]] (default the same)."""
    N_tok = packed_inputs(q, k, v, gates)
    g, beta = gate_values(gates, precision)
    cu = offsets(cu_seqlens, N_tok)
    return _serve(
        q,
        k,
        v,
        g,
        beta,
        cu,
        pool,
        read_slots,
        write_slots,
        scale=scale,
        use_l2norm=use_l2norm,
        layout=layout,
        pad=pad,
        precision=precision,
        write_back=True,
    )


def commit(
    pool: torch.Tensor,
    intermediate: torch.Tensor,
    slots: torch.Tensor,
    accepted: torch.Tensor,
    *,
    rows: torch.Tensor | None = None,
    layout: Layout = "vk",
    pad: PadContract = SKIP_PADDING,
) -> torch.Tensor:
    """After acceptance: pool[slots[n]] = intermediate[rows[n], accepted[n] - 1] (rows default: batch row).
    slots, accepted, rows [B]; intermediate [R, steps, HV, *state] with the pool's state shape.
    Rows with a padded slot, no row (-1) or accepted < 1 are skipped. Returns the new pool."""
    B = slots.shape[0] if isinstance(slots, torch.Tensor) else -1
    expect_index("slots", slots, (None,), "[B]")
    expect_index("accepted", accepted, (B,), "[B]")
    rows = torch.arange(B) if rows is None else rows
    expect_index("rows", rows, (B,), "[B]")
    expect_shape("intermediate", intermediate, (None, None) + tuple(pool.shape[1:]), "[R, steps, HV, *state]")
    new = pool.clone()
    for s, r, n_acc in zip(slots.tolist(), rows.tolist(), accepted.tolist()):
        if not pad.is_pad(s) and r >= 0 and n_acc >= 1:
            new[s] = intermediate[r, n_acc - 1].to(pool.dtype)
    return new


def _serve(
    q,
    k,
    v,
    g,
    beta,
    cu,
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
    """Run each request of the packed batch against the pool; the contracts decide padded rows."""
    N = len(cu) - 1
    N_tok, H, K = q.shape
    HV, V = v.shape[1:]
    state_shape = pool_inputs(pool, read_slots, write_slots, layout=layout, N=N, HV=HV, V=V, K=K)
    max_T = max((b - a for a, b in zip(cu, cu[1:])), default=0)
    intermediate_rows = intermediate_inputs(intermediate, intermediate_rows, state_shape, layout=layout, N=N, T=max_T)
    c = precision.compute
    scale = K**-0.5 if scale is None else scale
    to_vk = (lambda s: s) if layout == "vk" else (lambda s: s.transpose(-1, -2))
    pool_out = pool.clone()
    inter_out = None if intermediate is None else intermediate.clone()
    out = torch.zeros(N_tok, HV, V, dtype=c, device=pool.device) if output is None else output.to(c).clone()
    written_slots, written_rows = set(), set()
    for n in range(N):
        tokens = slice(cu[n], cu[n + 1])
        read = int(read_slots[n])
        S0 = _initial_state(pool, read, pad, to_vk, c, (HV, V, K))
        if S0 is None:  # the contract skips the request: no state read or written, its output zeroed or kept (kept:
            # skip_untouched, and discard, whose rows are undefined: the caller's output stands in for them)
            if pad.read == "skip_zero":
                out[tokens] = 0
            continue
        o, states = run_sequence(
            S0,
            precision.load(q[tokens]),
            precision.load(k[tokens]),
            precision.load(v[tokens]),
            g[tokens],
            beta[tokens],
            scale=scale,
            use_l2norm=use_l2norm,
            precision=precision,
            store_dtype=pool.dtype,
        )
        out[tokens] = o
        if inter_out is not None and int(intermediate_rows[n]) >= 0:
            inter_out[int(intermediate_rows[n]), : len(states)] = to_vk(states).to(inter_out.dtype)
            written_rows.add(int(intermediate_rows[n]))
        if token_slots is not None:
            for t, slot in enumerate(token_slots[n].tolist()[: len(states)]):
                if not pad.is_pad(slot):
                    pool_out[slot] = to_vk(states[t]).to(pool.dtype)
                    written_slots.add(slot)
        write = _write_slot(pad, read, None if write_slots is None else int(write_slots[n]))
        if write_back and len(states) and write is not None:
            pool_out[write] = to_vk(states[-1]).to(pool.dtype)
            written_slots.add(write)
    if precision.output is not None:
        out = out.to(precision.output)
    return PoolResult(out, pool_out, inter_out, frozenset(written_slots), frozenset(written_rows))


def _initial_state(pool, read, pad, to_vk, c, state_shape):
    """S0 [HV, V, K] in the compute dtype of a request that reads slot `read`: that slot, or for a padded read what
    pad.read says: slot 0, zeros, or None where the request is skipped."""
    if not pad.is_pad(read):
        return to_vk(pool[read]).to(c)
    if pad.read == "slot0":
        return to_vk(pool[0]).to(c)
    if pad.read == "zero_state":
        return torch.zeros(state_shape, dtype=c, device=pool.device)
    return None  # skip_zero, skip_untouched, discard


def _write_slot(pad, read, write):
    """The slot a request's final state is written back to, None for none; `write` is its write slot (None: one pool).

    One pool: a padded read that ran from zeros is not written back; one redirected to slot 0 writes back there, even
    where the sentinel makes 0 a pad. Split pools follow the write slot (bf16 h0_out_indices, prefill
    output_state_indices): a padded one is skipped or redirected to slot 0, as pad.write says."""
    if write is None:
        if not pad.is_pad(read):
            return read
        return None if pad.read == "zero_state" else 0
    if pad.is_pad(write):
        return None if pad.write == "skip" else 0
    return write
