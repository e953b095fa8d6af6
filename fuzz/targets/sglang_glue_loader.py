"""Load SGLang's GDN kernel glue from the installed wheel: the layer between the GDN backend and the kernels, which
takes plain tensors (pools, slot maps, verify scratch) and owns their index handling, scratch slicing, copy-back,
alignment fallback and dtype casts (shared/research/serving-glue.md §1.3, §2.2).

    glue = load_sglang_glue()                  # cached per process; SglangUnavailable(reason) when it cannot load
    glue.version, glue.source_dir              # the installed sglang
    glue.TritonGDNKernel()                     # decode / packed_decode / target_verify / extend (gdn_triton.py)
    glue.flashinfer_kernel(9)                  # FlashInferGDNKernel on this CUDA GPU (9 must be its major)
    glue.flashinfer_kernel(10, api=STANDIN)    # FlashInferGDNKernel for SM100 on a FlashInfer stand-in (CPU)
    glue.scatter(dst, src, dst_idx, steps, src_rows=None)   # fused_mamba_state_scatter_with_mask: CUDA/XPU only
    glue.scatter_kernel                        # its raw Triton kernel (_fused_mamba_state_scatter_with_mask_kernel)
    glue.launch_scatter(dst, src, dst_idx, steps, src_rows=None)  # the raw kernel launched as the wrapper does,
                                               # on any device (CPU: under TRITON_INTERPRET=1)

Loading: fuzz.targets.sglang_loader's empty packages and stubs, plus what the glue modules import beyond the kernel
files: `sglang.srt.utils.is_cpu / is_npu / is_xpu` (False: True would route gdn_triton to sgl_kernel's CPU ops),
`sglang.srt.runtime_context.mamba_cache_chunk_size` (the real module imports msgspec and the server's arg groups;
it is read only when planning prefill checkpoints) and `sglang.srt.utils.common.get_device_core_count` (the scatter
module's grid sizing for another kernel). `FlashInferGDNKernel()` builds a `TritonGDNKernel` too (its fallback for
a misaligned pool), so the FlashInfer glue needs the Triton kernels loaded either way.

FlashInfer behind the glue (`flashinfer_kernel`):
  * api=None: the installed FlashInfer, imported by the glue itself, on the GPU's own arch. The glue reads the arch
    from the device, so another arch cannot be constructed there (SglangUnavailable says so).
  * api=a module path ("module[:attribute]", as `--gdn-target` takes) or an object exposing GLUE_API's four names
    (fuzz.standins.flashinfer_glue_cpu does, on the CPU): the glue's lazy-import cache (module globals of
    gdn_flashinfer, GLUE_API's keys) is set to them and `torch.cuda.get_device_capability` answers (arch, 0) only
    while the kernel is constructed, then both are put back: nothing is added under `flashinfer.*` in sys.modules
    (the project's FlashInfer family still sees what is installed), and the fake arch does not outlive
    construction. The kernel keeps the functions it was built with; the arch decides its paths in __init__ only
    (use_state_pool for 10+, supports_target_verify for 9 and 10). The glue's own availability rule is applied
    (FlashInfer GDN needs arch 9+), its import code is not run.

On the CPU the Triton glue runs interpreted (TRITON_INTERPRET=1 before triton is imported); its `extend` (fla's
chunked kernel) gives wrong numbers there (serving-glue.md §2.3), so only decode, packed_decode and target_verify
are usable. Where the glue sends a padding row (-1), as tests/targets/test_glue_loaders.py pins it: Triton skips it
(verify: its scratch row gets the zero-state run); FlashInfer SM90 decode indexes the pool with -1 in Python and so
reads and writes the last slot, SM90 extend remaps -1 to the last slot, SM100 decode and verify hand -1 to the bf16
kernel (slot 0), SM100 extend clamps it to slot 0.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import torch
import triton

from fuzz.targets.sglang_loader import SglangUnavailable, load_sglang_kernels
from fuzz.targets.wheel_import import import_errors_as, register_packages, stub

GLUE = "sglang.srt.layers.attention.linear.kernels"
SCATTER = "sglang.kernels.ops.mamba.mamba_state_scatter_triton"
STANDIN = "fuzz.standins.flashinfer_glue_cpu"  # the CPU stand-in an `api` may name
FLASHINFER_HINT = "pip install 'gdn-fuzz[flashinfer]'"
# gdn_flashinfer's lazy-import cache (module globals) -> the attribute of an `api` that fills it
GLUE_API = {
    "_flashinfer_chunk_gated_delta_rule": "chunk_gated_delta_rule",
    "_flashinfer_gated_delta_rule_mtp": "gated_delta_rule_mtp",
    "_flashinfer_gated_delta_rule_decode": "gated_delta_rule_decode_pretranspose",
    "_flashinfer_gated_delta_rule_mtp_bf16": "gated_delta_rule_mtp_bf16",
}
# where the glue imports each from on a GPU (`from flashinfer.<module> import <name>`)
FLASHINFER_MODULES = ("flashinfer.gdn_decode", "flashinfer.gdn_kernels.gdn_decode_bf16_state", "flashinfer.gdn_prefill")
SCATTER_BLOCK = 1024  # the wrapper's BLOCK_SIZE


@dataclass(frozen=True)
class SglangGlue:
    version: str
    source_dir: Path  # the installed sglang package directory
    triton_glue: ModuleType  # gdn_triton
    flashinfer_glue: ModuleType  # gdn_flashinfer: its lazy-import cache is what flashinfer_kernel fills
    scatter: Callable  # fused_mamba_state_scatter_with_mask: the commit after verify (refuses non-CUDA tensors)
    scatter_kernel: object  # _fused_mamba_state_scatter_with_mask_kernel, the Triton kernel the wrapper launches

    @property
    def TritonGDNKernel(self) -> type:
        return self.triton_glue.TritonGDNKernel

    @property
    def FlashInferGDNKernel(self) -> type:
        """Construct it with flashinfer_kernel: the FlashInfer and the arch it runs on are set while it is built."""
        return self.flashinfer_glue.FlashInferGDNKernel

    def flashinfer_kernel(self, arch: int, api: str | object | None = None, kernel_class: type | None = None):
        """A FlashInferGDNKernel for SM `arch` (the major: 9, 10, 12); api None: the installed FlashInfer on this
        GPU, else the module path or object whose GLUE_API functions stand in for FlashInfer (see the module doc).
        `kernel_class`: a class built in its place the same way (a glue-level mutant subclassing the real one)."""
        kernel_class = kernel_class or self.FlashInferGDNKernel
        if api is None:
            return _on_gpu(kernel_class, arch)
        functions = _glue_api(api)
        with _faked_flashinfer(self.flashinfer_glue, functions, arch):
            return _construct(kernel_class, f"FlashInferGDNKernel for SM{arch}0 on {_name(api)}")

    def launch_scatter(self, dst, src, dst_indices_raw, step_indices_raw, src_indices_raw=None) -> None:
        """`scatter`'s launch of `scatter_kernel` for tensors on any device: on the CPU it replaces the wrapper,
        whose device check refuses CPU tensors. The same grid (requests, layers, ceil(entry / 1024)), strides, int32
        index conversion and default source rows (arange over the requests); the wrapper's shape and layout checks
        are kept (ValueError), its device check is not. For valid rows (step >= 0, dst, src and step in range):
        dst[:, dst_indices_raw[i]] = src[:, src_rows[i], step_indices_raw[i]]."""
        total = step_indices_raw.shape[0]
        if total == 0:
            return
        _check_scatter(dst, src, dst_indices_raw, step_indices_raw)
        steps = step_indices_raw.to(torch.int32).contiguous()
        rows = src_indices_raw
        if rows is None:
            rows = torch.arange(total, dtype=torch.int32, device=steps.device)
        if rows.ndim != 1 or rows.shape != steps.shape:
            raise ValueError(f"source indices length mismatch: {rows.shape=} vs {steps.shape=}")
        entry = dst.numel() // (dst.shape[0] * dst.shape[1])
        self.scatter_kernel[(total, dst.shape[0], triton.cdiv(entry, SCATTER_BLOCK))](
            src,
            dst,
            dst_indices_raw.to(torch.int32).contiguous(),
            steps,
            rows.to(torch.int32).contiguous(),
            entry,
            src.stride(0),
            src.stride(1),
            src.stride(2),
            dst.stride(0),
            dst.stride(1),
            src.shape[1],
            src.shape[2],
            dst.shape[1],
            BLOCK_SIZE=SCATTER_BLOCK,
        )


@functools.cache
def load_sglang_glue() -> SglangGlue:
    kernels = load_sglang_kernels()  # the kernel files' packages, stubs and interpreter patches
    register_packages(kernels.source_dir, GLUE, SCATTER.rpartition(".")[0], "sglang.kernels.ops.memory")
    stub("sglang.srt.utils", is_cpu=_no, is_npu=_no, is_xpu=_no)
    stub("sglang.srt.runtime_context", mamba_cache_chunk_size=_checkpoint_chunk)
    stub("sglang.srt.utils.common", get_device_core_count=_core_count)
    where = f"sglang {kernels.version} at {kernels.source_dir}"
    with import_errors_as(SglangUnavailable, where, __name__, what="the GDN glue"):
        triton_glue = importlib.import_module(f"{GLUE}.gdn_triton")
        flashinfer_glue = importlib.import_module(f"{GLUE}.gdn_flashinfer")
        scatter = importlib.import_module(SCATTER)
    return SglangGlue(
        version=kernels.version,
        source_dir=kernels.source_dir,
        triton_glue=triton_glue,
        flashinfer_glue=flashinfer_glue,
        scatter=scatter.fused_mamba_state_scatter_with_mask,
        scatter_kernel=scatter._fused_mamba_state_scatter_with_mask_kernel,
    )


def glue_kernel(kernel_class: type, arch: int | None, device: str):
    """The glue object as a server builds it, one per backend: `kernel_class()` for the Triton glue (arch None);
    for the FlashInfer glue built for SM `arch`: on a GPU with the installed FlashInfer, on the CPU with FlashInfer's
    CPU stand-in (STANDIN), the arch faked while it is built (flashinfer_kernel)."""
    if arch is None:
        return kernel_class()
    standin = None if device == "cuda" else STANDIN
    return load_sglang_glue().flashinfer_kernel(arch, api=standin, kernel_class=kernel_class)


def _on_gpu(kernel_class: type, arch: int):
    if not torch.cuda.is_available():
        raise SglangUnavailable(
            f"FlashInferGDNKernel with the installed FlashInfer needs a CUDA GPU (none here); "
            f"on the CPU pass api={STANDIN!r}"
        )
    major, minor = torch.cuda.get_device_capability()
    if arch != major:
        raise SglangUnavailable(
            f"FlashInferGDNKernel for SM{arch}0 cannot be built on this SM{major}{minor} GPU: the glue reads the arch "
            f"from the device; run SM{arch}0 on the CPU stand-in (api={STANDIN!r})"
        )
    for module in FLASHINFER_MODULES:
        try:
            importlib.import_module(module)
        except Exception as e:  # any import failure makes the glue unavailable, with its text
            raise SglangUnavailable(f"import {module} failed ({type(e).__name__}: {e}); {FLASHINFER_HINT}") from e
    return _construct(kernel_class, f"FlashInferGDNKernel on SM{major}{minor}")


def _construct(kernel_class: type, what: str):
    try:
        return kernel_class()
    except RuntimeError as e:  # the glue's own refusals (kernels unavailable, arch below 9)
        raise SglangUnavailable(f"{what}: {e}") from e


def _glue_api(api: str | object) -> dict[str, Callable]:
    if isinstance(api, str):
        module, _, attribute = api.partition(":")
        try:
            api = importlib.import_module(module)
        except ImportError as e:
            raise SglangUnavailable(f"FlashInfer api {module}: {e}") from e
        api = getattr(api, attribute) if attribute else api
    missing = [name for name in GLUE_API.values() if not callable(getattr(api, name, None))]
    if missing:
        raise SglangUnavailable(f"FlashInfer api {_name(api)} lacks {', '.join(missing)}")
    return {glob: getattr(api, name) for glob, name in GLUE_API.items()}


@contextlib.contextmanager
def _faked_flashinfer(glue: ModuleType, functions: dict[str, Callable], arch: int):
    """While constructing: gdn_flashinfer's lazy-import cache holds `functions`, available as the glue's own rule
    says (arch 9+), and the device reports SM `arch`; everything is put back afterwards."""
    names = ("_flashinfer_gdn_available", *GLUE_API)
    saved = {name: getattr(glue, name) for name in names}
    capability = torch.cuda.get_device_capability
    try:
        for name, value in {"_flashinfer_gdn_available": arch >= 9, **functions}.items():
            setattr(glue, name, value)
        torch.cuda.get_device_capability = lambda device=None: (arch, 0)
        yield
    finally:
        torch.cuda.get_device_capability = capability
        for name, value in saved.items():
            setattr(glue, name, value)


def _name(api: object) -> str:
    return api if isinstance(api, str) else getattr(api, "__name__", type(api).__name__)


def _check_scatter(dst, src, dst_indices_raw, step_indices_raw) -> None:
    """fused_mamba_state_scatter_with_mask's checks, less the device one (its wording)."""
    if dst.device != src.device:
        raise ValueError(f"dst and src must be on the same device. {dst.device=} {src.device=}")
    if dst.ndim < 2 or src.ndim < 3:
        raise ValueError(f"Unexpected tensor ranks: {dst.ndim=} {src.ndim=}")
    if dst.shape[0] != src.shape[0]:
        raise ValueError(f"Layer dimension mismatch: {dst.shape[0]=} vs {src.shape[0]=}")
    if dst.shape[2:] != src.shape[3:]:
        raise ValueError(f"Trailing dims mismatch: {dst.shape[2:]=} vs {src.shape[3:]=}")
    if dst_indices_raw.ndim != 1 or step_indices_raw.ndim != 1:
        raise ValueError(f"indices must be 1D: {dst_indices_raw.shape=} {step_indices_raw.shape=}")
    if dst_indices_raw.shape[0] != step_indices_raw.shape[0]:
        raise ValueError(f"indices length mismatch: {dst_indices_raw.shape[0]=} vs {step_indices_raw.shape[0]=}")
    expected = 1
    for i in range(dst.ndim - 1, 1, -1):  # entries (dims 2..) contiguous; layer and slot strides free
        if dst.shape[i] != 1 and dst.stride(i) != expected:
            raise ValueError(f"dst entry dims must be contiguous: shape {tuple(dst.shape)} stride {dst.stride()}")
        expected *= dst.shape[i]
    if not src.is_contiguous():
        raise ValueError("src tensor must be contiguous")


def _no() -> bool:
    return False


def _checkpoint_chunk() -> int:
    return 64  # FLA_CHUNK_SIZE, the server's default mamba_cache_chunk_size


def _core_count(device_index: int = 0) -> int:
    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(device_index).multi_processor_count
    return 0  # the scatter module then assumes 132, its own default
