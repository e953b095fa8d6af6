"""Case -> tensors, built on the device from the case's seed (fuzz.model.values: the same bits on every device).

Each input is drawn in the case's regimes (fuzz.model.regimes); each writable buffer is a Guarded one
(fuzz.model.guarded): the pool filled with the seed's filler and the named slots set to the case's values, the
output and intermediate buffers poisoned (fuzz.model.patterns), so the verdict can tell what the call wrote.
"""

from __future__ import annotations

import torch

from fuzz.model.case import TORCH_DTYPES, TORCH_INDEX_DTYPES, Case
from fuzz.model.guarded import GUARD_SLOTS, OFFSET_BITS, Guarded
from fuzz.model.patterns import fill_pattern
from fuzz.model.regimes import DECAY_REGIMES, MAGNITUDES
from fuzz.model.tensors import Tensors, named_slots
from fuzz.model.values import Values


def materialize(
    case: Case, device: str | torch.device, pool: Guarded | None = None, offset_bits: int = OFFSET_BITS
) -> Tensors:
    """The case's tensors. `pool` given: a pool the caller keeps across calls (fuzz.run.serving), used as it is;
    every other tensor is bit for bit what materialize(case, device) builds (the pool's values are the last draw).
    `offset_bits`: the offset width the target's kernels may wrap at (the guard below a buffer that passes it)."""
    vals = Values(case.seed, device)
    in_dtype, st_dtype = TORCH_DTYPES[case.input_dtype], TORCH_DTYPES[case.state_dtype]
    tokens = (sum(case.seqlens),) if case.op == "prefill" else (case.B, case.T)
    magnitudes = torch.tensor(MAGNITUDES, device=device)
    mag = lambda: magnitudes[vals.integers(len(MAGNITUDES), *tokens, 1, 1)]
    q = vals.normal(*tokens, case.H, case.K) * mag()
    k = vals.normal(*tokens, case.H, case.K) * mag()
    v = vals.normal(*tokens, case.HV, case.V) * mag()
    names = list(DECAY_REGIMES)
    picks = (
        vals.integers(len(names), case.HV).tolist() if case.decay == "mixed" else [names.index(case.decay)] * case.HV
    )
    params = [DECAY_REGIMES[names[i]] for i in picks]  # a regime per value head ("mixed") or one for all
    column = lambda i, j=None: torch.tensor([p[i] if j is None else p[i][j] for p in params], device=device)
    A_log = column(0, 0) + (column(0, 1) - column(0, 0)) * vals.uniform(0.0, 1.0, case.HV)
    dt_bias = vals.normal(case.HV) * 0.5
    a = column(1, 0) + column(1, 1) * vals.normal(*tokens, case.HV) - dt_bias
    b = column(2) * vals.normal(*tokens, case.HV)
    q, k, v, a, b = (x.to(in_dtype) for x in (q, k, v, a, b))
    # Precomputed gates for "log" targets, as an fp32 gating kernel would produce them (exp, log1p and sigmoid may
    # differ by an ulp between devices: the oracle reads these same tensors).
    x = a.float() + dt_bias
    g = -torch.exp(A_log) * torch.where(x > 20, x, torch.log1p(torch.exp(x)))
    beta = torch.sigmoid(b.float())

    idx = TORCH_INDEX_DTYPES[case.index_dtype]
    as_index = lambda xs: None if xs is None else torch.tensor(xs, dtype=idx, device=device)
    state_shape = (case.V, case.K) if case.layout == "vk" else (case.K, case.V)
    if pool is None:
        pool = Guarded.around(
            (case.pool, case.HV, *state_shape), st_dtype, device, GUARD_SLOTS, case.pool_gap, offset_bits
        )
        pool.fill(case.seed)
        named = named_slots(case)
        pool.keep(named, vals.normal(len(named), case.HV, *state_shape) * 0.5)
    inter = None
    if case.inter_rows:
        inter = Guarded.around(
            (case.inter_rows, case.inter_steps, case.HV, *state_shape),
            st_dtype,
            device,
            1,
            case.inter_spare_steps,
            offset_bits,
        )
        fill_pattern(inter.view, "poison")
    output = Guarded.around((*tokens, case.HV, case.V), in_dtype, device, 1)
    fill_pattern(output.view, "poison")
    accepted = token_slots = None
    if case.accepted is not None:
        accepted = torch.tensor(case.accepted, dtype=torch.int32, device=device)
        token_slots = guarded_index(case.token_slots, case.pool, case.T, idx, device)
    cu = None
    if case.op == "prefill":
        cu = torch.tensor([0, *torch.tensor(case.seqlens).cumsum(0).tolist()], dtype=idx, device=device)
    return Tensors(
        q=q,
        k=k,
        v=v,
        A_log=A_log,
        dt_bias=dt_bias,
        a=a,
        b=b,
        g=g,
        beta=beta,
        **{name: as_index(getattr(case, name)) for name in ("read_slots", "write_slots", "inter_index")},
        token_slots=as_index(case.token_slots) if token_slots is None else token_slots,
        cu_seqlens=cu,
        pool=pool,
        inter=inter,
        output=output,
        accepted=accepted,
    )


def guarded_index(rows: tuple[tuple[int, ...], ...], guard: int, T: int, dtype, device) -> torch.Tensor:
    """rows as a contiguous [B, T] index tensor viewed from the middle of a flat buffer with T entries on each side,
    each naming slot `guard` (the pool's first guard slot): the reach of an accepted count 0..2T (Case validation)
    read at row * T + count - 1."""
    flat = torch.tensor([s for row in rows for s in row], dtype=dtype, device=device)
    buffer = torch.full((flat.numel() + 2 * T,), guard, dtype=dtype, device=device)
    buffer[T : T + flat.numel()] = flat
    return buffer[T : T + flat.numel()].view(len(rows), T)
