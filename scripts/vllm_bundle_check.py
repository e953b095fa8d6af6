"""vLLM 0.34.0's flash_linear_attention/ops import from the unpacked .vllm bundle alone.

    . .vllm/use.sh && python3 scripts/vllm_bundle_check.py      # device (or CPU: TRITON_INTERPRET=1)

(a) serving-glue.md §3.4 route: empty packages (ops/__init__ skipped), 4 stubs, op.exp rebind -> fused_recurrent,
    fused_sigmoid_gating, fused_gdn_decode_post_conv_mtp; (b) every ops module, ops/__init__ included, with permissive
    stubs for the vLLM modules they name (warmup, custom_op, ...)."""

import contextlib
import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
import os
import sys
import types

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

site = os.environ["GDN_VLLM_SITE"]
spec = importlib.util.find_spec("vllm")
dist = importlib.metadata.distribution("vllm")
print("find_spec:", list(spec.submodule_search_locations), "version:", dist.version, "dist at", dist._path)
assert str(dist._path).startswith(site)
OPS = "vllm.third_party.flash_linear_attention.ops"
root = os.path.join(site, *OPS.split("."))


def pkg(name, path=None):
    s = importlib.machinery.ModuleSpec(name, None, is_package=True)
    s.submodule_search_locations = [path] if path else []
    m = importlib.util.module_from_spec(s)
    sys.modules[name] = m
    return m


def stub(name, **attrs):
    m = sys.modules.get(name) or types.ModuleType(name)
    m.__dict__.update(attrs)
    sys.modules[name] = m
    return m


class _Perm:
    def __init__(self, *a, **k):
        pass

    def __class_getitem__(cls, item):
        return cls

    @classmethod
    def register(cls, *a, **k):
        return lambda c: c

    @classmethod
    def from_alignment(cls, *a, **k):
        return cls()

    def __call__(self, *a, **k):
        return a[0] if len(a) == 1 and callable(a[0]) else self


class _Plat:
    def is_cuda(self):
        return torch.cuda.is_available() and torch.version.cuda is not None

    def is_rocm(self):
        return torch.version.hip is not None

    def is_cuda_alike(self):
        return self.is_cuda() or self.is_rocm()

    def get_device_name(self, device_id=0):
        return torch.cuda.get_device_name(device_id) if torch.cuda.is_available() else "cpu"

    def get_device_capability(self, device_id=0):
        return torch.cuda.get_device_capability(device_id) if torch.cuda.is_available() else None

    def has_device_capability(self, cap, device_id=0):
        c = self.get_device_capability(device_id)
        return c is not None and c[0] * 10 + c[1] >= cap

    def is_device_capability(self, cap, device_id=0):
        c = self.get_device_capability(device_id)
        return c is not None and c[0] * 10 + c[1] == cap

    def is_device_capability_family(self, cap, device_id=0):
        c = self.get_device_capability(device_id)
        return c is not None and c[0] == cap // 10

    def is_arch_support_pdl(self):
        return False


for p in ("vllm", "vllm.third_party", "vllm.third_party.flash_linear_attention"):
    pkg(p, os.path.join(site, *p.split(".")))
pkg(OPS, root)  # (a): real __path__, ops/__init__ not run
stub("vllm.triton_utils", triton=triton, tl=tl, tldevice=libdevice)
pkg("vllm.platforms")
stub("vllm.platforms", current_platform=_Plat())
pkg("vllm.utils")
stub(
    "vllm.utils.platform_utils", cuda_get_device_properties=lambda *a, **k: None, num_compute_units=lambda *a, **k: 132
)
op = importlib.import_module(f"{OPS}.op")


@triton.jit
def _exp(x):
    return tl.exp(x)


@triton.jit
def _log(x):
    return tl.log(x)


if triton.knobs.runtime.interpret:
    op.exp, op.log = _exp, _log
for m in ("fused_recurrent", "fused_sigmoid_gating", "fused_gdn_decode_post_conv_mtp"):
    importlib.import_module(f"{OPS}.{m}")
print("(a) §3.4 route imports: fused_recurrent, fused_sigmoid_gating, fused_gdn_decode_post_conv_mtp")
# (b) everything, with permissive stubs for the rest
stub("vllm.platforms.rocm", on_gfx1x=lambda: False)
stub(
    "vllm.utils.math_utils",
    cdiv=lambda a, b: -(a // -b),
    next_power_of_2=lambda n: 1 << (n - 1).bit_length(),
    RCP_LN2=1.4426950408889634,
)
stub("vllm.utils.gpu_sync_debug", gpu_sync_allowed=contextlib.nullcontext)
stub(
    "vllm.utils.torch_utils",
    async_tensor_h2d=lambda data, dtype, device, pin_memory=False: torch.tensor(data, dtype=dtype, device=device),
)
pkg("vllm.model_executor")
pkg("vllm.model_executor.warmup")
stub("vllm.model_executor.custom_op", CustomOp=_Perm)
stub("vllm.model_executor.warmup.jit_warmup", WarmupChoices=_Perm, VllmJitKernel=_Perm)
stub(
    "vllm.model_executor.warmup.jit_warmup_triton_helper",
    DispatchSpec=_Perm,
    TritonWarmupTensor=_Perm,
    triton_kernel_dispatcher_with_warmup=_Perm,
    TritonPointerInputVariant=_Perm,
    triton_scalar_specialization_rep=_Perm,
)
files = sorted(f[:-3] for f in os.listdir(root) if f.endswith(".py") and f != "__init__.py")
for m in files:
    importlib.import_module(f"{OPS}.{m}")
del sys.modules[OPS]
ops = importlib.import_module(OPS)  # the real ops/__init__ now
print("(b) all", len(files), "ops modules + ops/__init__ import; __all__ =", ops.__all__)
loaded = sorted(n for n, m in sys.modules.items() if n.startswith("vllm") and getattr(m, "__file__", None))
outside = [n for n in loaded if not sys.modules[n].__file__.startswith(site)]
print(f"{len(loaded)} vllm modules with files, all from {site}: {not outside}", outside)
assert not outside
print("VLLM DRY RUN OK")
