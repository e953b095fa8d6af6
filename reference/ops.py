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

from reference.checks import expect_index, expect_shape, head_groups
from reference.contracts import EXACT, SKIP_PADDING, PadContract, Precision
from reference.recurrence import Gates, LogGates, RawGates, gate_values, run_sequence

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


def decode(q, k, v, gates: Gates, pool, read_slots, *, write_slots=None, scale=None, use_l2norm=True,
           layout: Layout = "vk", pad: PadContract = SKIP_PADDING, precision: Precision = EXACT,
           output=None) -> PoolResult:
    """One token per request (T = 1), state written back to the pool. Shapes as in the module doc."""
    _one_token(q)
    return mtp_verify(q, k, v, gates, pool, read_slots, write_slots=write_slots, scale=scale,
                      use_l2norm=use_l2norm, layout=layout, pad=pad, precision=precision, output=output)


def mtp_verify(q, k, v, gates: Gates, pool, read_slots, *, write_slots=None, scale=None, use_l2norm=True,
               layout: Layout = "vk", pad: PadContract = SKIP_PADDING, precision: Precision = EXACT,
               disable_state_update=False, intermediate=None, intermediate_rows=None, token_slots=None,
               output=None) -> PoolResult:
    """T tokens per request. Extras over decode:

    intermediate [R, steps, HV, ...]: the state after step t of request n goes to
        intermediate[row, t] with row = intermediate_rows[n] (default: the batch row n; -1 = none).
    disable_state_update: the pool is not written (verify before acceptance).
    token_slots [B, T]: FLA/vLLM style per-token scatter, pool[token_slots[n, t]] = state after t;
        the final write-back to write_slots is then skipped.
    output [B, T, HV, V]: what the caller's output buffer held (kept for rows the contract skips).
    """
    B, T, HV, V, flat = _verify_inputs(q, k, v, token_slots, disable_state_update)
    g, beta = _gates(gates, (B, T, HV), "[B, T, HV]", precision)
    cu = [n * T for n in range(B + 1)]
    out = _serve(flat(q), flat(k), flat(v), flat(g), flat(beta), cu, pool, read_slots, write_slots,
                 scale=scale, use_l2norm=use_l2norm, layout=layout, pad=pad, precision=precision,
                 write_back=not disable_state_update and token_slots is None, intermediate=intermediate,
                 intermediate_rows=intermediate_rows, token_slots=token_slots,
                 output=None if output is None else flat(output))
    return dataclasses.replace(out, output=out.output.reshape(B, T, HV, V))


def prefill(q, k, v, gates: Gates, cu_seqlens, pool, read_slots, *, write_slots=None, scale=None,
            use_l2norm=True, layout: Layout = "vk", pad: PadContract = SKIP_PADDING,
            precision: Precision = EXACT) -> PoolResult:
    """Varlen prefill: sequence n is tokens cu_seqlens[n]:cu_seqlens[n+1] of the packed inputs,
    starting from pool[read_slots[n]] and written back to pool[write_slots[n]] (default the same)."""
    g, beta, cu = _prefill_inputs(q, k, v, gates, cu_seqlens, precision)
    return _serve(q, k, v, g, beta, cu, pool, read_slots, write_slots, scale=scale, use_l2norm=use_l2norm,
                  layout=layout, pad=pad, precision=precision, write_back=True)


