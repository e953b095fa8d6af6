"""The library call an exported script makes, recorded at export: the adapter's call() runs once on the case's tensors
(built on the CPU) with a stopping tap (fuzz.export.call), so no kernel runs and what the script writes is what the
adapter passes. fuzz.export.top then writes each argument as an expression over the same tensors.

It is recorded against the API the script will run: the override module asked for (the stand-in where it does not
load here: the script imports it anyway, and says NOT RUN where it is missing); else the installed library where
it is the release the finding is about (or no release is named); else, for FlashInfer, the CPU stand-in of that
release (fuzz.standins: the release's signatures and contract, so the adapter passes what it passes there), or the
newest release's stand-in; else the installed library whatever its release. The recording says which, and carries
what the script needs from that API: its semantics row and the offset width its buffers are guarded for.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from fuzz.export import release as releases
from fuzz.export.call import Call, Captured, tapping
from fuzz.generate.materialize import materialize
from fuzz.model.case import Case
from fuzz.model.guarded import OFFSET_BITS
from fuzz.model.tensors import Tensors
from fuzz.standins import FOR_ADAPTER
from fuzz.targets.base import Target, Unavailable
from fuzz.targets.semantics import Semantics, semantics_for


@dataclass(frozen=True)
class Recording:
    call: Call | None  # None: the adapter made no library call (`why` says what happened)
    against: str  # the API it was recorded against, in words
    why: str = ""
    tensors: Tensors | None = None  # the tensors the adapter was given (the call's arguments alias them)
    semantics: Semantics | None = None  # the contract row the script judges by (the case's op's)
    offset_bits: int = OFFSET_BITS  # the width the script's buffers are guarded for (that of the API it runs)


def apis(target: Target, override: str | None, release: str | None) -> list[str | None]:
    """The APIs to record against, in order (module doc): module paths, None for the installed library."""
    standin = FOR_ADAPTER.get(type(target).__module__)
    if override:  # the stand-in where it does not load here: the script still imports it, and says so if missing
        return [override, *([standin] if standin and standin != override else [])]
    here = releases.installed(releases.distribution(target))
    if standin and release is not None and release != here:
        module = importlib.import_module(standin)
        for_release = [f"{standin}:{name}" for name, api in vars(module).items() if _reports(api, release)]
        return [*for_release[:1], None, standin]
    return [None, *([standin] if standin else [])]


def _reports(api, release: str) -> bool:
    return getattr(api, "api_release", None) == release and not isinstance(api, type)


def record(target: Target, case: Case, override: str | None, release: str | None) -> Recording:
    """The first library call of target.call(case) against the first API of `apis` that loads (the family's
    override is set back afterwards)."""
    family, saved = target.family, target.family.override
    tried: list[str] = []
    try:
        for module in apis(target, override, release):
            family.reset(module)
            try:
                return _run(target, case, _against(target, module, override, tried))
            except Unavailable as e:
                tried.append(str(e))
        return Recording(None, "nothing", f"the library did not load here ({'; '.join(tried)})")
    finally:
        family.reset(saved)


def _against(target: Target, module: str | None, override: str | None, tried: list[str]) -> str:
    if module is None:
        return f"{releases.distribution(target)} {target.family.version()}"
    if module == override:
        return f"the override {module}"
    why = f", since {tried[0]}" if tried else ""
    return f"gdn-fuzz's CPU stand-in of {releases.distribution(target)} {target.family.version() or '(newest)'}{why}"


def _semantics(target: Target) -> Semantics:
    """The contract row of the API's release (the path's newest where it reports none or has no row), without the
    Triton interpreter's rounding: the script adds that where it runs interpreted."""
    try:
        return semantics_for(target.path, target.release())
    except LookupError:
        return semantics_for(target.path, None)


def _run(target: Target, case: Case, against: str) -> Recording:
    target.family.api()  # Unavailable where it does not load: the caller tries the next API
    overridden = target.overridden and against.startswith("the override")
    bits = target.offset_bits() if overridden else OFFSET_BITS
    t = materialize(case, "cpu", offset_bits=bits)
    semantics = _semantics(target).for_op(case.op)  # a prefill's row where the path's prefill has its own
    with tapping(target) as calls:
        try:
            target.call(case, t)
        except Captured:
            return Recording(calls[0], against, tensors=t, semantics=semantics, offset_bits=bits)
        except Unavailable:
            raise
        except Exception as e:  # noqa: BLE001 - the adapter stopped before its library call: said, not raised
            return Recording(None, against, f"{type(e).__name__}: {e}", t, semantics, bits)
    return Recording(None, against, "the adapter returned without a library call", t, semantics, bits)
