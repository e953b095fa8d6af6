"""A library's own "unsupported on this device" error: the target is unavailable here, with the library's reason.

Such an error is the library's word on the GPU, not on the inputs: judging it RejectedValidInput would report the
device as a finding. Only errors in one of the library phrasings below qualify (exception class and message, both
explicit); every other error a call raises stays the library's verdict on the case.
"""

from __future__ import annotations

import re
import unittest

from fuzz.targets.base import Unavailable

# (exception class name, pattern its message matches): each a phrasing that names the device, not the inputs
DEVICE_PHRASINGS = (
    # flashinfer.jit.cake_gdn.arch_for_compute_capability (0.7.x): "Cake GDN supports only SM100a/SM103a, got compute
    # capability 9.0" (the Cake backend off Blackwell). Other CakeGDNUnsupportedErrors (off-manifest shapes) are not.
    ("CakeGDNUnsupportedError", re.compile(r"supports only SM[\w/]+, got compute capability \d+\.\d+")),
    # flashinfer.utils.backend_requirement: "<fn> does not support backend '<b>' with capability 90", "<fn> does not
    # support compute capability 90" (a backend without capability is no device statement: not matched)
    ("BackendSupportedError", re.compile(r"does not support (backend '[^']*' with capability|compute capability) \d+")),
    # flashinfer.utils.GPUArchitectureError: raised only for an unsupported GPU architecture
    ("GPUArchitectureError", re.compile(r"")),
)


class UnsupportedHere(Unavailable, unittest.SkipTest):
    """The library reports the call unsupported on this device, so the target cannot run here; the message is the
    library's. A SkipTest too: raised inside a Hypothesis test it ends that test as skipped, never shrunk as a
    finding."""


def unsupported_here(error: BaseException) -> str | None:
    """The library's reason ("ExceptionClass: message") when `error` is one of DEVICE_PHRASINGS, else None."""
    names = {k.__name__ for k in type(error).__mro__}
    text = str(error)
    for name, pattern in DEVICE_PHRASINGS:
        if name in names and pattern.search(text):
            return f"{type(error).__name__}: {text}"
    return None
