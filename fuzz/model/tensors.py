"""A case's tensors as a target receives them (`Tensors`: fuzz.generate.materialize builds them), and the pool slots
whose values the case sets (`named_slots`)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fuzz.model.case import Case
from fuzz.model.guarded import Guarded


@dataclass
class Tensors:
    """Inputs (q, k, v in the case's layout of tokens) and guarded writable buffers."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    A_log: torch.Tensor
    dt_bias: torch.Tensor
    a: torch.Tensor
    b: torch.Tensor
    g: torch.Tensor  # log-decay computed from the raw gates in fp32 (for "log" gate targets)
    beta: torch.Tensor
    read_slots: torch.Tensor
    write_slots: torch.Tensor | None
    token_slots: torch.Tensor | None
    inter_index: torch.Tensor | None
    cu_seqlens: torch.Tensor | None
    pool: Guarded
    inter: Guarded | None
    output: Guarded
    # [B] int32, the case's accepted counts (None without). A case with them has its token_slots [B, T] in the middle
    # of a longer index buffer whose other entries name slot `pool`, the pool's first guard slot: a kernel reading
    # token_slots[n * T + accepted[n] - 1] for a count outside 1..T reads the neighbour row's slot or that guard
    # slot (guard NaNs), the same on every device, never memory we do not own (fuzz.generate.materialize).
    accepted: torch.Tensor | None = None


def named_slots(case: Case) -> list[int]:
    """Pool slots a request names (read, written, per token), and slot 0, where padding may be redirected."""
    named = [*case.read_slots, *(case.write_slots or ()), *(s for row in case.token_slots or () for s in row)]
    return sorted(s for s in {0, *named} if 0 <= s < case.pool)
