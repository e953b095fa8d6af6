"""Shared by the Triton targets: they run on CUDA, or on CPU only under the Triton interpreter."""

from __future__ import annotations

import dataclasses
import os

import torch

from fuzz.targets.base import Target, Unavailable
from fuzz.targets.semantics import Semantics


def sm() -> str:
    """This GPU's arch in the targets table's words: sm_90."""
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


def triton_where(profile_device: str) -> str:
    """Where Triton kernels ran, for the targets table: the interpreter on the CPU, else the GPU's arch."""
    return "Triton interpreter" if profile_device == "cpu" else f"Triton on {sm()}"


def interpreted() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


class TritonTarget(Target):
    def runs_installed_triton(self) -> bool:
        """Do the installed library's Triton kernels run under this target? The installed API's do; an override
        module's only where it says so (INSTALLED_TRITON = True: a mutant that subclasses the real glue or wraps the
        real kernels, one defect in its Python), since an override is in general a stand-in in plain torch."""
        if not self.overridden:
            return True
        try:
            return getattr(self.api(), "INSTALLED_TRITON", False) is True
        except Unavailable:  # nothing loaded: nothing runs (unavailable_reason says why)
            return False

    def semantics(self) -> Semantics:
        """Triton 3.8's interpreter casts fp32 -> bf16 by truncation (GPU: round-to-nearest-even)."""
        sem = super().semantics()
        return dataclasses.replace(sem, bf16_truncates=True) if interpreted() and self.runs_installed_triton() else sem

    def unavailable_reason(self, profile_device: str) -> str | None:
        if profile_device == "cpu" and not interpreted() and self.runs_installed_triton():
            return "Triton on CPU needs TRITON_INTERPRET=1 before triton is imported (the CPU profiles set it)"
        return super().unavailable_reason(profile_device)
