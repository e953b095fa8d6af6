"""Load vLLM's spec-decode GDN Triton kernels from the installed wheel without running any vllm ``__init__.py``
(shared/research/serving-glue.md §3.4).

    k = load_vllm_kernels()         # cached per process; VllmUnavailable(reason) when it cannot load
    k.version, k.source_dir
    k.fused_recurrent(q, k, v, g, beta, scale, initial_state, inplace_final_state, cu_seqlens, ssm_state_indices,
                      num_accepted_tokens, use_qk_l2norm_in_kernel)              # -> (o, final_state)
    k.sigmoid_gating_update(A_log, a, b, dt_bias, q, k, v, beta, threshold, scale, initial_state, inplace_final_state,
                            cu_seqlens, ssm_state_indices, num_accepted_tokens, use_qk_l2norm_in_kernel, is_kda)
    k.mtp_decode(mixed_qkv, a, b, A_log, dt_bias, state_indices, cu_seqlens, num_accepted_tokens, state,
                 output_gate, norm_weight, out, scale, norm_eps, output_gate_activation)   # the Triton MTP port
    k.gated_rmsnorm(x, weight, bias, z=None, eps, group_size, norm_before_gate, activation)  # vLLM's RMSNormGated
                                                                                             # on CUDA (rmsnorm_fn)

`import vllm.<anything>` runs vllm/__init__.py (the engine), so the kernel files are imported behind empty packages
(vllm, vllm.third_party, vllm.third_party.flash_linear_attention and ops, vllm.utils, vllm.model_executor and
warmup, with their real `__path__`, so no `__init__.py` runs; ops/__init__.py would import chunk) and these stubs,
each under a vllm name in sys.modules:
  * `vllm.triton_utils` (triton, tl, tldevice, HAS_TRITON): the real one resolves the platform and may patch
    Triton's autotuner;
  * `vllm.platforms.current_platform`: is_cuda, is_rocm, is_cuda_alike, device name, capability and the
    capability tests, num_compute_units, answered truthfully from torch (they pick tile sizes: BV on SM90 / SM100);
  * `vllm.utils.platform_utils` (cuda_get_device_properties, num_compute_units): the real one imports `regex`;
  * under TRITON_INTERPRET=1, `ops/op.py`'s bare `exp = tl.exp` / `log = tl.log` become @triton.jit wrappers
    (fuzz.targets.wheel_import.jit_math), before fused_recurrent imports them.
vllm.envs, vllm.utils.math_utils and the warmup modules that layernorm_guard imports are vLLM's own (stdlib only).
On a CPU `num_compute_units` is CPU_COMPUTE_UNITS (an H100's SMs), so the MTP port tiles V as it would there.
All four run on the CPU under the interpreter, the MTP port too (it asserts V a power of 2 >= 64). What they do with
padding (tests/targets/test_glue_loaders.py): a slot <= 0 (the null block) skips the row before any output store, so
its output is the caller's `new_empty` memory; the MTP port writes zeros there instead.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import torch
import triton
import triton.language as tl
import triton.language.extra.libdevice as tldevice

from fuzz.targets.wheel_import import (
    WheelUnavailable,
    find_installed,
    import_errors_as,
    jit_math,
    register_packages,
    stub,
)

INSTALL_HINT = "pip install --no-deps vllm==0.34.0"
OPS = "vllm.third_party.flash_linear_attention.ops"
PACKAGES = (OPS, "vllm.utils", "vllm.model_executor.warmup")
CPU_COMPUTE_UNITS = 132


class VllmUnavailable(WheelUnavailable):
    """The vLLM kernels cannot be loaded; `reason` says what to do about it."""


@dataclass(frozen=True)
class VllmKernels:
    version: str
    source_dir: Path  # the installed vllm package directory
    fused_recurrent: Callable  # fused_recurrent.fused_recurrent_gated_delta_rule
    sigmoid_gating_update: Callable  # fused_sigmoid_gating.fused_sigmoid_gating_delta_rule_update
    mtp_decode: Callable  # fused_gdn_decode_post_conv_mtp.fused_gdn_decode_post_conv_mtp_triton (ROCm's route)
    gated_rmsnorm: Callable  # layernorm_guard.rmsnorm_fn: RMSNormGated.forward_cuda's kernel


@functools.cache
def load_vllm_kernels() -> VllmKernels:
    root, version = _locate()
    register_packages(root, *PACKAGES)
    stub("vllm.triton_utils", triton=triton, tl=tl, tldevice=tldevice, HAS_TRITON=True)
    stub("vllm.platforms", current_platform=TorchPlatform())
    stub("vllm.utils.platform_utils", cuda_get_device_properties=_device_properties, num_compute_units=_compute_units)
    with import_errors_as(VllmUnavailable, f"vllm {version} at {root}", __name__):
        op = importlib.import_module(f"{OPS}.op")
        if triton.knobs.runtime.interpret:
            op.exp, op.log = jit_math()["exp"], jit_math()["log"]
        return VllmKernels(  # the kernel files imported in this order, after op's patch
            version=version,
            source_dir=root,
            fused_recurrent=_kernel("fused_recurrent", "fused_recurrent_gated_delta_rule"),
            sigmoid_gating_update=_kernel("fused_sigmoid_gating", "fused_sigmoid_gating_delta_rule_update"),
            mtp_decode=_kernel("fused_gdn_decode_post_conv_mtp", "fused_gdn_decode_post_conv_mtp_triton"),
            gated_rmsnorm=_kernel("layernorm_guard", "rmsnorm_fn"),
        )


def _kernel(module: str, function: str) -> Callable:
    """`function` of the kernel file OPS.`module`, imported from the wheel."""
    return getattr(importlib.import_module(f"{OPS}.{module}"), function)


def _locate() -> tuple[Path, str]:
    found = find_installed("vllm")
    if found is None:
        raise VllmUnavailable(f"vllm not installed: {INSTALL_HINT}")
    root, version = found
    if not root.joinpath(*OPS.split(".")[1:], "fused_recurrent.py").is_file():
        raise VllmUnavailable(f"vllm {version} at {root}: no {OPS} (the layout of 0.34.0); {INSTALL_HINT}")
    return root, version


class Capability(NamedTuple):
    """vllm.platforms.interface.DeviceCapability's fields and to_int."""

    major: int
    minor: int

    def to_int(self) -> int:
        return self.major * 10 + self.minor


