"""Shared by the Triton targets: they run on CUDA, or on CPU only under the Triton interpreter."""

from __future__ import annotations

import dataclasses
import os

from fuzz.targets.base import Target
from fuzz.targets.semantics import Semantics


def interpreted() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


class TritonTarget(Target):
    def semantics(self) -> Semantics:
        """Triton 3.8's interpreter casts fp32 -> bf16 by truncation (GPU: round-to-nearest-even)."""
        sem = super().semantics()
        return dataclasses.replace(sem, bf16_truncates=True) if interpreted() and not self.overridden else sem

    def unavailable_reason(self, profile_device: str) -> str | None:
        if profile_device == "cpu" and not self.overridden and not interpreted():
            return "Triton on CPU needs TRITON_INTERPRET=1 before triton is imported (the CPU profiles set it)"
        return super().unavailable_reason(profile_device)
