"""A judged buffer's error against the oracle (`measure`), in float64, a block of leading rows at a time.

The verdict (fuzz.judge.verdict._compare) compares a result with the float64 oracle and the precision model where the
result lives. A verify case's intermediate rows are [B, T, HV, V, K]: hundreds of millions of elements at B = 512, and
the comparison's float64 copies and temporaries of all of them at once took tens of GiB, so such a check held most of
a GPU's memory slots (fuzz.run.memory) and the other heavy checks queued behind it. Block by block the same figures
come out (maxima of maxima; the first non-finite element and the first largest error in row-major order, as over the
whole) with the temporaries of one block alive: CHUNK elements (fuzz.model.guarded's block), whatever the buffer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from fuzz.model.guarded import CHUNK


@dataclass(frozen=True)
class Measured:
    """What the verdict reads of one comparison. `nonfinite`: the first index where the oracle and the model are
    finite and representable in the result's dtype and the result is not (None: there is none; the rest is then
    meaningless). Otherwise, over the elements judged (those where the oracle is finite and representable): the
    largest error against the oracle and the first index holding it, the precision model's largest error, and the
    oracle's largest magnitude."""

    nonfinite: tuple[int, ...] | None
    worst: float = 0.0
    worst_at: tuple[int, ...] = ()
    model_err: float = 0.0
    scale: float = 0.0


def measure(got: torch.Tensor, exact: torch.Tensor, model: torch.Tensor) -> Measured:
    """`got` against `exact` (the oracle) and `model` (the oracle in the target's precision), all of one shape."""
    rows = max(1, CHUNK // max(1, math.prod(got.shape[1:])))  # CHUNK elements: 128 MiB a float64 copy
    # An fp16 output whose true value exceeds 65504 is inf, a property of the dtype, not of the kernel (also when the
    # kernel computes in bf16 and only the caller's fp16 buffer overflows, and when the precision model, which rounds
    # the inputs as the kernel does, lands past the largest value). The last 1% below the largest value rounds either
    # way.
    limit = 0.99 * torch.finfo(got.dtype).max
    worst = model_err = scale = -math.inf
    worst_at: tuple[int, ...] = ()
    for start in range(0, got.shape[0], rows):
        # float64 on the device the result lives on: no host copies
        g, e, m = (x[start : start + rows].detach().to(got.device, torch.float64) for x in (got, exact, model))
        finite = torch.isfinite(e) & torch.isfinite(m)
        work = e.abs()  # the one float64 temporary of the block, reused below
        finite &= torch.maximum(work, m.abs(), out=work) <= limit
        bad = finite & ~torch.isfinite(g)
        if bad.any():
            return Measured(_shifted(bad.nonzero()[0].tolist(), start))
        outside = ~finite
        top = float(torch.sub(g, e, out=work).abs_().masked_fill_(outside, 0).max())
        if top > worst:  # strictly: the first index of the largest error, as argmax over the whole gives
            worst, worst_at = top, _shifted(torch.unravel_index(work.argmax(), work.shape), start)
        model_err = max(model_err, float(torch.sub(m, e, out=work).abs_().masked_fill_(outside, 0).max()))
        scale = max(scale, float(torch.abs(e, out=work).masked_fill_(outside, 0).max()))
    return Measured(None, worst, worst_at, model_err, scale)


def _shifted(index, start: int) -> tuple[int, ...]:
    """A block's index as an index of the whole (its first dimension offset by the block's first row)."""
    first, *rest = (int(i) for i in index)
    return (first + start, *rest)


__all__ = ["Measured", "measure"]
