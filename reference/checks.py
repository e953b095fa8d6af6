"""Argument validation: every bad input raises ValueError naming the argument and what was expected."""
from __future__ import annotations

import torch


def expect_shape(name: str, x: torch.Tensor, shape: tuple, what: str) -> None:
    """`shape` entries are ints or None (any size); `what` spells the contract, e.g. '[B, T, H, K]'."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name}: expected a tensor of shape {what}, got {type(x).__name__}")
    if x.dim() != len(shape) or any(s is not None and s != d for s, d in zip(shape, x.shape)):
        raise ValueError(f"{name}: expected shape {what} = {_fmt(shape)}, got {list(x.shape)}")


def expect_index(name: str, x: torch.Tensor, shape: tuple, what: str) -> None:
    expect_shape(name, x, shape, what)
    if x.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"{name}: expected an int32 or int64 index tensor {what}, got {x.dtype}")


def head_groups(H: int, HV: int) -> int:
    """Value heads per qk head; value head hv reads qk head hv // groups."""
    if H <= 0 or HV % H != 0:
        raise ValueError(f"q/k heads H={H} and v heads HV={HV}: expected HV to be a multiple of H")
    return HV // H


def _fmt(shape: tuple) -> str:
    return "[" + ", ".join("*" if s is None else str(s) for s in shape) + "]"
