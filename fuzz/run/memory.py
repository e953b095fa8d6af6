"""Device memory per check, and memory-heavy checks sharing a device by slots.

Several processes share a GPU in a scaled-out run: pytest-xdist workers placed on it, and each one's isolated worker
process (--gdn-isolate). An ordinary case needs megabytes, but a large-pool case (fuzz/test_large_pool.py: pools past
int32 element offsets, 4-8 GiB) or a large intermediate buffer (its float64 comparison) needs several GiB, and a few
of those at once exhaust the GPU: the out-of-memory error then lands in whichever process allocates next, where it
reads as a finding (a library call that raised is RejectedValidInput). So a check whose estimate (`peak_bytes`)
exceeds HEAVY_BYTES first takes one memory slot of its device per HEAVY_BYTES of it (`device_lock`: HEAVY_SHARE of
the GPU's memory in slots, each an fcntl.flock on a file named after the GPU's UUID, which every process sees whatever
its CUDA_VISIBLE_DEVICES; the kernel drops it when the holder exits or dies, so a crashed worker never leaves it
held), and before releasing them hands its freed blocks back to the device (PyTorch's caching allocator keeps them
otherwise). A check larger than the slots take them all: one at a time. On the host there is one slot.

Under --gdn-isolate the wait for the lock counts toward --gdn-timeout: a heavy check takes seconds on a GPU, so a
few workers queueing stay far below the default 120 s.
"""
from __future__ import annotations

import fcntl
import math
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from fuzz.case import TORCH_DTYPES, Case
from fuzz.generate.materialize import CHUNK, GUARD_SLOTS, OFFSET_BITS, lead_rows, named_slots

HEAVY_BYTES = 4 << 30  # estimates above this take memory slots of this size (slots): a few at once per device
HEAVY_SHARE = 0.5  # of a GPU's memory, lent to heavy checks (an H200: 17 slots)
F64 = 8  # the oracle and the verdict compute in float64
# The verdict's copies of the largest buffer it compares, alive at once: in float64 got, exact, model, and the error
# with its two temporaries (difference, absolute value); in the buffer's dtype got, exact and model gathered for the
# judged slots or rows, and the bits of the poison check.
COMPARE_F64_COPIES = 6
COMPARE_OWN_COPIES = 4
# Bytes per element of one filler block (materialize fills the pool, the verdict regenerates it to find changed
# slots, CHUNK elements at a time): the int64 element index and the hash's int64 temporaries, the float32 value,
# the block in the pool's dtype, the pool's bits and the comparison.
FILLER_BYTES_PER_ELEMENT = 48


def peak_bytes(case: Case, offset_bits: int = OFFSET_BITS) -> int:
    """An estimate of the device memory one check of `case` holds at its peak (fuzz.run.harness): the case's guarded
    buffers throughout, the oracle's two sparse results (float64 and the precision model) from the oracle on, and on
    top of them the largest transient of one stage: the oracle's working set, the warm-up call's own buffers, the
    verdict's float64 comparison, or the filler blocks that fill and check the pool. The library's own workspace is
    not counted (the GPU kernels work in place); tests/test_scaleout.py holds it to a check measured on the CPU."""
    warm = case.replace(pool=case.pool + case.warm_pool, warm_pool=0)
    transient = max(_oracle_working(case), _comparison(case), _filler_blocks(case),
                    _buffers(warm, offset_bits) if case.warm_pool else 0)
    return _buffers(case, offset_bits) + 2 * _oracle_result(case) + transient


def _sizes(case: Case) -> tuple[int, int, int]:
    """(state elements per slot, state dtype bytes, input dtype bytes)."""
    return (case.HV * case.K * case.V, TORCH_DTYPES[case.state_dtype].itemsize,
            TORCH_DTYPES[case.input_dtype].itemsize)


def _buffers(case: Case, offset_bits: int = OFFSET_BITS) -> int:
    """fuzz.generate.materialize: the pool with its guard slots and gaps, the intermediate buffer with its guard rows
    and spare steps (each with the guard below that a wrapped offset needs: lead_rows), the output with its guard
    rows, the inputs and gates, and the kept copy of the named slots."""
    state, st, inp = _sizes(case)
    tokens = sum(case.tokens)
    slot = (case.pool, case.HV + case.pool_gap, case.K * case.V)
    pool = (case.pool + lead_rows(slot, GUARD_SLOTS, offset_bits) + GUARD_SLOTS) * math.prod(slot[1:]) * st
    steps = (case.inter_rows, (case.inter_steps + case.inter_spare_steps) * state)
    inter = (case.inter_rows + lead_rows(steps, 1, offset_bits) + 1) * steps[1] * st if case.inter_rows else 0
    output = (tokens + 2) * case.HV * case.V * inp
    inputs = tokens * ((2 * case.H * case.K + case.HV * case.V + 2 * case.HV) * inp + 2 * case.HV * 4)
    return pool + inter + output + inputs + len(named_slots(case)) * state * st


