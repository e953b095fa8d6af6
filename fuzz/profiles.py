"""Profiles: the one thing a user chooses. Each names a device, a search budget and Hypothesis settings."""
from __future__ import annotations

import os
from dataclasses import dataclass

from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase


@dataclass(frozen=True)
class Budget:
    """What the strategies may draw on this profile's machine."""

    device: str
    head_dims: tuple  # (K, V) pairs; K != V pairs first, so a transposed state cannot pass
    max_B: int
    max_T: int
    max_pool: int
    large_slots: bool = False  # slot ids past 2^31 / (HV*K*V) elements: int32 offset overflow (GPU memory)


CPU_DIMS = ((8, 16), (16, 8), (4, 8), (8, 8), (16, 16))
GPU_DIMS = ((128, 128), (64, 128), (128, 64), (128, 256), (32, 32))

BUDGETS = {
    "ci": Budget("cpu", CPU_DIMS, max_B=4, max_T=8, max_pool=12),
    "dev": Budget("cpu", CPU_DIMS, max_B=6, max_T=16, max_pool=24),
    "gate": Budget("cpu", CPU_DIMS, max_B=4, max_T=8, max_pool=12),
    "h200": Budget("cuda", GPU_DIMS, max_B=96, max_T=16, max_pool=512, large_slots=True),
    "b200": Budget("cuda", GPU_DIMS, max_B=96, max_T=16, max_pool=512, large_slots=True),
}
BUDGETS["default"] = BUDGETS["dev"]

_SLOW = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
_DB_DIR = os.environ.get("GDN_FUZZ_DB", ".hypothesis/gdn-examples")


def register_profiles() -> None:
    common = dict(deadline=None, suppress_health_check=_SLOW, print_blob=True)
    settings.register_profile("ci", max_examples=200, derandomize=True, database=None, **common)
    settings.register_profile("dev", max_examples=300, database=DirectoryBasedExampleDatabase(_DB_DIR), **common)
    settings.register_profile("gate", max_examples=200, derandomize=True, database=None,
                              phases=[Phase.explicit, Phase.generate, Phase.shrink], **common)
    for gpu in ("h200", "b200"):
        settings.register_profile(gpu, max_examples=5000, database=DirectoryBasedExampleDatabase(_DB_DIR), **common)


def budget_for(profile: str | None) -> Budget:
    return BUDGETS.get(profile or "default", BUDGETS["dev"])
