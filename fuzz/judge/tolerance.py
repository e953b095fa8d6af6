"""Tolerances as data, with one rule.

A target's error against the float64 oracle may be at most c times the error of the oracle re-run in
the target's own precision model (fp32 arithmetic, rounding where the semantics table says), plus a
floor for reduction-order noise that grows with the number of tokens:

    |target - exact|max  <=  c * |model - exact|max  +  (rel * |exact|max + abs) * (1 + growth * (T - 1))

The model error carries everything the kernel is *allowed* to lose (bf16 stores, beta rounding,
input conversion); c and the floor only absorb the order of fp32 operations.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tol:
    c: float
    rel: float
    abs: float
    growth: float = 0.25

    def bound(self, model_err: float, scale: float, T: int) -> float:
        return self.c * model_err + (self.rel * scale + self.abs) * (1 + self.growth * (T - 1))


# Keyed by (what is judged, dtype it is stored in). fp32 floors are ~30 fp32 ulps of the largest value;
# 16-bit floors are one ulp: a kernel may round the other way from the model at a tie.
TOLERANCES: dict[tuple[str, str], Tol] = {
    ("output", "fp32"): Tol(c=4, rel=4e-6, abs=1e-6),
    ("output", "bf16"): Tol(c=2, rel=8e-3, abs=1e-5),
    ("output", "fp16"): Tol(c=2, rel=1e-3, abs=1e-6),
    ("state", "fp32"): Tol(c=4, rel=4e-6, abs=1e-6),
    ("state", "bf16"): Tol(c=2, rel=8e-3, abs=1e-5),
    ("intermediate", "fp32"): Tol(c=4, rel=4e-6, abs=1e-6),
    ("intermediate", "bf16"): Tol(c=2, rel=8e-3, abs=1e-5),
}


def tolerance(kind: str, dtype: str) -> Tol:
    """The tolerance of one output kind (output, state, intermediate) in one dtype: the same rule for every target."""
    return TOLERANCES[(kind, dtype)]