class TorchPlatform(object):  # noqa: UP004 - a base from outside: an exported script keeps every method vLLM calls
    """vllm.platforms.current_platform as far as the GDN kernel files ask it, answered from torch."""

    def is_cuda(self) -> bool:
        return torch.cuda.is_available() and torch.version.cuda is not None

    def is_rocm(self) -> bool:
        return torch.cuda.is_available() and torch.version.hip is not None

    def is_cuda_alike(self) -> bool:
        return self.is_cuda() or self.is_rocm()

    def get_device_name(self, device_id: int = 0) -> str:
        return torch.cuda.get_device_name(device_id) if torch.cuda.is_available() else "cpu"

    def get_device_capability(self, device_id: int = 0) -> Capability | None:
        return Capability(*torch.cuda.get_device_capability(device_id)) if torch.cuda.is_available() else None

    def has_device_capability(self, capability, device_id: int = 0) -> bool:
        current = self.get_device_capability(device_id)
        return current is not None and _compare(current, capability) >= 0

    def is_device_capability(self, capability, device_id: int = 0) -> bool:
        current = self.get_device_capability(device_id)
        return current is not None and _compare(current, capability) == 0

    def is_device_capability_family(self, capability: int, device_id: int = 0) -> bool:
        current = self.get_device_capability(device_id)
        return current is not None and current.to_int() // 10 == capability // 10

    def num_compute_units(self, device_id: int = 0) -> int:
        return _compute_units(device_id)


def _compare(current: Capability, capability) -> int:
    """-1, 0, 1: `current` against a (major, minor) tuple or a <major><minor> int, as vLLM compares them."""
    if isinstance(capability, tuple):
        mine, theirs = tuple(current), tuple(capability)
    else:
        mine, theirs = current.to_int(), capability
    return (mine > theirs) - (mine < theirs)


def _compute_units(device_id: int | None = 0) -> int:
    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(device_id or 0).multi_processor_count
    return CPU_COMPUTE_UNITS


def _device_properties(device, names, init_cuda=False) -> tuple:
    properties = torch.cuda.get_device_properties(device)
    return tuple(getattr(properties, name) for name in names)
