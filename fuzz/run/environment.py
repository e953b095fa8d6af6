"""Where a run happened: GPU, driver, CUDA, Python, torch, Triton, Hypothesis and the kernel libraries' versions.
Recorded in the run report and in corpus entries, printed by exported scripts, put in upstream issue bodies."""

from __future__ import annotations

import importlib.metadata
import platform

from fuzz.model.dispatch import nvidia_smi

LIBRARIES = (
    "torch",
    "triton",
    "hypothesis",
    "flashinfer-python",
    "nvidia-cutlass-dsl",
    "apache-tvm-ffi",
    "fla-core",
    "sglang",
    "vllm",
)


def environment() -> dict:
    import torch

    env = {"python": platform.python_version(), "platform": platform.platform(terse=True)}
    for dist in LIBRARIES:
        try:
            env[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    env["torch"] = torch.__version__
    env["cuda"] = torch.version.cuda
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        env["gpu"] = (
            f"{props.name} (sm_{props.major}{props.minor}, {props.multi_processor_count} SMs, "
            f"{props.total_memory // 2**20} MiB)"
        )
        env["driver"] = _driver()
    else:
        env["gpu"] = None
    return env


def _driver() -> str | None:
    out = nvidia_smi("--query-gpu=driver_version", "--format=csv,noheader", timeout=10)
    return out.strip().splitlines()[0] if out and out.strip() else None


def markdown_table(env: dict) -> str:
    return "| | |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in env.items() if v is not None)
