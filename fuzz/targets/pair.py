"""Differentials inside one engine: two implementations its contract says must agree, run by one target on the same
inputs (vLLM's Triton MTP port against fused_sigmoid_gating plus its gated RMSNorm).

The target's call runs both, each on its own copy of what it writes, judges the one the oracle can judge through the
standard verdict and compares the two where the contract defines them. Where they disagree beyond the pair's bound it
raises PairDisagrees with the output the verdict is to judge: fuzz.run.harness runs that verdict first (a state the
oracle rejects is the more basic finding) and then reports the disagreement as fuzz.judge.failures.Disagreement, a
finding even where the oracle is unsure.

The bound: both sides store the same quantity in one dtype after fp32 arithmetic in another order, so each element
may differ by the rounding of its own value plus the reduction noise of the row it is normalized by:

    |first - second|  <=  ulps * eps(dtype) * (|second| + rel * |second|max)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


class PairDisagrees(Exception):
    """Raised by a pair target's call after both implementations ran: `output` is what the standard verdict judges,
    `detail` the disagreement with numbers, `cause` the same without (the failure key's cause)."""

    def __init__(self, output: torch.Tensor, detail: str, cause: str):
        super().__init__(detail)
        self.output, self.detail, self.cause = output, detail, cause


@dataclass(frozen=True)
class PairBound:
    """How far two stores of one quantity may differ, in units of the store dtype's epsilon (see the module doc)."""

    ulps: float = 8.0
    rel: float = 2**-4

    def check(self, what: str, first: torch.Tensor, second: torch.Tensor, rows: list[int]) -> tuple[str, str] | None:
        """(detail, cause) of the worst disagreement of `first` against `second` on leading rows `rows` beyond the
        bound, or None. Both are [rows, ...] in one dtype; a NaN or infinity on one side only disagrees."""
        if not rows:
            return None
        index = torch.tensor(rows, device=first.device)
        a, b = (x.index_select(0, index).double() for x in (first, second))
        eps = torch.finfo(first.dtype).eps
        both = torch.isfinite(a) & torch.isfinite(b)
        scale = float(b.where(both, 0).abs().max())
        bound = self.ulps * eps * (b.abs() + self.rel * scale)
        err = (a - b).abs().where(both, torch.where(torch.isfinite(a) == torch.isfinite(b), 0.0, torch.inf))
        excess = err - bound
        if not bool((excess > 0).any()):
            return None
        at = tuple(int(i) for i in torch.unravel_index(excess.argmax(), excess.shape))
        row = rows[at[0]]
        return (
            f"{what}: token row {row}{list(at[1:])}: {a[at].item():.7g} against {b[at].item():.7g}, error "
            f"{err[at].item():.3g} > bound {bound[at].item():.3g} (= {self.ulps} x eps {eps:.3g} x "
            f"(|value| + {self.rel} x |max| {scale:.3g}))",
            f"{what}: error above the pair's bound",
        )
