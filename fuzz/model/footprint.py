"""The device memory one check of a case holds at its peak (`peak_bytes`): what fuzz.run.memory takes memory slots
by, and what the large tests' plan (fuzz.generate.strategies.large_buckets) fits to a budget's memory."""

from __future__ import annotations

import math

from fuzz.model.case import TORCH_DTYPES, Case
from fuzz.model.guarded import CHUNK, GUARD_SLOTS, OFFSET_BITS, lead_rows
from fuzz.model.tensors import named_slots

F64 = 8  # the oracle and the verdict compute in float64
# The verdict's copies of the largest buffer it compares, alive at once: in float64 got, exact, model, its one working
# block and the model's magnitude beside it, and four boolean masks (judged, not judged and two transients), of one
# block of CHUNK elements (fuzz.judge.errors); in the
# buffer's dtype got, exact and model gathered for the judged slots or rows, and the bits of the poison check, whole.
COMPARE_F64_COPIES = 5
COMPARE_MASKS = 4
COMPARE_OWN_COPIES = 4
# Bytes per element of one filler block (materialize fills the pool, the verdict regenerates it to find changed
# slots, CHUNK elements at a time): the int64 element index and the hash's int64 temporaries, the float32 value,
# the block in the pool's dtype, the pool's bits and the comparison.
FILLER_BYTES_PER_ELEMENT = 48


def peak_bytes(case: Case, offset_bits: int = OFFSET_BITS) -> int:
    """An estimate of the device memory one check of `case` holds at its peak (fuzz.run.harness): the case's guarded
    buffers throughout, the oracle's two sparse results (float64 and the precision model) from the oracle on, and on
    top of them the largest transient of one stage: the oracle's working set, the warm-up call's own buffers, the
    verdict's float64 comparison, or the filler blocks that fill and check the pool. The library's own workspace is
    not counted (the GPU kernels work in place); tests/suite/test_scaleout.py holds it to a check measured on the
    CPU."""
    warm = case.replace(pool=case.pool + case.warm_pool, warm_pool=0)
    transient = max(
        _oracle_working(case),
        _comparison(case),
        _filler_blocks(case),
        _buffers(warm, offset_bits) if case.warm_pool else 0,
    )
    return _buffers(case, offset_bits) + 2 * _oracle_result(case) + transient


def _sizes(case: Case) -> tuple[int, int, int]:
    """(state elements per slot, state dtype bytes, input dtype bytes)."""
    return (case.HV * case.K * case.V, TORCH_DTYPES[case.state_dtype].itemsize, TORCH_DTYPES[case.input_dtype].itemsize)


def _buffers(case: Case, offset_bits: int = OFFSET_BITS) -> int:
    """fuzz.generate.materialize: the pool with its guard slots and gaps, the intermediate buffer with its guard rows
    and spare steps (each with the guard below that a wrapped offset needs: lead_rows), the output with its guard
    rows, the inputs and gates, and the kept copy of the named slots."""
    state, st, inp = _sizes(case)
    tokens = sum(case.tokens)
    slot = (case.pool, case.HV + case.pool_gap, case.K * case.V)
    pool = (case.pool + lead_rows(slot, GUARD_SLOTS, offset_bits) + GUARD_SLOTS) * math.prod(slot[1:]) * st
    steps = (case.inter_rows, (case.inter_steps + case.inter_spare_steps) * state)
    inter = (case.inter_rows + lead_rows(steps, 1, offset_bits) + 1) * steps[1] * st if case.inter_rows else 0
    output = (tokens + 2) * case.HV * case.V * inp
    inputs = tokens * ((2 * case.H * case.K + case.HV * case.V + 2 * case.HV) * inp + 2 * case.HV * 4)
    return pool + inter + output + inputs + len(named_slots(case)) * state * st


def _steps(case: Case) -> int:
    return max(case.tokens, default=0)


def _oracle_result(case: Case) -> int:
    """One reference.batched result: the float64 output, the written states and intermediate rows."""
    state, st, _ = _sizes(case)
    rows = case.B * _steps(case) * state * st if case.inter_rows else 0
    return sum(case.tokens) * case.HV * case.V * F64 + case.B * state * st + rows


def _oracle_working(case: Case) -> int:
    """reference.batched._serve: the float64 states (S, the gathered slots converted, u k^T), the expanded float64
    inputs, the per-step banks of intermediate or per-token states and the final states in the pool's dtype."""
    state, st, _ = _sizes(case)
    per_step = case.B * _steps(case) * state * st * (bool(case.inter_rows) + (case.token_slots is not None))
    inputs = sum(case.tokens) * case.HV * (2 * case.K + 2 * case.V) * F64
    return 3 * case.B * state * F64 + inputs + per_step + case.B * state * st


def _comparison(case: Case) -> int:
    """fuzz.judge.verdict.compare on the largest buffer it judges: the output, the written states or the written
    intermediate rows (its float64 work a block of CHUNK elements at a time)."""
    state, st, inp = _sizes(case)
    rows = case.B * _steps(case) * state if case.inter_rows else 0
    judged = (  # (elements, elements of a leading row, dtype bytes)
        (sum(case.tokens) * case.HV * case.V, case.HV * case.V, inp),
        (case.B * state, state, st),
        (rows, _steps(case) * state, st),
    )
    per_block = COMPARE_F64_COPIES * F64 + COMPARE_MASKS
    return max(
        min(n, max(row, CHUNK // max(row, 1) * row)) * per_block + n * COMPARE_OWN_COPIES * size
        for n, row, size in judged
    )


def _filler_blocks(case: Case) -> int:
    state, _, _ = _sizes(case)
    return FILLER_BYTES_PER_ELEMENT * min(CHUNK, case.pool * state)
