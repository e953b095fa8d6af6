"""Gates, normalisation and the precision model's rounding points."""

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from oracle_helpers import (
    F64,
    PROPERTY,
    Shape,
    assert_close64,
    expand_heads,
    make_case,
    seeds,
    shapes,
    spec_gates,
    unit,
    verify,
    with_log_gates,
)

import reference
from reference import EXACT, LogGates, Precision, RawGates, gate_values, l2normalize, softplus

BF16 = torch.bfloat16


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
def test_softplus_returns_x_exactly_above_20(dtype):
    x = torch.tensor(
        [
            torch.nextafter(torch.tensor(20.0, dtype=dtype), torch.tensor(30.0, dtype=dtype)).item(),
            20.5,
            21.0,
            50.0,
            1e3,
            1e30,
        ],
        dtype=dtype,
    )
    assert torch.equal(softplus(x), x)
    at_20 = softplus(torch.tensor([20.0], dtype=F64))  # the threshold itself takes the log branch
    assert at_20.item() != 20.0 and at_20.item() == torch.log1p(torch.exp(torch.tensor(20.0, dtype=F64))).item()


def test_softplus_matches_torch_softplus_threshold_20():
    x = torch.cat([torch.linspace(-60, 60, 2401, dtype=F64), torch.tensor([19.999999, 20.0, 20.000001], dtype=F64)])
    torch.testing.assert_close(softplus(x), F.softplus(x, beta=1.0, threshold=20.0), rtol=1e-15, atol=0)


def test_gate_path_is_linear_above_the_threshold():
    a = torch.tensor([[19.0, 25.0, 100.0]], dtype=F64)
    raw = RawGates(
        A_log=torch.tensor([0.3, -0.2, 0.0], dtype=F64),
        a=a,
        dt_bias=torch.tensor([0.5, -4.0, 0.0], dtype=F64),
        b=torch.zeros(1, 3, dtype=F64),
    )
    g, beta = gate_values(raw)
    x = a + raw.dt_bias
    assert torch.equal(g[0, 1:], -torch.exp(raw.A_log[1:]) * x[0, 1:])  # 21 and 100: exactly -exp(A_log) x
    assert g[0, 0] != -torch.exp(raw.A_log[0]) * x[0, 0]  # 19.5: log(1 + e^x), not x
    assert torch.equal(beta, torch.full_like(beta, 0.5))


@PROPERTY
@given(shape=shapes(), seed=seeds)
def test_raw_gate_values_follow_the_formula(shape, seed):
    gates = make_case(seed, shape).gates
    g, beta = gate_values(gates)
    eg, ebeta = spec_gates(gates)
    assert_close64(g, eg, tol=1e-14)
    assert_close64(beta, ebeta, tol=1e-14)
    assert bool((g <= 0).all()) and bool(((beta > 0) & (beta < 1)).all())


@PROPERTY
@given(shape=shapes(), seed=seeds)
def test_log_gates_equal_raw_gates_when_precomputed(shape, seed):
    case = make_case(seed, shape, extra_slots=1)
    raw = verify(case)
    pre = verify(replace(case, gates=LogGates(*gate_values(case.gates))))
    assert torch.equal(pre.output, raw.output) and torch.equal(pre.pool, raw.pool)
    spec = verify(replace(case, gates=LogGates(*spec_gates(case.gates))))
    assert_close64(spec.output, raw.output, tol=1e-12)


@PROPERTY
@given(shape=shapes(), seed=seeds)
def test_precision_beta_bf16_rounds_beta_after_the_sigmoid(shape, seed):
    case = make_case(seed, shape)
    g, beta = gate_values(case.gates, Precision(beta=BF16))
    exact_g, exact_beta = gate_values(case.gates)
    assert torch.equal(g, exact_g)
    assert torch.equal(beta, exact_beta.to(BF16).to(F64))
    res = verify(case, precision=Precision(beta=BF16))
    assert torch.equal(res.output, verify(replace(case, gates=LogGates(g, beta))).output)
    logs = LogGates(exact_g, exact_beta)  # precomputed gates are rounded too
    assert torch.equal(gate_values(logs, Precision(beta=BF16))[1], beta)


@PROPERTY
@given(shape=shapes(), seed=seeds)
def test_precision_bf16_truncating_beta_rounds_toward_zero(shape, seed):
    gates = make_case(seed, shape).gates
    _, beta = gate_values(gates)
    _, nearest = gate_values(gates, Precision(beta=BF16))
    _, trunc = gate_values(gates, Precision(beta=BF16, bf16_truncates=True))
    beta32 = beta.float().double()
    assert torch.equal(trunc.to(BF16).to(F64), trunc)  # a bf16 value
    assert bool((trunc <= beta32).all()) and bool((beta32 - trunc < 2.0**-7 * beta32).all())
    assert torch.equal(torch.where(nearest <= beta32, nearest, trunc), trunc)  # round-down cases agree


