"""Contracts the oracle is parameterised by: padding semantics and the precision model.

Kernels disagree on what a padded batch row means and on where they round. Both are data here,
so the same oracle serves every target; which row applies to which target lives in fuzz/targets/semantics.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

ReadPad = Literal["skip_zero", "skip_untouched", "slot0", "zero_state", "discard"]
WritePad = Literal["skip", "slot0"]


@dataclass(frozen=True)
class PadContract:
    """What a padded index means.

    sentinel: "negative" -> any index < 0 is padding (-1 in SGLang / FlashInfer);
              "zero"     -> index <= 0 is padding (vLLM's NULL_BLOCK_ID = 0; slot 0 is never real).
    read:     a padded *read* slot makes the row
              skip_zero      -- skip: no state read or write, output row written as zeros;
              skip_untouched -- skip: no state read or write, output row left as the caller had it;
              slot0          -- redirect: read (and write back) slot 0, output computed from it;
              zero_state     -- compute from a zero state, output defined; no write-back in one pool, the
                                write slot decides with split pools (FlashInfer prefill);
              discard        -- a serving engine's padded row (fuzz.model.engines): no state read or write of a
                                live slot; its output rows and its intermediate-buffer rows are undefined (the
                                engine discards them; never committed), so they are not judged, but a write outside
                                the buffers still is.
    write:    a padded *write* slot (split read/write pools) is skipped or redirected to slot 0.
    """

    sentinel: Literal["negative", "zero"] = "negative"
    read: ReadPad = "skip_zero"
    write: WritePad = "skip"

    def is_pad(self, index: int | torch.Tensor) -> bool | torch.Tensor:
        """Whether `index` is padding: a bool for an int, a bool tensor elementwise for an index tensor."""
        return index < 0 if self.sentinel == "negative" else index <= 0

    @property
    def null_index(self) -> int:
        return -1 if self.sentinel == "negative" else 0


@dataclass(frozen=True)
class Precision:
    """Where a kernel rounds. The default (everything None, float64) is the exact oracle.

    compute:           arithmetic dtype of the recurrence (float64 oracle; float32 models a kernel).
    inputs:            q, k, v, a, b rounded to this dtype before use (FlashInfer consumes bf16).
    beta:              beta rounded to this dtype after the sigmoid (SGLang packed decode).
    state_each_step:   round the running state to the pool dtype after every token (decode-by-decode)
                       instead of keeping it in `compute` across the T tokens of one call.
    output:            output rounded to this dtype.
    normalized:        l2-normalized q and k rounded to this dtype (FlashInfer prefill normalizes in fp32 and
                       stores q's dtype before its chunked kernel).
    products:          operands of the state products rounded to this dtype, fp32 accumulation (tensor-core
                       kernels: FlashInfer's SM90 chunked prefill multiplies the state, S k^ and u in q's dtype).
    bf16_truncates:    the beta rounding to bf16 truncates toward zero instead of round-to-nearest-even
                       (Triton 3.8's CPU interpreter casts fp32 -> bf16 this way).
    """

    compute: torch.dtype = torch.float64
    inputs: torch.dtype | None = None
    beta: torch.dtype | None = None
    state_each_step: bool = False
    output: torch.dtype | None = None
    bf16_truncates: bool = False
    normalized: torch.dtype | None = None
    products: torch.dtype | None = None

    def load(self, x: torch.Tensor) -> torch.Tensor:
        """An input as the kernel sees it: optionally rounded, then in the compute dtype."""
        if self.inputs is not None:
            x = x.to(self.inputs)
        return x.to(self.compute)

    def _through(self, x: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
        """x stored in `dtype` and read back in the compute dtype (unchanged when dtype is None)."""
        return x if dtype is None else x.to(dtype).to(self.compute)

    def round_normalized(self, x: torch.Tensor) -> torch.Tensor:
        return self._through(x, self.normalized)

    def round_product(self, x: torch.Tensor) -> torch.Tensor:
        return self._through(x, self.products)

    def round_beta(self, beta: torch.Tensor) -> torch.Tensor:
        if self.beta == torch.bfloat16 and self.bf16_truncates:
            bits = beta.float().view(torch.int32) & ~0xFFFF  # keep sign, exponent and the top 7 mantissa bits
            return bits.view(torch.float32).to(self.compute)
        return self._through(beta, self.beta)


EXACT = Precision()
SKIP_PADDING = PadContract()
