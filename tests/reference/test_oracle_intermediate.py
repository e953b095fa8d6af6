"""MTP scratch states: intermediate rows, disable_state_update, per-token scatter, and commit after acceptance."""

import torch
from hypothesis import given
from hypothesis import strategies as st
from oracle_helpers import (
    F64,
    PROPERTY,
    assert_close64,
    assert_untouched,
    decode_by_decode,
    generator,
    make_case,
    randn,
    seeds,
    shapes,
    tokens,
    verify,
)

import reference
from reference import commit


def marked(*size) -> torch.Tensor:
    """A buffer whose every entry is a marker value, so any write shows."""
    return torch.full(size, 7.0, dtype=F64)


def states_by_decode(case) -> torch.Tensor:
    """[B, T, HV, V, K]: the state of each request after each token, by decode-by-decode."""
    _, _, pools = decode_by_decode(case)
    return torch.stack([p[case.slots] for p in pools], dim=1)


@PROPERTY
@given(shape=shapes(), seed=seeds, spare_steps=st.integers(0, 2))
def test_intermediate_rows_default_to_the_batch_row(shape, seed, spare_steps):
    case = make_case(seed, shape, extra_slots=1)
    B, T, HV, V, K = shape.B, shape.T, shape.HV, shape.V, shape.K
    res = verify(case, intermediate=marked(B, T + spare_steps, HV, V, K))
    assert_close64(res.intermediate[:, :T], states_by_decode(case), tol=1e-12)
    assert bool((res.intermediate[:, T:] == 7.0).all())  # steps past T untouched
    assert res.written_rows == set(range(B))


@PROPERTY
@given(shape=shapes(), seed=seeds)
def test_explicit_intermediate_rows_and_minus_one_skipped(shape, seed):
    case = make_case(seed, shape, extra_slots=1)
    B, T, HV, V, K = shape.B, shape.T, shape.HV, shape.V, shape.K
    gen = generator(seed)
    rows = torch.randperm(B + 2, generator=gen)[:B]
    rows[int(torch.randint(B, (1,), generator=gen))] = -1
    res = verify(case, intermediate=marked(B + 2, T, HV, V, K), intermediate_rows=rows)
    expected = states_by_decode(case)
    for n, r in enumerate(rows.tolist()):
        if r >= 0:
            assert_close64(res.intermediate[r], expected[n], tol=1e-12)
    kept = [r for r in rows.tolist() if r >= 0]
    assert res.written_rows == set(kept)
    assert_untouched(marked(B + 2, T, HV, V, K), res.intermediate, kept)
    assert torch.equal(res.output, verify(case).output)  # the scratch buffer does not change the outputs


@PROPERTY
@given(shape=shapes(), seed=seeds)
def test_disable_state_update_leaves_the_pool_bit_identical(shape, seed):
    case = make_case(seed, shape, extra_slots=2)
    frozen = verify(case, disable_state_update=True, intermediate=marked(shape.B, shape.T, shape.HV, shape.V, shape.K))
    assert torch.equal(frozen.pool, case.pool)
    assert frozen.written_slots == set()
    updated = verify(case)
    assert torch.equal(frozen.output, updated.output)
    assert torch.equal(frozen.intermediate[:, -1], updated.pool[case.slots])


@PROPERTY
@given(shape=shapes(), seed=seeds)
def test_token_slots_scatter_each_step_and_skip_the_final_write(shape, seed):
    case = make_case(seed, shape, extra_slots=shape.B * shape.T + 1)
    B, T, P = shape.B, shape.T, case.pool.shape[0]
    gen = generator(seed + 1)
    fresh = [s for s in torch.randperm(P, generator=gen).tolist() if s not in case.slots.tolist()]
    token_slots = torch.tensor(fresh[: B * T]).reshape(B, T)
    token_slots[0, 0] = -1  # padded entry: no write
    res = verify(case, token_slots=token_slots)
    expected = states_by_decode(case)
    for n in range(B):
        for t in range(T):
            if token_slots[n, t] >= 0:
                assert_close64(res.pool[token_slots[n, t]], expected[n, t], tol=1e-12)
    written = [s for s in token_slots.flatten().tolist() if s >= 0]
    assert res.written_slots == set(written)
    assert_untouched(case.pool, res.pool, written)  # the read slots included: no final write-back


@PROPERTY
@given(shape=shapes(), seed=seeds, data=st.data())
def test_commit_equals_running_only_the_accepted_tokens(shape, seed, data):
    case = make_case(seed, shape, extra_slots=2)
    B, T = shape.B, shape.T
    accepted = torch.tensor(data.draw(st.lists(st.integers(1, T), min_size=B, max_size=B)))
    scratch = verify(
        case, disable_state_update=True, intermediate=torch.zeros(B, T, shape.HV, shape.V, shape.K, dtype=F64)
    )
    committed = commit(case.pool, scratch.intermediate, case.slots, accepted)
    expected = case.pool
    for n in range(B):
        rows = slice(n, n + 1)
        expected = reference.verify(*tokens(case, slice(0, int(accepted[n])), rows), expected, case.slots[rows]).pool
    assert_close64(committed, expected, tol=1e-12)
    assert_untouched(case.pool, committed, case.slots)


def test_commit_skips_padded_slots_missing_rows_and_zero_accepted():
    gen = generator(0)
    pool, inter = randn(gen, 5, 2, 3, 4), randn(gen, 4, 3, 2, 3, 4)
    slots, accepted = torch.tensor([1, -1, 2, 3]), torch.tensor([2, 3, 0, 3])
    rows = torch.tensor([3, 0, 1, -1])
    new = commit(pool, inter, slots, accepted, rows=rows)
    assert torch.equal(new[1], inter[3, 1])
    assert_untouched(pool, new, [1])
    default_rows = commit(pool, inter, slots, accepted)  # rows default to the batch row
    assert torch.equal(default_rows[1], inter[0, 1]) and torch.equal(default_rows[3], inter[3, 2])
    assert_untouched(pool, default_rows, [1, 3])
