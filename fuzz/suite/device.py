"""The device a run's processes use, settled before anything imports a target's library or initializes CUDA: on a CPU
profile the Triton interpreter; on a GPU profile, under pytest-xdist on a host with several GPUs, one GPU per worker."""

from __future__ import annotations

import os

from fuzz.generate.profiles import Profile


def prepare(profile: Profile, option: str = "--hypothesis-profile") -> None:
    """Set this process up for the profile's device; a ValueError in one line where it has none, naming the `option`
    that chose the profile (pytest's, or a command's --profile)."""
    if profile.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before any target imports triton
        return
    select_for_xdist_worker()  # before anything initializes CUDA
    import torch

    if not torch.cuda.is_available():
        raise ValueError(
            f"{option}={profile.name} runs on a CUDA GPU, and torch "
            f"{torch.__version__} sees none here; use {option}=ci or dev"
        )


def select_for_xdist_worker() -> None:
    """Under pytest-xdist on a host with several GPUs, worker gwN runs on GPU N mod count (of those CUDA_VISIBLE_DEVICES
    lists, if it is set), so `-n` a multiple of the GPUs puts as many workers on each. It must run before anything
    initializes CUDA: torch.cuda.device_count() asks NVML and leaves CUDA uninitialized."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")  # is_available() through NVML as well
    if len(devices := visible_gpus()) > 1:
        os.environ["CUDA_VISIBLE_DEVICES"] = devices[int(worker.removeprefix("gw")) % len(devices)]


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES entries, without initializing CUDA."""
    if (visible := os.environ.get("CUDA_VISIBLE_DEVICES")) is not None:
        return [d.strip() for d in visible.split(",") if d.strip()]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]
