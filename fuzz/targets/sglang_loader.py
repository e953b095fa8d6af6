"""Load SGLang's Triton GDN kernels from the installed wheel without running any sglang ``__init__.py``.

``import sglang.<anything>`` first runs ``sglang/__init__.py`` and every package ``__init__`` on the way,
which pull in a whole serving stack. The kernel files themselves need only torch, triton and packaging,
so they are imported (fuzz.targets.wheel_import's mechanics) behind these stubs and patches (each lives under the
``sglang.`` name in sys.modules or inside the loaded kernel modules; nothing outside sglang is touched):

- empty packages (``sglang``, ``sglang.srt``, ... down to the kernel folders) whose ``__path__`` is the real
  directory: submodules load from the wheel, no ``__init__.py`` runs;
- ``sglang.srt.utils`` (is_cuda, is_hip, is_gfx95_supported, is_sm90_supported, get_device_sm): the real one
  imports half of PyPI; answered truthfully from torch, because SM90 changes the verify launch (BV=4);
- ``sglang.srt.utils.common.torch_release``: ``fla/utils.py`` picks its device-context helper by it;
- ``sglang.kernels.jit.utils.is_arch_support_pdl``: sm90+ CUDA turns on PDL launches; False when interpreted;
- interpreter only: ``fla/op.py`` binds ``exp = tl.exp``, a bare builtin that TRITON_INTERPRET=1 rejects
  ("Did you forget to add @triton.jit"), so op.exp becomes a @triton.jit wrapper before ``fused_recurrent`` imports
  it (the one op.py function the loaded kernels use);
- CPU-only hosts: ``input_guard`` enters ``custom_device_ctx`` = ``torch.cpu.device``, which does not exist,
  so it becomes a nullcontext.

The interpreter patch is decided by TRITON_INTERPRET at the first load; the result is cached per process.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import triton

from fuzz.targets.wheel_import import (
    WheelUnavailable,
    find_installed,
    import_errors_as,
    jit_math,
    register_packages,
    stub,
)

INSTALL_HINT = "pip install --no-deps sglang==0.5.23"

# (fla package, package holding fused_sigmoid_gating_recurrent / fused_gdn_gating), newest layout first.
LAYOUTS = (
    ("sglang.kernels.ops.attention.fla", "sglang.kernels.ops.attention.linear"),  # 0.5.23
    ("sglang.srt.layers.attention.fla", "sglang.srt.layers.attention.fla"),  # 0.5.12 and older
)


class SglangUnavailable(WheelUnavailable):
    """The SGLang kernels cannot be loaded; `reason` says what to do about it."""


@dataclass(frozen=True)
class SglangKernels:
    version: str
    source_dir: Path  # the installed sglang package directory
    packed_decode: Callable  # fused_recurrent_gated_delta_rule_packed_decode
    sigmoid_gating_update: Callable  # fused_sigmoid_gating_delta_rule_update
    recurrent_update: Callable  # fused_recurrent_gated_delta_rule_update
    gdn_gating: Callable | None  # fused_gdn_gating, None where the version lacks it


@functools.cache
def load_sglang_kernels() -> SglangKernels:
    root, version = _locate()
    fla, linear = _layout(root, version)
    register_packages(root, fla, linear, "sglang.srt", "sglang.kernels.jit")
    stub(
        "sglang.srt.utils",
        is_cuda=_is_cuda,
        is_hip=_is_hip,
        is_gfx95_supported=_is_gfx95,
        is_sm90_supported=_is_sm90,
        get_device_sm=_device_sm,
    )
    stub("sglang.srt.utils.common", torch_release=_release(torch.__version__))
    stub("sglang.kernels.jit.utils", is_arch_support_pdl=_supports_pdl)
    with import_errors_as(SglangUnavailable, f"sglang {version} at {root}", __name__):
        op = importlib.import_module(f"{fla}.op")
        if triton.knobs.runtime.interpret:
            op.exp = jit_math()["exp"]
        utils = importlib.import_module(f"{fla}.utils")
        if not hasattr(utils.device_torch_lib, "device"):
            utils.custom_device_ctx = lambda index: contextlib.nullcontext()
        recurrent = importlib.import_module(f"{fla}.fused_recurrent")
        sigmoid = importlib.import_module(f"{linear}.fused_sigmoid_gating_recurrent")
        has_gating = _has(root, linear, "fused_gdn_gating")
        gating = importlib.import_module(f"{linear}.fused_gdn_gating") if has_gating else None
    return SglangKernels(
        version=version,
        source_dir=root,
        packed_decode=recurrent.fused_recurrent_gated_delta_rule_packed_decode,
        sigmoid_gating_update=sigmoid.fused_sigmoid_gating_delta_rule_update,
        recurrent_update=recurrent.fused_recurrent_gated_delta_rule_update,
        gdn_gating=None if gating is None else gating.fused_gdn_gating,
    )


def _locate() -> tuple[Path, str]:
    """The directory `import sglang` would use and its version."""
    found = find_installed("sglang")
    if found is None:
        raise SglangUnavailable(f"sglang not installed: {INSTALL_HINT}")
    return found


def _layout(root: Path, version: str) -> tuple[str, str]:
    for fla, linear in LAYOUTS:
        needed = [(fla, m) for m in ("op", "utils", "fused_recurrent")] + [(linear, "fused_sigmoid_gating_recurrent")]
        if all(_has(root, pkg, m) for pkg, m in needed):
            return fla, linear
    raise SglangUnavailable(
        f"sglang {version} at {root}: unknown file layout (no fla/fused_recurrent.py under "
        f"kernels/ops/attention or srt/layers/attention); {INSTALL_HINT}"
    )


def _has(root: Path, package: str, module: str) -> bool:
    return root.joinpath(*package.split(".")[1:], f"{module}.py").is_file()


def _release(text: str) -> tuple[int, ...]:  # "2.13.0+cpu" -> (2, 13, 0)
    return tuple(int(p) for p in re.match(r"\d+(\.\d+)*", text).group().split("."))


def _is_cuda() -> bool:
    return torch.cuda.is_available() and torch.version.cuda is not None


def _is_hip() -> bool:
    return torch.version.hip is not None


@functools.cache
def _device_sm() -> int:
    major, minor = torch.cuda.get_device_capability() if torch.cuda.is_available() else (0, 0)
    return major * 10 + minor


def _is_gfx95() -> bool:
    return _is_hip() and "gfx95" in torch.cuda.get_device_properties(0).gcnArchName


def _is_sm90() -> bool:  # sglang: SM 9.x and CUDA >= 12.3
    return _is_cuda() and _device_sm() // 10 == 9 and _release(torch.version.cuda)[:2] >= (12, 3)


def _supports_pdl() -> bool:
    return not triton.knobs.runtime.interpret and _is_cuda() and _device_sm() >= 90
