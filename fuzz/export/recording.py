"""The call an exported script's target makes, recorded at export: the adapter's call() runs once on the case's tensors
(built on the CPU) against the library with a stopping tap (fuzz.export.call), so what is shown is what the embedded
adapter passes, and no kernel runs. Where the library (or the override asked for) does not load here, a FlashInfer
target is recorded against its CPU stand-in, which has the newest release's signatures, and the recording says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from fuzz.export import describe
from fuzz.export.call import Call, Captured, tapping
from fuzz.generate.materialize import materialize
from fuzz.model.case import Case
from fuzz.standins import FOR_ADAPTER
from fuzz.targets.base import Target, Unavailable


@dataclass(frozen=True)
class Recording:
    call: Call | None  # None: the adapter made no library call here (`why` says what happened)
    against: str  # the API it was recorded against, in words
    why: str = ""


def record(target: Target, case: Case, override: str | None) -> Recording:
    """The first library call of target.call(case) (the family's override is set back afterwards)."""
    family, saved = target.family, target.family.override
    standin = FOR_ADAPTER.get(type(target).__module__)
    tried: list[str] = []
    try:
        for module in dict.fromkeys([override, standin]):
            family.reset(module)
            try:
                return _run(target, case, _against(target, module, tried))
            except Unavailable as e:
                tried.append(str(e))
        return Recording(None, "nothing", f"the library did not load here ({'; '.join(tried)})")
    finally:
        family.reset(saved)


def _against(target: Target, module: str | None, tried: list[str]) -> str:
    if module is None:
        return f"{describe.distribution(target)} {target.family.version()}"
    if not tried:
        return f"the override {module}"
    return (
        f"gdn-fuzz's CPU stand-in {module}, since {tried[-1]} where this was exported (the stand-in takes the "
        "newest release's keywords: an older release is passed only those it takes)"
    )


def _run(target: Target, case: Case, against: str) -> Recording:
    target.family.api()  # Unavailable where it does not load: the caller tries the next API
    with tapping(target, stop=True) as calls:
        try:
            target.call(case, materialize(case, "cpu", offset_bits=target.offset_bits()))
        except Captured:
            return Recording(calls[0], against)
        except Unavailable:
            raise
        except Exception as e:  # noqa: BLE001 - the adapter stopped before its library call: said, not raised
            return Recording(None, against, f"{type(e).__name__}: {e}")
    return Recording(None, against, "the adapter returned without a library call")
