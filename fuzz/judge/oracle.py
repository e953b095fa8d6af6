"""The expected values of a case: the float64 oracle and the target's precision model, under the target's contract
(fuzz.targets.semantics), computed before the target runs, on the case's device.

Both come from reference.batched (one loop over time, requests and heads at once), which
tests/reference/test_oracle_batched.py holds equal to reference.ops' per-request definition on every contract. Results
are sparse: the output, the written pool slots with their states and the written intermediate rows; everything else must
be as the caller left it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import reference
from fuzz.model.case import Case
from fuzz.model.tensors import Tensors
from fuzz.targets.semantics import Semantics
from reference import LogGates, Precision, RawGates, SparseResult


@dataclass(frozen=True)
class Expected:
    exact: SparseResult  # float64
    model: SparseResult  # the target's precision model


def expected(case: Case, t: Tensors, sem: Semantics) -> Expected:
    return Expected(exact=oracle(case, t, sem, reference.EXACT), model=oracle(case, t, sem, sem.precision(case)))


def _rows(case: Case, t: Tensors) -> torch.Tensor | None:
    """The intermediate row of each request: the case's explicit rows, else (None) the batch row; a padded batch past
    the scratch (the pad-past-scratch edge) gives the requests past it none (-1): they are padding, discarded."""
    if t.inter_index is not None or case.inter_rows >= case.B:
        return t.inter_index
    rows = [n if n < case.inter_rows else -1 for n in range(case.B)]
    return torch.tensor(rows, dtype=t.read_slots.dtype, device=t.read_slots.device)


def oracle(case: Case, t: Tensors, sem: Semantics, precision: Precision) -> SparseResult:
    """The reference call for this case under the target's contract."""
    gates = RawGates(t.A_log, t.a, t.dt_bias, t.b) if sem.gates == "raw" else LogGates(t.g, t.beta)
    common = dict(
        write_slots=t.write_slots,
        scale=case.scale,
        use_l2norm=case.l2norm,
        layout=case.layout,
        pad=sem.pad,
        precision=precision,
    )
    if case.op == "prefill":
        return reference.batched_prefill(t.q, t.k, t.v, gates, t.cu_seqlens, t.pool.view, t.read_slots, **common)
    return reference.batched_verify(
        t.q,
        t.k,
        t.v,
        gates,
        t.pool.view,
        t.read_slots,
        disable_state_update=not case.update,
        intermediate=None if t.inter is None else t.inter.view,
        intermediate_rows=_rows(case, t),
        token_slots=t.token_slots,
        output=t.output.view,
        **common,
    )
