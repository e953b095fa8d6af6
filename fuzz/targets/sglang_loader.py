"""Load SGLang's Triton GDN kernels from the installed wheel without running any sglang ``__init__.py``.

``import sglang.<anything>`` first runs ``sglang/__init__.py`` and every package ``__init__`` on the way,
which pull in a whole serving stack. The kernel files themselves need only torch, triton and packaging,
so they are imported behind these stubs and patches (each lives under the ``sglang.`` name in sys.modules
or inside the loaded kernel modules; nothing outside sglang is touched):

- empty packages (``sglang``, ``sglang.srt``, ... down to the kernel folders) whose ``__path__`` is the real
  directory: submodules load from the wheel, no ``__init__.py`` runs;
- ``sglang.srt.utils`` (is_cuda, is_hip, is_gfx95_supported, is_sm90_supported, get_device_sm): the real one
  imports half of PyPI; answered truthfully from torch, because SM90 changes the verify launch (BV=4);
- ``sglang.srt.utils.common.torch_release``: ``fla/utils.py`` picks its device-context helper by it;
- ``sglang.kernels.jit.utils.is_arch_support_pdl``: sm90+ CUDA turns on PDL launches; False when interpreted;
- interpreter only: ``fla/op.py`` binds ``exp = tl.exp``, a bare builtin that TRITON_INTERPRET=1 rejects
  ("Did you forget to add @triton.jit"), so op.exp/exp2/log/log2 become @triton.jit wrappers before
  ``fused_recurrent`` imports ``exp``;
- CPU-only hosts: ``input_guard`` enters ``custom_device_ctx`` = ``torch.cpu.device``, which does not exist,
  so it becomes a nullcontext.

The interpreter patch is decided by TRITON_INTERPRET at the first load; the result is cached per process.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
import re
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import triton
import triton.language as tl

INSTALL_HINT = "pip install --no-deps sglang==0.5.23"

# (fla package, package holding fused_sigmoid_gating_recurrent / fused_gdn_gating), newest layout first.
LAYOUTS = (
    ("sglang.kernels.ops.attention.fla", "sglang.kernels.ops.attention.linear"),  # 0.5.23
    ("sglang.srt.layers.attention.fla", "sglang.srt.layers.attention.fla"),  # 0.5.12 and older
)


class SglangUnavailable(RuntimeError):
    """The SGLang kernels cannot be loaded; `reason` says what to do about it."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


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
    for name in {p for pkg in (fla, linear, "sglang.srt", "sglang.kernels.jit") for p in _prefixes(pkg)}:
        sys.modules.setdefault(name, _package(name, root))
    _stub(
        "sglang.srt.utils",
        is_cuda=_is_cuda,
        is_hip=_is_hip,
        is_gfx95_supported=_is_gfx95,
        is_sm90_supported=_is_sm90,
        get_device_sm=_device_sm,
    )
    _stub("sglang.srt.utils.common", torch_release=_release(torch.__version__))
    _stub("sglang.kernels.jit.utils", is_arch_support_pdl=_supports_pdl)
    try:
        op = importlib.import_module(f"{fla}.op")
        if triton.knobs.runtime.interpret:
            op.exp, op.exp2, op.log, op.log2 = _exp, _exp2, _log, _log2
        utils = importlib.import_module(f"{fla}.utils")
        if not hasattr(utils.device_torch_lib, "device"):
            utils.custom_device_ctx = lambda index: contextlib.nullcontext()
        recurrent = importlib.import_module(f"{fla}.fused_recurrent")
        sigmoid = importlib.import_module(f"{linear}.fused_sigmoid_gating_recurrent")
        has_gating = _has(root, linear, "fused_gdn_gating")
        gating = importlib.import_module(f"{linear}.fused_gdn_gating") if has_gating else None
    except ImportError as e:
        raise SglangUnavailable(
            f"sglang {version} at {root}: a kernel file needs {e.name or e}, which is neither "
            f"installed nor stubbed in {__name__}"
        ) from e
    return SglangKernels(
        version=version,
        source_dir=root,
        packed_decode=recurrent.fused_recurrent_gated_delta_rule_packed_decode,
        sigmoid_gating_update=sigmoid.fused_sigmoid_gating_delta_rule_update,
        recurrent_update=recurrent.fused_recurrent_gated_delta_rule_update,
        gdn_gating=None if gating is None else gating.fused_gdn_gating,
    )


def _locate() -> tuple[Path, str]:
    """The directory `import sglang` would use (find_spec runs no code for a top-level package) and its version."""
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        raise SglangUnavailable(f"sglang not installed: {INSTALL_HINT}")
    try:
        version = importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return Path(spec.submodule_search_locations[0]), version


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


def _prefixes(dotted: str) -> list[str]:
    parts = dotted.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _package(name: str, root: Path) -> types.ModuleType:
    spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
    spec.submodule_search_locations = [str(root.joinpath(*name.split(".")[1:]))]
    return importlib.util.module_from_spec(spec)


def _stub(name: str, **attrs) -> None:
    module = sys.modules.setdefault(name, types.ModuleType(name))
    for key, value in attrs.items():
        if not hasattr(module, key):
            setattr(module, key, value)


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


@triton.jit
def _exp(x):
    return tl.exp(x)


@triton.jit
def _exp2(x):
    return tl.exp2(x)


@triton.jit
def _log(x):
    return tl.log(x)


@triton.jit
def _log2(x):
    return tl.log2(x)