def test_precision_beta_bf16_changes_the_result():
    case = make_case(3, Shape(B=2, T=3, H=1, G=2, K=4, V=6))
    assert not torch.equal(verify(case, precision=Precision(beta=BF16)).output, verify(case).output)


@PROPERTY
@given(shape=shapes(), seed=seeds)
def test_precision_inputs_round_q_k_v_a_b_but_not_parameters_or_state(shape, seed):
    case = make_case(seed, shape, extra_slots=1)
    r = lambda x: x.to(BF16).to(F64)
    g = case.gates
    rounded = replace(case, q=r(case.q), k=r(case.k), v=r(case.v), gates=RawGates(g.A_log, r(g.a), g.dt_bias, r(g.b)))
    res = verify(case, precision=Precision(inputs=BF16))
    ref = verify(rounded)
    assert torch.equal(res.output, ref.output) and torch.equal(res.pool, ref.pool)


@PROPERTY
@given(shape=shapes(), seed=seeds)
def test_precision_output_rounds_the_output_only(shape, seed):
    case = make_case(seed, shape)
    res, exact = verify(case, precision=Precision(output=BF16)), verify(case)
    assert res.output.dtype == BF16 and exact.output.dtype == F64
    assert torch.equal(res.output, exact.output.to(BF16))
    assert torch.equal(res.pool, exact.pool)


def test_l2normalize_has_eps_inside_the_root_and_is_safe_on_zero():
    x = torch.tensor([[3.0, 4.0], [1e-4, 0.0], [0.0, 0.0]], dtype=F64)
    assert_close64(l2normalize(x), x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6), tol=1e-15)
    assert l2normalize(x)[1, 0] < 0.1  # eps dominates a tiny vector (F.normalize would give 1)
    assert torch.equal(l2normalize(x)[2], torch.zeros(2, dtype=F64))


@PROPERTY
@given(shape=shapes(), seed=seeds)
def test_use_l2norm_false_equals_prenormalised_inputs(shape, seed):
    case = make_case(seed, shape)
    res = reference.verify(unit(case.q), unit(case.k), case.v, case.gates, case.pool, case.slots, use_l2norm=False)
    assert_close64(res.output, verify(case).output, tol=1e-12)


def test_zero_query_and_key_give_decay_only_and_no_nan():
    case = make_case(5, Shape(B=2, T=3, H=2, G=2, K=4, V=3))
    res = verify(replace(case, q=torch.zeros_like(case.q), k=torch.zeros_like(case.k)))
    g, _ = gate_values(case.gates, EXACT)
    assert torch.equal(res.output, torch.zeros_like(res.output))
    assert_close64(res.pool, torch.exp(g.sum(1))[..., None, None] * case.pool)


@PROPERTY
@given(shape=shapes(max_T=1), seed=seeds)
def test_precision_products_round_the_mma_operands_not_the_stored_state(shape, seed):
    """One token written from the spec with bf16 operands in S k^, u and S q^ (a tensor-core kernel's rounding)."""
    case = with_log_gates(make_case(seed, shape))
    r = lambda x: x.to(BF16).to(F64)
    G = shape.G
    g, beta = case.gates.g[:, 0], case.gates.beta[:, 0]  # [B, HV]
    q = expand_heads(unit(case.q[:, 0]), G) * shape.K**-0.5
    k = expand_heads(unit(case.k[:, 0]), G)  # [B, HV, K]
    S = torch.exp(g)[..., None, None] * case.pool[case.slots]
    u = r(beta[..., None] * (case.v[:, 0] - r(torch.einsum("bhvk,bhk->bhv", r(S), k))))
    S = S + u[..., None] * k[..., None, :]
    o = torch.einsum("bhvk,bhk->bhv", r(S), q)
    res = verify(case, precision=Precision(products=BF16))
    assert_close64(res.output[:, 0], o, tol=1e-12)
    assert_close64(res.pool[case.slots], S, tol=1e-12)
    assert not torch.equal(res.pool, res.pool.to(BF16).to(F64))  # the state itself stays in the compute dtype
    exact = verify(case, precision=Precision(products=F64))
    assert torch.equal(exact.output, verify(case).output) and torch.equal(exact.pool, verify(case).pool)
