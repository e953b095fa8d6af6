"""Values from a seed that are the same on every device: value i of stream s is a function of (seed, s, i) alone.

torch's generators give other numbers on a CPU and on each GPU (CUDA's depend on the launch shape), and building a
case's tensors on the host, then copying them over, costs more than the kernel. Here every value is an integer hash
of its index, computed with exact int64 tensor operations where the tensor lives, then turned into a float by exact
float32 operations (a 24-bit integer to float, sums and products rounded the same way by every IEEE device; no
transcendental function, no fused multiply-add). So a case's tensors are bit-identical on a CPU, an H200 and a B200,
and any block of a large tensor (a pool's filler) can be regenerated on its own to check it was left untouched.

Streams are taken in call order, so materialize() stays reproducible as long as it asks in the same order.
"""

from __future__ import annotations

import math

import torch

_M32 = 0xFFFFFFFF
_MUL = 0x45D9F3B  # < 2**31: a 32-bit value times it stays below 2**63 in int64
_SQRT3 = math.sqrt(3.0)


def _hash(x):
    """A 32-bit integer mix of values in [0, 2**32): Python ints, the arithmetic `_mix` does in place."""
    x = ((x >> 16) ^ x) * _MUL & _M32
    x = ((x >> 16) ^ x) * _MUL & _M32
    return (x >> 16) ^ x


def _mix(x: torch.Tensor) -> torch.Tensor:
    """`_hash` of an int64 tensor, in place: the same values with a third of the temporaries (a pool's filler and a
    case's values are tens of millions of elements, and this is most of building them)."""
    for _ in range(2):
        x.bitwise_xor_(x >> 16).mul_(_MUL).bitwise_and_(_M32)
    return x.bitwise_xor_(x >> 16)


def _key(seed: int, stream: int) -> int:
    return _hash(_hash((seed ^ (stream * 0x9E3779B9)) & _M32) ^ (stream & _M32))


class Values:
    """Draws of one case: uniform and normal-like float32 tensors, integer choices, on `device`."""

    def __init__(self, seed: int, device: str | torch.device):
        self.seed, self.device, self.stream = seed & _M32, torch.device(device), 0

    def bits(self, numel: int, start: int = 0, stream: int | None = None) -> torch.Tensor:
        """Elements start..start+numel of a stream (the next one if None) as 32-bit hashes in int64."""
        if stream is None:
            stream, self.stream = self.stream, self.stream + 1
        index = torch.arange(start, start + numel, dtype=torch.int64, device=self.device)
        if start + numel <= 2**32:  # the high word is zero: index & _M32 is the index, its term is zero
            return _mix(index.bitwise_xor_(_key(self.seed, stream)))
        return _mix((index & _M32).bitwise_xor_(_key(self.seed, stream)).bitwise_xor_((index >> 32) * _MUL & _M32))

    def uniform(self, lo: float, hi: float, *shape: int) -> torch.Tensor:
        """Uniform in [lo, hi): 24-bit steps."""
        u = (self.bits(math.prod(shape)) >> 8).to(torch.float32) * 2.0**-24
        return (lo + (hi - lo) * u).reshape(shape)

    def normal(self, *shape: int) -> torch.Tensor:
        """Mean 0, variance 1: the sum of four uniforms, centred and scaled (bell-shaped, |x| < 3.47)."""
        s = sum((self.bits(math.prod(shape)) >> 8).to(torch.float32) for _ in range(4)) * 2.0**-24
        return ((s - 2.0) * _SQRT3).reshape(shape)

    def integers(self, n: int, *shape: int) -> torch.Tensor:
        """Integers in [0, n), int64."""
        return (self.bits(math.prod(shape)) % n).reshape(shape)

    def filler(self, numel: int, start: int = 0, stream: int = 0xF111) -> torch.Tensor:
        """Uniform in [-1, 1) from a fixed stream, addressable by element: any block can be regenerated alone."""
        return (self.bits(numel, start, stream) >> 8).to(torch.float32) * 2.0**-23 - 1.0
