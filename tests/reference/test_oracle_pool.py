"""Pool addressing: slot maps, split read/write slots, varlen prefill, and what the result says it wrote."""

from dataclasses import replace

import torch
from hypothesis import given
from hypothesis import strategies as st
from oracle_helpers import (
    PROPERTY,
    assert_close64,
    assert_untouched,
    generator,
    make_case,
    randn,
    random_gates,
    seeds,
    shapes,
    verify,
)

import reference
from reference import RawGates, prefill


@PROPERTY
@given(shape=shapes(), seed=seeds, extra=st.integers(1, 4))
def test_pool_path_equals_gather_run_scatter(shape, seed, extra):
    case = make_case(seed, shape, extra_slots=extra)
    res = verify(case)
    compact = reference.verify(case.q, case.k, case.v, case.gates, case.pool[case.slots], torch.arange(shape.B))
    assert torch.equal(res.output, compact.output)
    assert torch.equal(res.pool[case.slots], compact.pool)
    assert_untouched(case.pool, res.pool, case.slots)
    assert res.written_slots == set(case.slots.tolist())


@PROPERTY
@given(shape=shapes(max_B=3).filter(lambda s: s.B > 1), seed=seeds)
def test_split_write_slots_read_the_pool_as_passed(shape, seed):
    """write_slots = read_slots rolled by one: row n writes the slot row n+1 reads, and every read still sees
    the pool as passed in."""
    case = make_case(seed, shape, extra_slots=1)
    plain = verify(case)
    write = case.slots.roll(1)
    split = verify(case, write_slots=write)
    assert torch.equal(split.output, plain.output)
    assert torch.equal(split.pool[write], plain.pool[case.slots])
    assert_untouched(case.pool, split.pool, write)
    assert split.written_slots == set(write.tolist())


@st.composite
def varlen_batches(draw):
    """Sequence lengths with at least one zero-length sequence, plus shape and seed."""
    lengths = draw(st.lists(st.integers(0, 5), min_size=1, max_size=3))
    lengths.insert(draw(st.integers(0, len(lengths))), 0)
    return lengths, draw(shapes()), draw(seeds)


@PROPERTY
@given(batch=varlen_batches())
def test_varlen_prefill_equals_per_sequence_verify(batch):
    lengths, shape, seed = batch
    gen = generator(seed)
    N, N_tok, H, HV, K, V = len(lengths), sum(lengths), shape.H, shape.HV, shape.K, shape.V
    q, k, v = randn(gen, N_tok, H, K), randn(gen, N_tok, H, K), randn(gen, N_tok, HV, V)
    gates = random_gates(gen, N_tok, HV=HV)
    pool = randn(gen, N + 2, HV, V, K)
    slots = torch.randperm(N + 2, generator=gen)[:N]
    cu = torch.tensor([0] + lengths).cumsum(0)
    res = prefill(q, k, v, gates, cu, pool, slots)
    assert res.output.shape == (N_tok, HV, V)
    for n, (lo, hi) in enumerate(zip(cu.tolist(), cu[1:].tolist())):
        s = slots[n : n + 1]
        if hi == lo:  # an empty sequence neither reads nor writes its slot
            assert torch.equal(res.pool[s], pool[s])
            continue
        one = reference.verify(
            q[None, lo:hi],
            k[None, lo:hi],
            v[None, lo:hi],
            RawGates(gates.A_log, gates.a[None, lo:hi], gates.dt_bias, gates.b[None, lo:hi]),
            pool,
            s,
        )
        assert_close64(res.output[lo:hi], one.output[0], tol=1e-12)
        assert_close64(res.pool[s], one.pool[s], tol=1e-12)
    written = {int(slots[n]) for n in range(N) if lengths[n] > 0}
    assert res.written_slots == written
    assert_untouched(pool, res.pool, written)


@PROPERTY
@given(shape=shapes(), seed=seeds)
def test_single_sequence_prefill_equals_verify(shape, seed):
    case = make_case(seed, replace(shape, B=1), extra_slots=2)
    g = case.gates
    res = prefill(
        case.q[0],
        case.k[0],
        case.v[0],
        RawGates(g.A_log, g.a[0], g.dt_bias, g.b[0]),
        torch.tensor([0, shape.T], dtype=torch.int32),
        case.pool,
        case.slots.int(),
    )
    ref = verify(case)
    assert torch.equal(res.output, ref.output[0])
    assert torch.equal(res.pool, ref.pool)
