"""vLLM 0.34.0's flash_linear_attention/ops import from the unpacked .vllm bundle alone.

    . .vllm/use.sh && PYTHONPATH=$PYTHONPATH:$PWD python3 scripts/vllm_bundle_check.py   # CPU: TRITON_INTERPRET=1

(a) the project's loader (fuzz.targets.vllm_loader.load_vllm_kernels: its empty packages, its stubs, nothing else),
    so the bundle must hold the whole closure of the kernel files the loader imports (scripts/pack_gpu_deps.sh
    VLLM_STARTS); (b) every ops module, ops/__init__ included, with permissive stubs for the vLLM modules they name
    beyond that closure (custom_op, torch_utils, ...). Every vllm module with a file must come from $GDN_VLLM_SITE."""

import contextlib
import dataclasses
import importlib
import importlib.metadata
import importlib.util
import os
import sys
import types

import torch

site = os.environ["GDN_VLLM_SITE"]
spec = importlib.util.find_spec("vllm")
dist = importlib.metadata.distribution("vllm")
print("find_spec:", list(spec.submodule_search_locations), "version:", dist.version, "dist at", dist._path)
assert str(dist._path).startswith(site)
OPS = "vllm.third_party.flash_linear_attention.ops"
root = os.path.join(site, *OPS.split("."))


def stub(name, **attrs):
    """Only what the module lacks: the modules the loader imported stay real."""
    m = sys.modules.get(name) or types.ModuleType(name)
    for key, value in attrs.items():
        m.__dict__.setdefault(key, value)
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


from fuzz.targets.vllm_loader import load_vllm_kernels  # noqa: E402 (after the find_spec check)

k = load_vllm_kernels()
assert str(k.source_dir).startswith(site), k.source_dir
print("(a) loader:", k.version, k.source_dir, "->", ", ".join(f.name for f in dataclasses.fields(k)))
# (b) everything, with permissive stubs for the rest
stub("vllm.platforms.rocm", on_gfx1x=lambda: False)
stub("vllm.utils.gpu_sync_debug", gpu_sync_allowed=contextlib.nullcontext)
stub(
    "vllm.utils.torch_utils",
    async_tensor_h2d=lambda data, dtype, device, pin_memory=False: torch.tensor(data, dtype=dtype, device=device),
)
stub("vllm.model_executor.custom_op", CustomOp=_Perm)
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
