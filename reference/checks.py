"""Argument validation: every bad input raises ValueError naming the argument and what was expected.

The readable oracle (reference.ops) and the batched one (reference.batched) call these same functions in the same
order, so the two accept the same inputs and refuse the rest with the same message. Each check returns the sizes
its caller goes on with.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from reference.gates import Gates, LogGates, RawGates


def expect_shape(name: str, x: torch.Tensor, shape: tuple, what: str) -> None:
    """`shape` entries are ints or None (any size); `what` spells the contract, e.g. '[B, T, H, K]'."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name}: expected a tensor of shape {what}, got {type(x).__name__}")
    if x.dim() != len(shape) or any(s is not None and s != d for s, d in zip(shape, x.shape)):
        raise ValueError(f"{name}: expected shape {what} = {_fmt(shape)}, got {list(x.shape)}")


def expect_index(name: str, x: torch.Tensor, shape: tuple, what: str) -> None:
    expect_shape(name, x, shape, what)
    if x.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"{name}: expected an int32 or int64 index tensor {what}, got {x.dtype}")


def head_groups(H: int, HV: int) -> int:
    """Value heads per qk head; value head hv reads qk head hv // groups."""
    if H <= 0 or HV % H != 0:
        raise ValueError(f"q/k heads H={H} and v heads HV={HV}: expected HV to be a multiple of H")
    return HV // H


def one_token(q: torch.Tensor) -> None:
    """Decode: q [B, T, H, K] has T = 1 (other shape errors are verify's to report)."""
    if q.dim() == 4 and q.shape[1] != 1:
        raise ValueError(f"q: decode expects T = 1 in [B, T, H, K], got T = {q.shape[1]}")


def verify_inputs(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    gates: Gates,
    token_slots: torch.Tensor | None,
    disable_state_update: bool,
) -> tuple[int, int, int, int, Callable[[torch.Tensor], torch.Tensor]]:
    """Verify's q, k [B, T, H, K], v [B, T, HV, V], token_slots [B, T] and gates [B, T, HV], checked. Returns B, T,
    HV, V and `flat`: [B, T, ...] -> [B * T, ...] (the token-major packing both oracles run on)."""
    B, T, H, K = _shape4("q", q, "[B, T, H, K]")
    HV, V = _shape4("v", v, "[B, T, HV, V]")[2:]
    expect_shape("v", v, (B, T, HV, V), "[B, T, HV, V]")
    expect_shape("k", k, (B, T, H, K), "[B, T, H, K]")
    head_groups(H, HV)
    if token_slots is not None:
        expect_index("token_slots", token_slots, (B, T), "[B, T]")
        if disable_state_update:
            raise ValueError("token_slots: per-token scatter writes the pool; expected disable_state_update=False")
    gate_inputs(gates, (B, T, HV), "[B, T, HV]")
    return B, T, HV, V, lambda x: x.reshape(B * T, *x.shape[2:])


def packed_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, gates: Gates) -> int:
    """Prefill's packed q, k [N_tok, H, K], v [N_tok, HV, V] and gates [N_tok, HV], checked. Returns N_tok."""
    if q.dim() != 3:
        raise ValueError(f"q: expected packed shape [N_tok, H, K], got {list(q.shape)}")
    N_tok, H, K = q.shape
    expect_shape("k", k, (N_tok, H, K), "[N_tok, H, K]")
    if v.dim() != 3 or v.shape[0] != N_tok:
        raise ValueError(f"v: expected shape [N_tok, HV, V] with N_tok = {N_tok}, got {list(v.shape)}")
    head_groups(H, v.shape[1])
    gate_inputs(gates, (N_tok, v.shape[1]), "[N_tok, HV]")
    return N_tok


def offsets(cu_seqlens: torch.Tensor, N_tok: int) -> list[int]:
    """Prefill's cu_seqlens [N + 1], checked (non-decreasing from 0 to N_tok) and read on the host."""
    expect_index("cu_seqlens", cu_seqlens, (None,), "[N + 1]")
    cu = cu_seqlens.tolist()
    if len(cu) < 1 or cu[0] != 0 or cu[-1] != N_tok or any(b < a for a, b in zip(cu, cu[1:])):
        raise ValueError(f"cu_seqlens: expected non-decreasing offsets [N + 1] from 0 to N_tok = {N_tok}, got {cu}")
    return cu


def gate_inputs(gates: Gates, shape: tuple, what: str) -> None:
    """The gates per token of `shape` (spelled `what`, e.g. '[B, T, HV]'): A_log, dt_bias [HV] and a, b `shape` for
    RawGates; g, beta `shape` for LogGates."""
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


def pool_inputs(
    pool: torch.Tensor,
    read_slots: torch.Tensor,
    write_slots: torch.Tensor | None,
    *,
    layout: str,
    N: int,
    HV: int,
    V: int,
    K: int,
) -> tuple[int, int, int]:
    """The layout ('vk' or 'kv'), the pool [P, HV, V, K] or [P, HV, K, V] and the slot maps [N], checked. Returns the
    state shape of the layout."""
    if layout not in ("vk", "kv"):
        raise ValueError(f"layout: expected 'vk' or 'kv', got {layout!r}")
    state_shape = (HV, V, K) if layout == "vk" else (HV, K, V)
    expect_shape("pool", pool, (None,) + state_shape, _state_what("P", layout))
    expect_index("read_slots", read_slots, (N,), "[B]")
    if write_slots is not None:
        expect_index("write_slots", write_slots, (N,), "[B]")
    return state_shape


def intermediate_inputs(
    intermediate: torch.Tensor | None,
    intermediate_rows: torch.Tensor | None,
    state_shape: tuple[int, int, int],
    *,
    layout: str,
    N: int,
    T: int,
) -> torch.Tensor | None:
    """The intermediate buffer [R, steps >= T, *state_shape] (the pool's state, as `pool_inputs` returns it) and
    intermediate_rows [N] (each < R; -1 = none), checked. Returns the rows, arange(N) when none were given; None
    without a buffer."""
    if intermediate is None:
        return intermediate_rows
    expect_shape("intermediate", intermediate, (None, None) + state_shape, _state_what("R, steps", layout))
    if intermediate.shape[1] < T:
        raise ValueError(f"intermediate: expected [R, steps >= T = {T}, ...], got steps = {intermediate.shape[1]}")
    intermediate_rows = torch.arange(N) if intermediate_rows is None else intermediate_rows
    expect_index("intermediate_rows", intermediate_rows, (N,), "[B]")
    if N and int(intermediate_rows.max()) >= intermediate.shape[0]:
        raise ValueError(f"intermediate: expected R > every intermediate_rows entry, got R = {intermediate.shape[0]}")
    return intermediate_rows


def _shape4(name: str, x: torch.Tensor, what: str) -> tuple[int, ...]:
    if not isinstance(x, torch.Tensor) or x.dim() != 4:
        raise ValueError(f"{name}: expected shape {what}, got {list(x.shape) if isinstance(x, torch.Tensor) else x!r}")
    return tuple(x.shape)


def _state_what(lead: str, layout: str) -> str:
    """A state buffer's shape contract: '[P, HV, V, K]' for the pool in layout 'vk', for example."""
    return f"[{lead}, HV, V, K]" if layout == "vk" else f"[{lead}, HV, K, V]"


def _fmt(shape: tuple) -> str:
    return "[" + ", ".join("*" if s is None else str(s) for s in shape) + "]"
