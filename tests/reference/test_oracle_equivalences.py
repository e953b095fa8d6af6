"""Different call shapes of the same computation agree: verify vs decode-by-decode, GVA vs repeated heads,
"vk" vs "kv" layouts, and the scale argument."""

import pytest
import torch
from hypothesis import given
from oracle_helpers import (
    F64,
    PROPERTY,
    Shape,
    assert_close64,
    decode_by_decode,
    expand_heads,
    generator,
    make_case,
    randn,
    seeds,
    shapes,
    verify,
    with_log_gates,
)

import reference
from reference import EXACT, Precision

F32_EACH_STEP = Precision(compute=torch.float32, state_each_step=True)


@PROPERTY
@given(shape=shapes(), seed=seeds)
def test_verify_equals_sequential_decode_exact(shape, seed):
    case = make_case(seed, shape, extra_slots=2)
    res = verify(case)
    out, pool, _ = decode_by_decode(case)
    assert_close64(res.output, out, tol=1e-12)
    assert_close64(res.pool, pool, tol=1e-12)


@pytest.mark.parametrize("pool_dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@PROPERTY
@given(shape=shapes(min_T=2), seed=seeds)
def test_verify_equals_decode_by_decode_when_state_rounded_each_step(pool_dtype, shape, seed):
    case = with_log_gates(make_case(seed, shape, extra_slots=1, pool_dtype=pool_dtype))
    res = verify(case, precision=F32_EACH_STEP)
    out, pool, _ = decode_by_decode(case, precision=F32_EACH_STEP)
    assert res.pool.dtype == pool_dtype
    assert torch.equal(res.output, out)
    assert torch.equal(res.pool, pool)


@pytest.mark.parametrize("seed", range(4), ids=lambda s: f"seed{s}")
def test_bf16_pool_verify_keeps_fp32_chain_and_differs_from_decode_by_decode(seed):
    """Without state_each_step the T-token call keeps the state in fp32, so it is not decode-by-decode."""
    case = with_log_gates(
        make_case(seed, Shape(B=2, T=5, H=2, G=2, K=8, V=6), extra_slots=1, pool_dtype=torch.bfloat16)
    )
    chained = Precision(compute=torch.float32, state_each_step=False)
    res = verify(case, precision=chained)
    out, pool, _ = decode_by_decode(case, precision=chained)
    assert torch.equal(res.output[:, 0], out[:, 0])  # the first token sees the same state either way
    assert not torch.equal(res.output, out)
    assert not torch.equal(res.pool, pool)
    # ...while the fp32 chain is what an exact run rounded only once at the end gives.
    exact = verify(case)
    assert (res.pool.double() - exact.pool.double()).abs().max() <= 2**-7 * exact.pool.double().abs().max()


@PROPERTY
@given(shape=shapes(), seed=seeds)
def test_gva_equals_explicitly_repeated_qk_heads(shape, seed):
    case = make_case(seed, shape, extra_slots=1)
    res = verify(case)
    G = shape.G
    repeated = reference.verify(
        expand_heads(case.q, G), expand_heads(case.k, G), case.v, case.gates, case.pool, case.slots
    )
    assert_close64(res.output, repeated.output, tol=1e-12)
    assert_close64(res.pool, repeated.pool, tol=1e-12)


@PROPERTY
@given(shape=shapes(), seed=seeds)
def test_gva_value_head_reads_qk_head_hv_div_group(shape, seed):
    """Perturbing qk head i changes exactly value heads i*G .. i*G+G-1."""
    case = make_case(seed, shape, extra_slots=0)
    i = shape.H - 1
    bumped = case.k.clone()
    bumped[:, :, i] += 1.0
    a = verify(case)
    b = reference.verify(case.q, bumped, case.v, case.gates, case.pool, case.slots)
    changed = [(a.output[:, :, h] - b.output[:, :, h]).abs().max() > 1e-9 for h in range(shape.HV)]
    assert changed == [h // shape.G == i for h in range(shape.HV)]


@PROPERTY
@given(shape=shapes(), seed=seeds)
def test_kv_layout_is_the_transpose_of_vk(shape, seed):
    case = make_case(seed, shape, extra_slots=2)
    gen = generator(seed + 1)
    inter = randn(gen, shape.B + 1, shape.T + 1, shape.HV, shape.V, shape.K)
    rows = torch.randperm(shape.B + 1, generator=gen)[: shape.B]
    vk = verify(case, intermediate=inter, intermediate_rows=rows)
    t = lambda x: x.transpose(-1, -2).contiguous()
    kv = reference.verify(
        case.q,
        case.k,
        case.v,
        case.gates,
        t(case.pool),
        case.slots,
        layout="kv",
        intermediate=t(inter),
        intermediate_rows=rows,
    )
    assert torch.equal(kv.output, vk.output)
    assert torch.equal(kv.pool, t(vk.pool))
    assert torch.equal(kv.intermediate, t(vk.intermediate))


@PROPERTY
@given(shape=shapes(), seed=seeds)
def test_default_scale_is_rsqrt_k_and_output_is_linear_in_scale(shape, seed):
    case = make_case(seed, shape)
    default = verify(case)
    assert torch.equal(verify(case, scale=shape.K**-0.5).output, default.output)
    doubled = verify(case, scale=2 * shape.K**-0.5)
    assert_close64(doubled.output, 2 * default.output)
    assert torch.equal(doubled.pool, default.pool)  # scale touches q only


@PROPERTY
@given(shape=shapes(), seed=seeds)
def test_inputs_are_never_modified(shape, seed):
    case = make_case(seed, shape, extra_slots=1)
    snapshot = [x.clone() for x in (case.q, case.k, case.v, case.gates.a, case.gates.b, case.pool, case.slots)]
    inter = torch.zeros(shape.B, shape.T, shape.HV, shape.V, shape.K, dtype=F64)
    out = torch.full((shape.B, shape.T, shape.HV, shape.V), 3.0, dtype=F64)
    res = verify(case, intermediate=inter, output=out)
    after = (case.q, case.k, case.v, case.gates.a, case.gates.b, case.pool, case.slots)
    assert all(torch.equal(x, y) for x, y in zip(snapshot, after))
    assert not inter.any() and bool((out == 3.0).all())
    assert res.pool is not case.pool and res.intermediate is not inter


def test_precision_default_is_exact_float64():
    case = make_case(0, Shape(B=1, T=2, H=1, G=2, K=3, V=5))
    assert EXACT == Precision() and EXACT.compute == F64
    assert verify(case).output.dtype == F64