def _steps(case: Case) -> int:
    return max(case.tokens, default=0)


def _oracle_result(case: Case) -> int:
    """One reference.batched result: the float64 output, the written states and intermediate rows."""
    state, st, _ = _sizes(case)
    rows = case.B * _steps(case) * state * st if case.inter_rows else 0
    return sum(case.tokens) * case.HV * case.V * F64 + case.B * state * st + rows


def _oracle_working(case: Case) -> int:
    """reference.batched._serve: the float64 states (S, the gathered slots converted, u k^T), the expanded float64
    inputs, the per-step banks of intermediate or per-token states and the final states in the pool's dtype."""
    state, st, _ = _sizes(case)
    per_step = case.B * _steps(case) * state * st * (bool(case.inter_rows) + (case.token_slots is not None))
    inputs = sum(case.tokens) * case.HV * (2 * case.K + 2 * case.V) * F64
    return 3 * case.B * state * F64 + inputs + per_step + case.B * state * st


def _comparison(case: Case) -> int:
    """fuzz.judge.verdict._compare on the largest buffer it judges: the output, the written states or the written
    intermediate rows."""
    state, st, inp = _sizes(case)
    rows = case.B * _steps(case) * state if case.inter_rows else 0
    judged = ((sum(case.tokens) * case.HV * case.V, inp), (case.B * state, st), (rows, st))
    return max(n * (COMPARE_F64_COPIES * F64 + COMPARE_OWN_COPIES * size) for n, size in judged)


def _filler_blocks(case: Case) -> int:
    state, _, _ = _sizes(case)
    return FILLER_BYTES_PER_ELEMENT * min(CHUNK, case.pool * state)


@contextmanager
def exclusive_if_heavy(case: Case, device: str | torch.device, offset_bits: int = OFFSET_BITS) -> Iterator[None]:
    """Run the body holding one memory slot (`device_lock`) per HEAVY_BYTES of the case's estimate when it exceeds
    HEAVY_BYTES, else as it is."""
    peak = peak_bytes(case, offset_bits)
    if peak <= HEAVY_BYTES:
        yield
        return
    with device_lock(device, math.ceil(peak / HEAVY_BYTES)):
        try:
            yield
        finally:
            if torch.device(device).type == "cuda":
                torch.cuda.empty_cache()  # the next holder, in another process, cannot use our cached blocks


def slots(device: str | torch.device) -> int:
    """Memory slots of HEAVY_BYTES a device lends heavy checks at once: HEAVY_SHARE of a GPU's memory (the rest is
    the ordinary checks' of every worker on it); one on the host."""
    device = torch.device(device)
    if device.type != "cuda":
        return 1
    index = torch.cuda.current_device() if device.index is None else device.index
    return max(1, int(torch.cuda.get_device_properties(index).total_memory * HEAVY_SHARE) // HEAVY_BYTES)


@contextmanager
def device_lock(device: str | torch.device, need: int | None = None) -> Iterator[None]:
    """`need` of the device's memory slots (None, or more than it has: all of them, an exclusive lock), across every
    process on this host, blocking until they are free. One slot is any free one; several are taken in order from the
    first (so two takers never hold part of each other's: no deadlock)."""
    count = slots(device)
    need = count if need is None else min(need, count)
    fds = []
    try:
        if need == 1 and count > 1:
            fds.append(_take_any(device, count))
        else:
            for i in range(need):
                fds.append(os.open(lock_path(device, i), os.O_RDWR | os.O_CREAT, 0o666))
                fcntl.flock(fds[-1], fcntl.LOCK_EX)
        yield
    finally:
        for fd in fds:
            os.close(fd)  # closing a descriptor releases its lock


def _take_any(device: str | torch.device, count: int) -> int:
    """A descriptor holding one free slot's lock: the first that is free now, else (blocking) one by the pid."""
    for i in range(count):
        fd = os.open(lock_path(device, i), os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            os.close(fd)
    fd = os.open(lock_path(device, os.getpid() % count), os.O_RDWR | os.O_CREAT, 0o666)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def lock_path(device: str | torch.device, slot: int = 0) -> Path:
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", _identity(device))
    return Path(tempfile.gettempdir()) / f"gdn-fuzz-memory-{name}{f'.{slot}' if slot else ''}.lock"


def _identity(device: str | torch.device) -> str:
    """A name for the physical device: the GPU's UUID (the same in every process, whichever index
    CUDA_VISIBLE_DEVICES gives it there), or the device type for the host."""
    device = torch.device(device)
    if device.type != "cuda":
        return device.type
    index = torch.cuda.current_device() if device.index is None else device.index
    return str(torch.cuda.get_device_properties(index).uuid)
