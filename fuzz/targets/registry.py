"""The target registry: every adapter, grouped by library family."""

from __future__ import annotations

from contextlib import contextmanager

from fuzz.targets import fla, flashinfer, flashinfer_sm100, sglang, sglang_glue, vllm
from fuzz.targets.base import Family, Target

TARGETS: tuple[Target, ...] = fla.TARGETS + sglang.TARGETS + flashinfer.TARGETS + flashinfer_sm100.TARGETS
TARGETS += sglang_glue.TARGETS  # SGLang's kernel glue (the sglang-glue family)
TARGETS += vllm.TARGETS  # vLLM's spec-decode kernels (issue 31)
FAMILIES: dict[str, Family] = {t.family.name: t.family for t in TARGETS}


def targets_for(op: str) -> list[Target]:
    return [t for t in TARGETS if op in t.support.ops]


def parse_overrides(specs: list[str] | tuple[str, ...], option: str = "--gdn-target") -> dict[str, str]:
    """FAMILY=module.path[:attr] specs as a family -> module map; a malformed or repeated one raises ValueError."""
    overrides: dict[str, str] = {}
    for spec in specs:
        family, sep, module = spec.partition("=")
        if not sep or not family or not module:
            raise ValueError(f"{option} {spec!r}: expected FAMILY=module.path[:attr]")
        if family in overrides:
            raise ValueError(f"{option} {spec}: {family} is already {family}={overrides[family]}")
        overrides[family] = module
    return overrides


def current_overrides() -> dict[str, str]:
    """The families pointed at another module now: family -> module.path[:attr]."""
    return {name: f.override for name, f in sorted(FAMILIES.items()) if f.override}


@contextmanager
def overridden(overrides: dict[str, str]):
    """For the with block, point families at override modules ('flashinfer' -> 'my.module') and the others at the real
    library; every family goes back to what it was after. An unknown family raises ValueError on entering."""
    unknown = set(overrides) - set(FAMILIES)
    if unknown:
        raise ValueError(
            f"--gdn-target: unknown famil{'y' if len(unknown) == 1 else 'ies'} {sorted(unknown)}; "
            f"expected one of {sorted(FAMILIES)}"
        )
    before = {name: family.override for name, family in FAMILIES.items()}
    for name, family in FAMILIES.items():
        family.reset(overrides.get(name))
    try:
        yield
    finally:
        for name, family in FAMILIES.items():
            family.reset(before[name])
