"""How many pytest-xdist workers a run gets: `--gdn-workers N|auto`, and `-n auto` on a GPU profile.

On a GPU a worker is a pytest process and its isolated check process (fuzz.run.worker): a CUDA context, the kernels
it loaded and an ordinary case's tensors (a case too large for that takes the per-GPU memory lock,
fuzz.run.memory). More workers feed more kernel paths at once until the GPU, the cores or the memory lock is the
bound; the count where distinct cases per minute peaked on a GPU kind is data (PEAK), and `auto` takes it, capped by
the cores and the free memory of each GPU.
On a CPU profile `auto` is pytest-xdist's own choice (the cores).
"""

from __future__ import annotations

import os

# GPU name (as nvidia-smi names it, lower case, a substring) -> workers per GPU. H200: 14 is the one count measured
# (2026-12-03: 2,984 distinct cases per minute warm, docs/h200-results-2026-12-03-speed.md); the sweep over 4, 8, 16
# and 32 that is to replace it with the peak is docs/h200-2026-12-03b/call2.sh, not run yet (device time).
PEAK = {"h200": 14}
DEFAULT_PEAK = 8  # a GPU no sweep measured
WORKER_BYTES = 4 << 30  # one worker's share of device memory: its context, loaded kernels and an ordinary case


def auto_workers(gpus: list[tuple[str, int]], cores: int) -> int:
    """Workers for these GPUs ((name, free bytes) each): per GPU its measured peak, no more than its free memory holds,
    and no more than the cores in all."""
    per_gpu = [max(1, min(_peak(name), free // WORKER_BYTES)) for name, free in gpus]
    return max(1, min(sum(per_gpu), cores))


def _peak(name: str) -> int:
    low = name.lower()
    return next((n for key, n in PEAK.items() if key in low), DEFAULT_PEAK)


def visible_gpus() -> list[tuple[str, int]]:
    """(name, free bytes) of each GPU this process may use, from nvidia-smi (no CUDA context here: the workers need
    theirs), else torch."""
    from fuzz.model.dispatch import nvidia_smi

    out = nvidia_smi("--query-gpu=index,name,memory.free", "--format=csv,noheader,nounits")
    if out is None:
        import torch

        return [
            (torch.cuda.get_device_name(i), torch.cuda.mem_get_info(i)[0]) for i in range(torch.cuda.device_count())
        ]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    chosen = None if visible is None else {v.strip() for v in visible.split(",") if v.strip()}
    rows = [line.split(",") for line in out.strip().splitlines() if line.strip()]
    return [(name.strip(), int(free) << 20) for index, name, free in rows if chosen is None or index.strip() in chosen]


def resolve(value: str, device: str) -> int:
    """--gdn-workers: a positive count as given, or `auto`: auto_workers on a GPU profile, the cores on a CPU one."""
    if value != "auto":
        try:
            count = int(value)
        except ValueError:
            count = 0
        if count < 1:
            raise ValueError(f"--gdn-workers={value}: expected a positive count or 'auto'")
        return count
    cores = os.cpu_count() or 1
    if device == "cpu":
        return cores
    gpus = visible_gpus()
    if not gpus:
        raise ValueError("--gdn-workers=auto: this profile runs on a GPU, and none is visible here")
    return auto_workers(gpus, cores)


__all__ = ["PEAK", "WORKER_BYTES", "auto_workers", "resolve", "visible_gpus"]
