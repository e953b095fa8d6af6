"""The library call an adapter makes, in the library's words: the function's qualified name and each keyword argument
(a tensor's dtype, shape, strides and storage offset, an index tensor's entries where it is short, a plain value as it
is).

It is read by a tap (Family.tap) that wraps the loaded API's functions: `tapping(target)` records the first call and
stops it before the library runs (what an export does: fuzz.export.recording; fuzz.export.render then writes each
argument as code in the script's top).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from fuzz.targets.api import signature

SHORT = 16  # an integer tensor of at most this many entries shows them


class Captured(BaseException):
    """Raised by a stopping tap after it recorded a call: the library never runs. A BaseException, so no adapter's
    `except Exception` takes it for the library's own error."""


@dataclass(frozen=True)
class TensorArg:
    dtype: str  # torch's name without 'torch.': bfloat16, int32
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # in elements
    offset: int  # storage offset in elements: non-zero for a view into a larger allocation
    values: tuple | None  # an integer tensor's entries where it has at most SHORT (padding entries included)

    @classmethod
    def of(cls, x: torch.Tensor) -> TensorArg:
        short = not (x.dtype.is_floating_point or x.dtype.is_complex) and x.numel() <= SHORT
        return cls(
            str(x.dtype).removeprefix("torch."),
            tuple(x.shape),
            tuple(x.stride()),
            x.storage_offset(),
            tuple(x.flatten().tolist()) if short else None,
        )

    def words(self) -> str:
        text = f"{self.dtype} {list(self.shape)}  strides {self.strides}"
        text += f"  storage offset {self.offset}" if self.offset else ""
        return text + (f"  = {list(self.values)}" if self.values is not None else "")


@dataclass(frozen=True)
class Call:
    function: str  # qualified: flashinfer.gdn_decode.gated_delta_rule_decode_pretranspose
    arguments: tuple[tuple[str, object], ...]  # (keyword, TensorArg or the plain value), in the order passed
    # keyword -> the object passed, as passed (an export writes each tensor as an expression that rebuilds it)
    values: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, function: str, args: tuple, kwargs: dict, order: tuple[str, ...] = ()) -> Call:
        """The call with its keywords in `order` (the function's parameters), a positional argument as '#n'."""
        rank = {name: n for n, name in enumerate(order)}
        named = [(f"#{n}", value) for n, value in enumerate(args)]
        named += sorted(kwargs.items(), key=lambda item: rank.get(item[0], len(rank)))
        described = tuple((key, TensorArg.of(v) if isinstance(v, torch.Tensor) else v) for key, v in named)
        return cls(function, described, dict(named))

    def lines(self) -> list[str]:
        """The call as code with each argument described: what an exported script shows on top and prints."""
        width = max((len(key) for key, _ in self.arguments), default=0) + 2
        return [
            f"{self.function}(",
            *(f"    {key + '=':<{width}}{_words(value)}" for key, value in self.arguments),
            ")",
        ]

    def table(self) -> list[str]:
        """The arguments as markdown rows: keyword, dtype, shape, strides, storage offset, value."""
        rows = ["| keyword | dtype | shape | strides | storage offset | value |", "|---|---|---|---|---|---|"]
        for key, value in self.arguments:
            if isinstance(value, TensorArg):
                shown = "" if value.values is None else f"`{list(value.values)}`"
                rows.append(
                    f"| `{key}` | {value.dtype} | {list(value.shape)} | {value.strides} | {value.offset} | {shown} |"
                )
            else:
                rows.append(f"| `{key}` | | | | | `{value!r}` |")
        return rows


def _words(value) -> str:
    return value.words() if isinstance(value, TensorArg) else repr(value)


class Tap:
    """Family.tap: an API whose public functions record a call into `calls`, then stop it (Captured)."""

    def __init__(self, target, calls: list[Call]):
        self.target, self.calls = target, calls
        self._proxies: dict[int, tuple[object, _Tapped]] = {}

    def __call__(self, api):
        held = self._proxies.get(id(api))
        if held is None or held[0] is not api:
            held = self._proxies[id(api)] = (api, _Tapped(api, self))
        return held[1]

    def wrap(self, name: str, fn):
        module = self.target.library_module or fn.__module__
        qualified = f"{module}.{_owner(fn, module)}{name}"
        sig = signature(fn)
        order = tuple(sig.parameters) if sig else ()

        @functools.wraps(fn)  # keeps the signature the adapters read what the release takes from
        def recorded(*args, **kwargs):
            self.calls.append(Call.of(qualified, args, kwargs, order))
            raise Captured(qualified)

        return recorded


def _owner(fn, module: str) -> str:
    """'FlashInferGDNKernel.' for a method of a class the library module defines (a glue object's: the script calls it
    on the object as the engine does), '' for a function or the method of a stand-in for the module's functions."""
    if inspect.ismethod(fn):
        for cls in type(fn.__self__).__mro__:
            if cls.__module__ == module:
                return f"{cls.__name__}."
    return ""


class _Tapped:
    """The API as the tap serves it: its public functions wrapped (once each), everything else as it is."""

    def __init__(self, api, tap: Tap):
        self._api, self._tap, self._wrapped = api, tap, {}

    def __getattr__(self, name: str):
        value = getattr(self._api, name)
        if name.startswith("_") or isinstance(value, type) or not callable(value):
            return value
        if name not in self._wrapped:
            self._wrapped[name] = self._tap.wrap(name, value)
        return self._wrapped[name]


@contextmanager
def tapping(target) -> Iterator[list[Call]]:
    """The call the target's adapter makes to its library while the block runs, stopped there (see Tap)."""
    calls: list[Call] = []
    target.family.tap = Tap(target, calls)
    try:
        yield calls
    finally:
        target.family.tap = None
