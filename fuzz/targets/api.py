"""What an installed function accepts, read from its signature, and calls built from it.

A library's API grows keyword by keyword across releases; an adapter written against the newest one must never pass
a keyword the loaded release lacks (Python raises TypeError before the kernel runs: a defect of ours, never a finding).
Two rules keep it so:

  * Capabilities are read from the signature (`accepts`), once per loaded API, never guessed from a version number:
    an override module mimicking an older release (fuzz.standins.flashinfer_cpu.release_0_6_10) is detected the same
    way as that release itself.
  * Every call is built by `keywords(fn, values)`: a keyword the function takes is passed; one it lacks is dropped
    when its value is neutral (None, False, or a value the caller names as the library's default, e.g.
    backend="flashinfer" before FlashInfer had other backends), and anything else raises AdapterError, because the
    target's Support should have kept such a case from being drawn. Calls pass keywords only: positional orders
    change between releases (FlashInfer 0.6.14 inserted `ssm_state_indices` before `disable_state_update` in
    gated_delta_rule_mtp), names have not (0.6.5 .. 0.7.4 only added keywords to the four GDN entry points).

`inspect.signature` follows `functools.wraps` (FlashInfer's @flashinfer_api keeps it), so a decorated function shows
its own parameters; a function taking **kwargs accepts every keyword.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

NEUTRAL = (None, False)  # values that mean "not asked for" for any keyword


class AdapterError(Exception):
    """The adapter built a call the loaded function cannot take: a bug in the adapter or its Support, not a finding."""


def signature(fn: Callable) -> inspect.Signature | None:
    """fn's signature, or None when it has none to read (a builtin without text signature)."""
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def accepts(fn: Callable, keyword: str) -> bool:
    """Whether `fn(keyword=...)` binds: a named parameter that is not positional-only, or a **kwargs catch-all.
    A function whose signature cannot be read is assumed to take it (the call then tells)."""
    sig = signature(fn)
    if sig is None:
        return True
    param = sig.parameters.get(keyword)
    if param is not None:
        return param.kind in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY)
    return any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())


def lacks(fn: Callable, names: Iterable[str]) -> list[str]:
    """The names among `names` that fn does not accept, in order."""
    return [name for name in names if not accepts(fn, name)]


def default(fn: Callable, keyword: str, missing: Any = inspect.Parameter.empty) -> Any:
    """The default value of fn's parameter `keyword` (`missing` when it has none or no such parameter)."""
    sig = signature(fn)
    param = sig.parameters.get(keyword) if sig else None
    return missing if param is None or param.default is param.empty else param.default


def is_neutral(value: Any, neutral: Iterable[Any] = ()) -> bool:
    """None, False, or one of `neutral` (compared by identity for tensors, by equality for plain values)."""
    if any(value is n for n in NEUTRAL):
        return True
    plain = isinstance(value, (str, int, float, bool, type(None)))
    return plain and any(type(value) is type(n) and value == n for n in neutral)


def keywords(
    fn: Callable, values: Mapping[str, Any], neutral: Mapping[str, Iterable[Any]] | None = None, name: str | None = None
) -> dict[str, Any]:
    """The keyword arguments to call fn with: `values` less the keywords fn lacks whose value is neutral (see
    is_neutral; `neutral` adds per-keyword library defaults). A non-neutral value for a missing keyword raises
    AdapterError naming the function and the keyword."""
    neutral = neutral or {}
    out, missing = {}, []
    for key, value in values.items():
        if accepts(fn, key):
            out[key] = value
        elif not is_neutral(value, neutral.get(key, ())):
            missing.append(key)
    if missing:
        raise AdapterError(
            f"{name or getattr(fn, '__name__', fn)} has no keyword {', '.join(missing)}, which this "
            "case needs: the target's release_support should have kept such cases from being drawn"
        )
    return out


def no_keyword(function: str, keyword: str, where: str) -> str:
    """The reason a target whose essential keyword is missing gives (Target.unavailable_reason)."""
    return f"unavailable on this release: {function} has no keyword {keyword} ({where})"


def where(family) -> str:
    """The loaded API in words, for reasons: 'flashinfer-python 0.6.10', or the override module, with the release
    whose API it mimics when it says so (an `api_release` attribute: an override is never a release itself)."""
    dist = getattr(family, "distribution", family.name)
    if family.override is None:
        return f"{dist} {family.version()}"
    mimics = getattr(family.api(), "api_release", None)
    return f"override {family.override}" + (f", the API of {dist} {mimics}" if mimics else "")
