"""The oracle against formulations written here from the math alone: the chunked WY (UT-transform)
form, the unrolled product of transition matrices, and cases with a closed-form answer."""

import functools

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from oracle_helpers import (
    F64,
    PROPERTY,
    assert_close64,
    assert_untouched,
    expand_heads,
    generator,
    make_case,
    randn,
    seeds,
    shapes,
    spec_gates,
    unit,
    verify,
)

import reference
from reference import LogGates


def spec_inputs(case):
    """Per value head, in float64: q^ (scaled), k^, v, g, beta, all with heads expanded to HV."""
    G, K = case.shape.G, case.shape.K
    g, beta = spec_gates(case.gates)
    q = expand_heads(unit(case.q), G) * K**-0.5
    return q, expand_heads(unit(case.k), G), case.v, g, beta


def wy_chunk(S0, q, k, v, g, beta):
    """One chunk in closed form. S0 [V, K]; q, k [C, K]; v [C, V]; g, beta [C].
    u = (I + L)^-1 diag(beta) (v - Gamma S0 k), L strictly lower; returns (o [C, V], states [C, V, K])."""
    gam = torch.cumsum(g, 0)
    D = torch.tril(torch.exp(gam[:, None] - gam[None, :]))
    L = torch.tril(beta[:, None] * D * (k @ k.T), -1)
    rhs = beta[:, None] * (v - torch.exp(gam)[:, None] * (k @ S0.T))
    U = torch.linalg.solve_triangular(torch.eye(len(g), dtype=F64) + L, rhs, upper=False)
    o = torch.exp(gam)[:, None] * (q @ S0.T) + (D * (q @ k.T)) @ U
    states = torch.exp(gam)[:, None, None] * S0 + torch.einsum("tj,jv,jk->tvk", D, U, k)
    return o, states


def chunked_wy(S0, q, k, v, g, beta, chunk):
    outs, states = [], []
    for c in range(0, len(g), chunk):
        o, s = wy_chunk(S0, q[c : c + chunk], k[c : c + chunk], v[c : c + chunk], g[c : c + chunk], beta[c : c + chunk])
        outs.append(o)
        states.append(s)
        S0 = s[-1]
    return torch.cat(outs), torch.cat(states)


def transition_products(S0, q, k, v, g, beta, chunk=None):
    """S_t = S0 A_1..A_t + sum_j beta_j v_j k_j^T A_{j+1}..A_t with A_s = exp(g_s)(I - beta_s k_s k_s^T)."""
    T, K = k.shape
    A = [torch.exp(g[s]) * (torch.eye(K, dtype=F64) - beta[s] * torch.outer(k[s], k[s])) for s in range(T)]

    def prod(lo, hi):  # A_lo @ ... @ A_{hi-1}, the identity when empty
        return functools.reduce(torch.matmul, A[lo:hi], torch.eye(K, dtype=F64))

    states = torch.stack(
        [
            S0 @ prod(0, t + 1) + sum(beta[j] * torch.outer(v[j], k[j]) @ prod(j + 1, t + 1) for j in range(t + 1))
            for t in range(T)
        ]
    )
    return torch.einsum("tvk,tk->tv", states, q), states


def check_against(formulation, case, **kw):
    q, k, v, g, beta = spec_inputs(case)
    B, T = case.shape.B, case.shape.T
    inter = torch.zeros(B, T, *case.pool.shape[1:], dtype=F64)
    res = verify(case, intermediate=inter)
    for n in range(B):
        for h in range(case.shape.HV):
            o, states = formulation(
                case.pool[case.slots[n], h], q[n, :, h], k[n, :, h], v[n, :, h], g[n, :, h], beta[n, :, h], **kw
            )
            assert_close64(res.output[n, :, h], o)
            assert_close64(res.intermediate[n, :, h], states)
            assert_close64(res.pool[case.slots[n], h], states[-1])
    assert_untouched(case.pool, res.pool, case.slots)


@PROPERTY
@given(shape=shapes(), seed=seeds, chunk=st.integers(1, 6))
def test_chunked_wy_form_matches_oracle(shape, seed, chunk):
    check_against(chunked_wy, make_case(seed, shape, extra_slots=2), chunk=chunk)


@PROPERTY
@given(shape=shapes(), seed=seeds)
def test_unrolled_transition_product_matches_oracle(shape, seed):
    check_against(transition_products, make_case(seed, shape, extra_slots=1))


@PROPERTY
@given(shape=shapes(), seed=seeds)
def test_beta_zero_only_decays_the_state(shape, seed):
    case = make_case(seed, shape, extra_slots=1)
    g, _ = spec_gates(case.gates)
    res = reference.verify(case.q, case.k, case.v, LogGates(g=g, beta=torch.zeros_like(g)), case.pool, case.slots)
    decay = torch.exp(torch.cumsum(g, dim=1))  # [B, T, HV]
    S0 = case.pool[case.slots]  # [B, HV, V, K]
    q, *_ = spec_inputs(case)
    expected_o = decay[..., None] * torch.einsum("nhvk,nthk->nthv", S0, q)
    assert_close64(res.output, expected_o)
    assert_close64(res.pool[case.slots], decay[:, -1, :, None, None] * S0)
    assert_untouched(case.pool, res.pool, case.slots)


@pytest.mark.parametrize("start", ["zero_state", "random_state"])
@PROPERTY
@given(shape=shapes(), seed=seeds)
def test_orthonormal_keys_with_g0_beta1_store_values_exactly(start, shape, seed):
    """With g = 0, beta = 1 and orthonormal keys (l2norm off, so k^ = k exactly) writing key i stores v_i:
    S k_i = v_i for every key written, S w = S0 w for w orthogonal to all keys, and q = k_t reads v_t."""
    gen = generator(seed)
    B, H, HV, K, V = shape.B, shape.H, shape.HV, shape.K, shape.V
    T = min(shape.T, K)
    basis = torch.linalg.qr(randn(gen, B, H, K, K))[0]  # orthonormal columns per (request, qk head)
    k = basis[..., :T].permute(0, 3, 1, 2)  # [B, T, H, K]
    v = randn(gen, B, T, HV, V)
    pool = randn(gen, B + 1, HV, V, K) if start == "random_state" else torch.zeros(B + 1, HV, V, K, dtype=F64)
    slots = torch.randperm(B + 1, generator=gen)[:B]
    gates = LogGates(g=torch.zeros(B, T, HV, dtype=F64), beta=torch.ones(B, T, HV, dtype=F64))
    res = reference.verify(k, k, v, gates, pool, slots, use_l2norm=False, scale=1.0)
    S = res.pool[slots]  # [B, HV, V, K]
    keys = expand_heads(k, shape.G)  # [B, T, HV, K]
    assert_close64(torch.einsum("nhvk,nthk->nthv", S, keys), v)
    assert_close64(res.output, v)
    rest = expand_heads(basis[..., T:].transpose(-1, -2), shape.G, dim=1)  # [B, HV, K - T, K]
    assert_close64(torch.einsum("nhvk,nhwk->nhwv", S, rest), torch.einsum("nhvk,nhwk->nhwv", pool[slots], rest))
