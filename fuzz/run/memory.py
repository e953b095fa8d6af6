"""Device memory per check, and memory-heavy checks sharing a device by slots.

Several processes share a GPU in a scaled-out run: pytest-xdist workers placed on it, and each one's isolated worker
process (--gdn-isolate). An ordinary case needs megabytes, but a large-pool case (fuzz/test_large_pool.py: pools past
int32 element offsets, 4-8 GiB) or a large intermediate buffer (its float64 comparison) needs several GiB, and a few
of those at once exhaust the GPU: the out-of-memory error then lands in whichever process allocates next, where it
reads as a finding (a library call that raised is RejectedValidInput). So a check whose estimate
(fuzz.model.footprint.peak_bytes) exceeds HEAVY_BYTES first takes one memory slot of its device per HEAVY_BYTES of
it (`device_lock`: HEAVY_SHARE of the GPU's memory in slots, each an fcntl.flock on a file named after the GPU's UUID,
which every process sees whatever its CUDA_VISIBLE_DEVICES, in one directory (MEMORY_DIR) for every run of a host:
a campaign's runs of several releases share one pool per GPU; the kernel drops a lock when its holder exits or dies,
so a crashed worker never leaves it held), and before releasing them hands its freed blocks back to the device
(PyTorch's caching allocator keeps them otherwise). A check larger than the slots take them all: one at a time. On the
host there is one slot.

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

from fuzz.model.case import Case
from fuzz.model.footprint import peak_bytes
from fuzz.model.guarded import OFFSET_BITS

MEMORY_DIR = "GDN_MEMORY_DIR"  # where the slots' lock files live (default: the temporary directory); a campaign
# names one for all its runs, so its installations share each GPU's slots whatever their environments
HEAVY_BYTES = 4 << 30  # estimates above this take memory slots of this size (slots): a few at once per device
HEAVY_SHARE = 0.5  # of a GPU's memory, lent to heavy checks (an H200: 17 slots)


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
    root = os.environ.get(MEMORY_DIR) or tempfile.gettempdir()
    return Path(root) / f"gdn-fuzz-memory-{name}{f'.{slot}' if slot else ''}.lock"


def _identity(device: str | torch.device) -> str:
    """A name for the physical device: the GPU's UUID (the same in every process, whichever index
    CUDA_VISIBLE_DEVICES gives it there), or the device type for the host."""
    device = torch.device(device)
    if device.type != "cuda":
        return device.type
    index = torch.cuda.current_device() if device.index is None else device.index
    return str(torch.cuda.get_device_properties(index).uuid)
