"""How many pytest-xdist workers a run gets: `--gdn-workers N|auto`, and `-n auto` on a GPU profile.

On a GPU a worker is a pytest process and its isolated check process (fuzz.run.worker): a CUDA context, the kernels
it loaded and an ordinary case's tensors (a case too large for that takes the per-GPU memory lock,
fuzz.run.memory). More workers feed more kernel paths at once until the GPU, the cores or the memory lock is the
bound; the count where distinct cases per minute peaked is measured per GPU model (an H100 of 80 GB and an H200 of
141 GB differ: memory bounds the heavy checks), and `auto` takes it (`SWEEPS`), capped by the cores and the free
memory of each GPU. A model no sweep measured keeps the rule used before there was one, and `auto_line` says so.
On a CPU profile `auto` is pytest-xdist's own choice (the cores). A campaign over several installations shares one
GPU's count among its runs (fuzz.cli.campaign).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class Sweep:
    """Workers per GPU for a GPU model: the sweep's peak (`measured`, None until a sweep ran there) and where it comes
    from; `rule`, the count taken until then."""

    measured: int | None
    source: str
    rule: int = 8  # DEFAULT_PEAK

    @property
    def workers(self) -> int:
        return self.rule if self.measured is None else self.measured


# GPU model (a substring of nvidia-smi's name, lower case) -> its sweep: 4, 8 and 16 workers with the memory lock
# on, the seven core FlashInfer fuzz tests from a warm kernel cache (docs/gpu-2026-12-06/speed.sh, whose table it
# prints: the count of the most distinct cases per minute of wall).
SWEEPS = MappingProxyType(
    {
        "h200": Sweep(
            None,
            "not measured (docs/gpu-2026-12-06/speed.sh has not run on an H200); 14, the one count measured "
            "(2026-12-03: 2,984 distinct cases per minute warm)",
            rule=14,
        ),
        "h100": Sweep(
            16,
            "measured 2026-12-06 on an H100 80GB HBM3 (docs/gpu-2026-12-06, 23-30 s per test): 4 workers 698, 8 958, "
            "16 1,291 distinct cases per minute of wall",
        ),
    }
)
DEFAULT_PEAK = 8  # a GPU model no sweep measured
DEFAULT = Sweep(None, "no sweep for this GPU model; the default 8", rule=DEFAULT_PEAK)
PEAK = MappingProxyType({model: sweep.workers for model, sweep in SWEEPS.items()})  # what `auto` takes per model
WORKER_BYTES = 4 << 30  # one worker's share of device memory: its context, loaded kernels and an ordinary case


def auto_workers(gpus: list[tuple[str, int]], cores: int) -> int:
    """Workers for these GPUs ((name, free bytes) each): per GPU its model's count, no more than its free memory holds,
    and no more than the cores in all."""
    per_gpu = [max(1, min(sweep_of(name).workers, free // WORKER_BYTES)) for name, free in gpus]
    return max(1, min(sum(per_gpu), cores))


def sweep_of(name: str) -> Sweep:
    low = name.lower()
    return next((s for key, s in SWEEPS.items() if key in low), DEFAULT)


def auto_line(gpus: list[tuple[str, int]], cores: int) -> str:
    """What `auto` chose and why, in one line: per GPU model its count, measured or not."""
    models = dict.fromkeys(name for name, _ in gpus)
    why = "; ".join(f"{name}: {sweep_of(name).workers} per GPU, {sweep_of(name).source}" for name in models)
    return f"--gdn-workers auto: {auto_workers(gpus, cores)} workers ({why}; capped by free memory and {cores} cores)"


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


def shared(total: int, runs: int) -> int:
    """Workers each of `runs` runs sharing one GPU at once gets of `total`, the GPU's count: at least one."""
    return max(1, total // max(runs, 1))


__all__ = [
    "DEFAULT_PEAK",
    "PEAK",
    "SWEEPS",
    "WORKER_BYTES",
    "Sweep",
    "auto_line",
    "auto_workers",
    "resolve",
    "shared",
    "visible_gpus",
]
