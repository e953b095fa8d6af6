"""The target registry: every adapter, grouped by library family."""

from __future__ import annotations

from contextlib import ExitStack, contextmanager

from fuzz.targets import fla, flashinfer, flashinfer_sm100, sglang, sglang_glue, vllm
from fuzz.targets.base import Family, Target

TARGETS: tuple[Target, ...] = fla.TARGETS + sglang.TARGETS + flashinfer.TARGETS + flashinfer_sm100.TARGETS
TARGETS += sglang_glue.TARGETS  # SGLang's kernel glue (the sglang-glue family)
TARGETS += vllm.TARGETS  # vLLM's spec-decode kernels (issue 31)
FAMILIES: dict[str, Family] = {t.family.name: t.family for t in TARGETS}


def targets_for(op: str) -> list[Target]:
    return [t for t in TARGETS if op in t.support.ops]


def target_named(name: str) -> Target:
    """The registered target called `name`; ValueError, naming every registered one, where there is none."""
    target = {t.name: t for t in TARGETS}.get(name)
    if target is None:
        raise ValueError(f"unknown target {name!r}; expected one of {sorted(t.name for t in TARGETS)}")
    return target


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


def overriding(specs: list[str] | tuple[str, ...], option: str) -> ExitStack:
    """The overrides `specs` name (as parse_overrides reads them), already entered: a command refuses a malformed spec
    or an unknown family (ValueError) before its work starts, and its `with` on the stack puts every family back
    after, without taking an error of that work for a bad option."""
    restore = ExitStack()
    restore.enter_context(overridden(parse_overrides(specs, option)))
    return restore
