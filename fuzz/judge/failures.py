"""Failure kinds. Each is its own exception class, raised with the Case it failed on and a cause signature.

A failure's identity is its key: kind x dispatch bucket x cause. The cause is a short text without numbers (which
contract broke, or the library's error normalized), so two cases that break the same thing in the same compiled
kernel are one failure, and different breakages stay apart. Hypothesis tells failures apart by exception type and
raising line; `keyed()` gives each key a subclass of its kind, so Hypothesis keeps and shrinks one minimal example
per key (an isolated worker raises every failure from one line).
"""

from __future__ import annotations

import re


class GdnFailure(AssertionError):
    """Base: a target disagreed with the oracle or broke a memory contract.

    case: the Case; detail: what broke, with numbers (the message after the coordinate); cause: the same without
    numbers, for the failure key (default: `detail` normalized)."""

    def __init__(self, case, detail: str, cause: str | None = None):
        self.case, self.detail = case, detail
        self.cause = cause if cause is not None else normalized(detail)
        super().__init__(f"{case!r}: {detail}")

    def __reduce__(self):  # pickled by multiprocessing with its fields, not by the joined message
        return (type(self), (self.case, self.detail, self.cause))


class OutputMismatch(GdnFailure):
    pass


class StateMismatch(GdnFailure):
    pass


class IntermediateMismatch(GdnFailure):
    pass


class PoolCorruption(GdnFailure):
    """A pool slot or buffer row the contract leaves untouched changed."""


class GuardBreach(GdnFailure):
    """Bytes outside the buffer (or in a strided view's gaps) changed: an out-of-bounds write."""


class UnwrittenOutput(GdnFailure):
    """Output the contract says is written still holds the poison pattern."""


class NonFinite(GdnFailure):
    """NaN or Inf where the oracle is finite."""


class RejectedValidInput(GdnFailure):
    """The target raised on a case inside its declared support."""

    @classmethod
    def raised(cls, case, error: Exception) -> RejectedValidInput:
        """The library's error as the finding: its type and text (terminal colour codes dropped: the CuTe DSL
        colours its diagnostics, which would leave a blank first line and escape codes in the cause)."""
        text = _ANSI.sub("", str(error)).strip()
        return cls(case, f"{type(error).__name__}: {text}", cause=f"{type(error).__name__}: {normalized(text)}")


class AcceptedInvalidInput(GdnFailure):
    """The target ran a case it must reject (e.g. HV not a multiple of H)."""


class KernelCrash(GdnFailure):
    """The isolated worker process died during the call (signal, nonzero exit) or its CUDA context was
    poisoned (illegal memory access, launch failure): the detail carries the kernel's error text."""


class KernelHang(GdnFailure):
    """The call did not return within the per-call timeout; the worker was killed."""


class StaleCompile(GdnFailure):
    """A call failed after other calls (a mismatch, a rejection, a corruption) and passes alone, with empty compile
    caches: a compiled kernel was reused for a call its cache key does not tell apart (a dtype, a shape, a pool
    capacity or a stride left out of the key), or other library state outlived the call (fuzz.run.serving)."""


class OutputAliased(GdnFailure):
    """A returned output (output=None) shares memory with an input, the state pool, the intermediate buffer or an
    earlier call's output, or an earlier call's output changed during a later call (fuzz.run.serving)."""


class StateLeak(GdnFailure):
    """A call changed pool slots that no request of it reads or writes (in its view or past it) and passes alone,
    or before a call the pool no longer held what the calls before it left there (fuzz.run.serving)."""


class Disagreement(GdnFailure):
    """Two implementations inside one engine that its contract says must agree (a glue and its fallback, vLLM's MTP
    port and its sigmoid-gating partner: Target.paired, fuzz.judge.pair) disagree beyond the pair's bound: a finding
    even where the oracle is unsure."""


FAILURE_KINDS = (
    OutputMismatch,
    StateMismatch,
    IntermediateMismatch,
    PoolCorruption,
    GuardBreach,
    UnwrittenOutput,
    NonFinite,
    RejectedValidInput,
    AcceptedInvalidInput,
    KernelCrash,
    KernelHang,
    StaleCompile,
    OutputAliased,
    StateLeak,
    Disagreement,
)
KINDS = {k.__name__: k for k in FAILURE_KINDS}

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_NUMBER = re.compile(r"0x[0-9a-fA-F]+|[-+]?\d+(\.\d+)?([eE][-+]?\d+)?")
_KEYED: dict[tuple[type, str], type] = {}


def normalized(text: str, limit: int = 160) -> str:
    """A cause signature: the first line with every number replaced by N, at most `limit` characters."""
    text = _ANSI.sub("", text).strip()
    line = text.splitlines()[0] if text else ""
    return _NUMBER.sub("N", line)[:limit]


def keyed(kind: type, key: str) -> type:
    """The subclass of failure class `kind` for one failure key (cached: one class per key)."""
    cls = _KEYED.get((kind, key))
    if cls is None:
        cls = _KEYED[(kind, key)] = type(
            kind.__name__, (kind,), {"key": key, "__module__": kind.__module__, "__qualname__": kind.__qualname__}
        )
    return cls
