"""The two ways a caller gives the gates: as a model layer holds them, or precomputed. The math that turns them into
(g, beta) is reference.recurrence.gate_values; their shape checks are reference.checks.gate_inputs."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class RawGates:
    """Gate inputs as a model layer holds them: A_log, dt_bias [HV]; a, b [..., HV] (per token)."""

    A_log: torch.Tensor
    a: torch.Tensor
    dt_bias: torch.Tensor
    b: torch.Tensor


@dataclass(frozen=True)
class LogGates:
    """Precomputed gates: g [..., HV] is the log-decay (<= 0), beta [..., HV] is post-sigmoid."""

    g: torch.Tensor
    beta: torch.Tensor


Gates = RawGates | LogGates
