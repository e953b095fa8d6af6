"""The NaN bit patterns that mark a buffer's guard regions (GUARD) and its not-yet-written elements (POISON).

A writable buffer (fuzz.model.guarded.Guarded) sits between guard regions, and what a kernel must write starts as
poison; after the call the verdict reads these bits back: a changed guard is an out-of-bounds write, poison left
where the contract says "written" is an unwritten output.
"""

from __future__ import annotations

import torch

# (bits view, GUARD, POISON): NaNs with payloads no arithmetic produces. The guards are signalling NaNs (quiet bit
# clear): whatever a kernel computes from a guard it read is quiet at least, so writing it back changes the bits (a
# CPU keeps a NaN's payload through arithmetic, a GPU returns its canonical NaN).
_BITS = {
    torch.float32: (torch.int32, 0x7FA0DEAD, 0x7FBAD0BA),
    torch.bfloat16: (torch.int16, 0x7F9E, 0x7FBA),
    torch.float16: (torch.int16, 0x7D1E, 0x7FBA),
}


def pattern(dtype: torch.dtype, which: str) -> int:
    return _BITS[dtype][1 if which == "guard" else 2]


def fill_pattern(t: torch.Tensor, which: str) -> torch.Tensor:
    t.view(_BITS[t.dtype][0]).fill_(pattern(t.dtype, which))
    return t


def has_pattern(t: torch.Tensor, which: str) -> torch.Tensor:
    """Elementwise: does t still hold the guard / poison bit pattern?"""
    return bits(t) == pattern(t.dtype, which)


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(_BITS[t.dtype][0])
