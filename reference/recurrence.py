"""The gated delta rule, one token at a time, written as the equations.

Per value head (S is V x K, qk head of value head hv is hv // (HV / H)):

    g     = -exp(A_log) * softplus(a + dt_bias)        softplus(x) = x if x > 20 else log(1 + e^x)
    beta  = sigmoid(b)
    k^    = k * rsqrt(sum k^2 + 1e-6)
    q^    = q * rsqrt(sum q^2 + 1e-6) * scale          scale defaults to K^-0.5
    S     = exp(g) * S
    u     = beta * (v - S k^)
    S     = S + u k^T
    o     = S q^                                       (the output reads the updated state)
"""

from __future__ import annotations

import torch

from reference.checks import expect_shape, head_groups
from reference.contracts import EXACT, Precision
from reference.gates import Gates, LogGates

SOFTPLUS_THRESHOLD = 20.0
L2NORM_EPS = 1e-6


def softplus(x: torch.Tensor) -> torch.Tensor:
    return torch.where(x > SOFTPLUS_THRESHOLD, x, torch.log1p(torch.exp(x)))


def gate_values(gates: Gates, precision: Precision = EXACT) -> tuple[torch.Tensor, torch.Tensor]:
    """(g, beta) in the compute dtype. a and b are inputs (rounded per `precision.inputs`);
    A_log and dt_bias are parameters, read as stored. beta may be rounded (`precision.beta`)."""
    c = precision.compute
    if isinstance(gates, LogGates):
        g, beta = gates.g.to(c), gates.beta.to(c)
    else:
        x = precision.load(gates.a) + gates.dt_bias.to(c)
        g = -torch.exp(gates.A_log.to(c)) * softplus(x)
        beta = torch.sigmoid(precision.load(gates.b))
    return g, precision.round_beta(beta)


def l2normalize(x: torch.Tensor) -> torch.Tensor:
    """x * rsqrt(sum x^2 + 1e-6) over the last dim (eps inside the root, unlike F.normalize)."""
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + L2NORM_EPS)


def run_sequence(
    S: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    *,
    scale: float,
    use_l2norm: bool = True,
    precision: Precision = EXACT,
    store_dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One request's tokens through the recurrence.

    S: [HV, V, K] initial state.  q, k: [T, H, K].  v: [T, HV, V].  g, beta: [T, HV].
    All already in the compute dtype. `store_dtype` is the pool dtype, used when
    `precision.state_each_step` rounds the running state after every token; `precision.round_product` rounds
    the operands of the state products (the identity in the exact oracle).
    Returns (o [T, HV, V], states [T, HV, V, K]) where states[t] is the state after token t.
    """
    T, H, K = q.shape
    HV, V = v.shape[1], v.shape[2]
    expect_shape("S", S, (HV, V, K), "[HV, V, K]")
    group = head_groups(H, HV)
    P = precision.round_product  # the identity unless a tensor-core kernel is modelled
    outputs, states = [], []
    for t in range(T):
        q_t, k_t = (precision.round_normalized(l2normalize(x[t])) if use_l2norm else x[t] for x in (q, k))
        q_t = (q_t * scale).repeat_interleave(group, 0)  # [HV, K]
        k_t = k_t.repeat_interleave(group, 0)
        S = torch.exp(g[t])[:, None, None] * S
        Sk = P(torch.einsum("hvk,hk->hv", P(S), k_t))
        u = P(beta[t][:, None] * (v[t] - Sk))
        S = S + u[:, :, None] * k_t[:, None, :]
        outputs.append(torch.einsum("hvk,hk->hv", P(S), q_t))
        if precision.state_each_step and store_dtype is not None:
            S = S.to(store_dtype).to(precision.compute)
        states.append(S)
    if T == 0:  # an empty sequence (a padded varlen segment) leaves the state as it was
        return S.new_zeros(0, HV, V), S.new_zeros(0, HV, V, K)
    return torch.stack(outputs), torch.stack(states)
