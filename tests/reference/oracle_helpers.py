"""Shared pieces of the oracle tests: shape strategies, seeded random cases, and the GDN math
written out independently of reference.recurrence (gates, normalisation, head expansion)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from hypothesis import settings
from hypothesis import strategies as st

import reference
from reference import EXACT, LogGates, RawGates, decode, gate_values

F64 = torch.float64

# No example database: the suite must not write outside tests/ (and stays deterministic to rerun).
PROPERTY = settings(max_examples=25, deadline=None, database=None)
seeds = st.integers(min_value=0, max_value=2**31 - 1)


@dataclass(frozen=True)
class Shape:
    B: int
    T: int
    H: int
    G: int  # value heads per qk head (HV / H)
    K: int
    V: int

    @property
    def HV(self) -> int:
        return self.H * self.G


@st.composite
def shapes(draw, min_T: int = 1, max_T: int = 6, max_B: int = 3, groups=(1, 2, 4)) -> Shape:
    """Small shapes; K and V drawn independently from 2..8, so K != V most of the time."""
    return Shape(
        B=draw(st.integers(1, max_B)),
        T=draw(st.integers(min_T, max_T)),
        H=draw(st.sampled_from((1, 2))),
        G=draw(st.sampled_from(groups)),
        K=draw(st.integers(2, 8)),
        V=draw(st.integers(2, 8)),
    )


@dataclass(frozen=True)
class Case:
    """One batch for verify: q, k [B, T, H, K], v [B, T, HV, V], raw gates, a V x K pool and slots."""

    shape: Shape
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    gates: RawGates | LogGates
    pool: torch.Tensor
    slots: torch.Tensor


def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(gen: torch.Generator, *size: int, dtype=F64) -> torch.Tensor:
    return torch.randn(*size, generator=gen, dtype=F64).to(dtype)


def random_gates(gen: torch.Generator, *lead: int, HV: int) -> RawGates:
    """Decays exp(g) spread over (0, 1) and beta over (0, 1): A_log in [-1.5, 0.5]."""
    return RawGates(
        A_log=torch.rand(HV, generator=gen, dtype=F64) * 2 - 1.5,
        a=randn(gen, *lead, HV),
        dt_bias=randn(gen, HV),
        b=2 * randn(gen, *lead, HV),
    )


def non_identity_slots(gen: torch.Generator, B: int, P: int) -> torch.Tensor:
    """B distinct slots in [0, P), P > B, guaranteed not to be arange(B)."""
    slots = torch.randperm(P, generator=gen)[:B]
    if torch.equal(slots, torch.arange(B)):
        slots = slots.flip(0) if B > 1 else torch.tensor([P - 1])
    return slots


def make_case(seed: int, shape: Shape, extra_slots: int = 0, pool_dtype=F64) -> Case:
    """A random case whose pool has B + extra_slots slots; slots are arange(B) when extra_slots == 0,
    otherwise a random non-identity map."""
    gen = generator(seed)
    B, T, H, HV, K, V = shape.B, shape.T, shape.H, shape.HV, shape.K, shape.V
    P = B + extra_slots
    slots = torch.arange(B) if extra_slots == 0 else non_identity_slots(gen, B, P)
    return Case(
        shape=shape,
        q=randn(gen, B, T, H, K),
        k=randn(gen, B, T, H, K),
        v=randn(gen, B, T, HV, V),
        gates=random_gates(gen, B, T, HV=HV),
        pool=randn(gen, P, HV, V, K, dtype=pool_dtype),
        slots=slots,
    )


def verify(case: Case, **kw):
    return reference.verify(case.q, case.k, case.v, case.gates, case.pool, case.slots, **kw)


def tokens(case: Case, sl: slice, rows=slice(None)) -> tuple:
    """(q, k, v, gates) of tokens `sl` (and batch rows `rows`) only."""
    g = case.gates
    if isinstance(g, RawGates):
        g = RawGates(A_log=g.A_log, a=g.a[rows, sl], dt_bias=g.dt_bias, b=g.b[rows, sl])
    else:
        g = LogGates(g=g.g[rows, sl], beta=g.beta[rows, sl])
    return case.q[rows, sl], case.k[rows, sl], case.v[rows, sl], g


def with_log_gates(case: Case) -> Case:
    """The same case with (g, beta) precomputed in float64. Below float64, vectorised and scalar
    exp/sigmoid may differ in the last bit, so gates computed over [B, T] vs [B, 1] need not be
    bitwise equal; precomputed gates take that noise out of bitwise comparisons."""
    return replace(case, gates=LogGates(*gate_values(case.gates)))


def decode_by_decode(case: Case, precision=EXACT, **kw) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
    """T sequential decode calls threading the pool. Returns (output [B, T, HV, V], final pool,
    the pool after each token)."""
    pool, outs, pools = case.pool, [], []
    for t in range(case.shape.T):
        r = decode(*tokens(case, slice(t, t + 1)), pool, case.slots, precision=precision, **kw)
        pool = r.pool
        outs.append(r.output)
        pools.append(pool)
    return torch.cat(outs, dim=1), pool, pools


# ---- the math, written from the spec, for independent formulations ----


def spec_gates(gates: RawGates) -> tuple[torch.Tensor, torch.Tensor]:
    """(g, beta) via torch's own softplus (threshold 20) and sigmoid."""
    g = -torch.exp(gates.A_log) * F.softplus(gates.a + gates.dt_bias, beta=1.0, threshold=20.0)
    return g, torch.sigmoid(gates.b)


def unit(x: torch.Tensor) -> torch.Tensor:
    """x / sqrt(sum x^2 + 1e-6) over the last dim."""
    return x / torch.sqrt((x**2).sum(-1, keepdim=True) + 1e-6)


def expand_heads(x: torch.Tensor, G: int, dim: int = -2) -> torch.Tensor:
    """qk heads -> value heads: value head hv reads qk head hv // G."""
    return x.repeat_interleave(G, dim=dim)


def assert_close64(actual: torch.Tensor, expected: torch.Tensor, tol: float = 1e-10) -> None:
    torch.testing.assert_close(actual, expected, rtol=tol, atol=tol)


def assert_untouched(before: torch.Tensor, after: torch.Tensor, touched) -> None:
    """Every slot (first-dim index) not in `touched` is bit-identical."""
    touched = {int(i) for i in touched}
    for i in range(before.shape[0]):
        if i not in touched:
            assert torch.equal(before[i], after[i]), f"slot {i} changed but should be untouched"