def commit(pool, intermediate, slots, accepted, *, rows=None, layout: Layout = "vk",
           pad: PadContract = SKIP_PADDING) -> torch.Tensor:
    """After acceptance: pool[slots[n]] = intermediate[rows[n], accepted[n] - 1] (rows default: batch row).
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


def _serve(q, k, v, g, beta, cu, pool, read_slots, write_slots, *, scale, use_l2norm, layout, pad,
           precision, write_back, intermediate=None, intermediate_rows=None, token_slots=None, output=None):
    """Run each request of the packed batch against the pool; the contracts decide padded rows."""
    N = len(cu) - 1
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
    max_T = max((b - a for a, b in zip(cu, cu[1:])), default=0)
    if intermediate is not None:
        expect_shape("intermediate", intermediate, (None, None) + state_shape, "[R, steps, " + what[4:])
        if intermediate.shape[1] < max_T:
            raise ValueError(f"intermediate: expected [R, steps >= T = {max_T}, ...], "
                             f"got steps = {intermediate.shape[1]}")
        intermediate_rows = torch.arange(N) if intermediate_rows is None else intermediate_rows
        expect_index("intermediate_rows", intermediate_rows, (N,), "[B]")
        if max(intermediate_rows.tolist(), default=-1) >= intermediate.shape[0]:
            raise ValueError("intermediate: expected R > every intermediate_rows entry, "
                             f"got R = {intermediate.shape[0]}")
    c = precision.compute
    scale = K ** -0.5 if scale is None else scale
    to_vk = (lambda s: s) if layout == "vk" else (lambda s: s.transpose(-1, -2))
    pool_out = pool.clone()
    inter_out = None if intermediate is None else intermediate.clone()
    out = torch.zeros(N_tok, HV, V, dtype=c, device=pool.device) if output is None else output.to(c).clone()
    written_slots, written_rows = set(), set()
    for n in range(N):
        tokens = slice(cu[n], cu[n + 1])
        read = int(read_slots[n])
        padded = pad.is_pad(read)
        if padded and pad.read in ("skip_zero", "skip_untouched"):
            if pad.read == "skip_zero":
                out[tokens] = 0
            continue
        if padded and pad.read == "zero_state":
            S0 = torch.zeros(HV, V, K, dtype=c, device=pool.device)
        else:
            S0 = to_vk(pool[0 if padded else read]).to(c)
        o, states = run_sequence(S0, precision.load(q[tokens]), precision.load(k[tokens]), precision.load(v[tokens]),
                                 g[tokens], beta[tokens], scale=scale, use_l2norm=use_l2norm,
                                 precision=precision, store_dtype=pool.dtype)
        out[tokens] = o
        if inter_out is not None and int(intermediate_rows[n]) >= 0:
            inter_out[int(intermediate_rows[n]), : len(states)] = to_vk(states).to(inter_out.dtype)
            written_rows.add(int(intermediate_rows[n]))
        if token_slots is not None:
            for t, slot in enumerate(token_slots[n].tolist()[: len(states)]):
                if not pad.is_pad(slot):
                    pool_out[slot] = to_vk(states[t]).to(pool.dtype)
                    written_slots.add(slot)
        if not write_back or len(states) == 0:
            continue
        if padded and write_slots is None:  # one pool: a zero-state run is not written back; the read redirected
            if pad.read == "zero_state":  # to slot 0 writes back there too, even where the sentinel makes 0 a pad
                continue
            write = 0
        else:  # split pools follow the write slot (bf16 h0_out_indices, prefill output_state_indices)
            write = read if write_slots is None else int(write_slots[n])
            if pad.is_pad(write):
                if pad.write == "skip":
                    continue
                write = 0
        pool_out[write] = to_vk(states[-1]).to(pool.dtype)
        written_slots.add(write)
    if precision.output is not None:
        out = out.to(precision.output)
    return PoolResult(out, pool_out, inter_out, frozenset(written_slots), frozenset(written_rows))


# ---- argument checks, shared with reference.batched (same checks, same messages) ----------------------------------
def _one_token(q) -> None:
    if q.dim() == 4 and q.shape[1] != 1:
        raise ValueError(f"q: decode expects T = 1 in [B, T, H, K], got T = {q.shape[1]}")


def _verify_inputs(q, k, v, token_slots, disable_state_update):
    """B, T, HV, V of verify's inputs, checked, and `flat`: [B, T, ...] -> [B * T, ...] (token-major packing)."""
    B, T, H, K = _shape4("q", q, "[B, T, H, K]")
    HV, V = _shape4("v", v, "[B, T, HV, V]")[2:]
    expect_shape("v", v, (B, T, HV, V), "[B, T, HV, V]")
    expect_shape("k", k, (B, T, H, K), "[B, T, H, K]")
    head_groups(H, HV)
    if token_slots is not None:
        expect_index("token_slots", token_slots, (B, T), "[B, T]")
        if disable_state_update:
            raise ValueError("token_slots: per-token scatter writes the pool; expected disable_state_update=False")
    return B, T, HV, V, lambda x: x.reshape(B * T, *x.shape[2:])


def _prefill_inputs(q, k, v, gates: Gates, cu_seqlens, precision: Precision):
    """Prefill's inputs checked: its gate values g, beta and the offsets cu_seqlens as a list (read on the host)."""
    if q.dim() != 3:
        raise ValueError(f"q: expected packed shape [N_tok, H, K], got {list(q.shape)}")
    N_tok, H, K = q.shape
    expect_shape("k", k, (N_tok, H, K), "[N_tok, H, K]")
    if v.dim() != 3 or v.shape[0] != N_tok:
        raise ValueError(f"v: expected shape [N_tok, HV, V] with N_tok = {N_tok}, got {list(v.shape)}")
    HV = v.shape[1]
    head_groups(H, HV)
    g, beta = _gates(gates, (N_tok, HV), "[N_tok, HV]", precision)
    expect_index("cu_seqlens", cu_seqlens, (None,), "[N + 1]")
    cu = cu_seqlens.tolist()
    if len(cu) < 1 or cu[0] != 0 or cu[-1] != N_tok or any(b < a for a, b in zip(cu, cu[1:])):
        raise ValueError(f"cu_seqlens: expected non-decreasing offsets [N + 1] from 0 to N_tok = {N_tok}, got {cu}")
    return g, beta, cu


def _shape4(name, x, what):
    if not isinstance(x, torch.Tensor) or x.dim() != 4:
        raise ValueError(f"{name}: expected shape {what}, got {list(x.shape) if isinstance(x, torch.Tensor) else x!r}")
    return tuple(x.shape)


def _gates(gates: Gates, shape: tuple, what: str, precision: Precision):
    if isinstance(gates, RawGates):
        HV = shape[-1]
        expect_shape("A_log", gates.A_log, (HV,), "[HV]")
        expect_shape("dt_bias", gates.dt_bias, (HV,), "[HV]")
        expect_shape("a", gates.a, shape, what)
        expect_shape("b", gates.b, shape, what)
    elif isinstance(gates, LogGates):
        expect_shape("g", gates.g, shape, what)
        expect_shape("beta", gates.beta, shape, what)
    else:
        raise ValueError(f"gates: expected RawGates or LogGates, got {type(gates).__name__}")
    return gate_values(gates, precision)
