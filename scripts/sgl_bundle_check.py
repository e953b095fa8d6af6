"""SGLang 0.5.23's GDN glue, Triton kernels and MTP commit kernel import from the unpacked .sgl bundle alone.

    . .sgl/use.sh && PYTHONPATH=$PYTHONPATH:$PWD python3 scripts/sgl_bundle_check.py   # CPU: TRITON_INTERPRET=1

The project's glue loader (fuzz.targets.sglang_glue_loader.load_sglang_glue: the kernel files' loader plus the stubs
of shared/research/serving-glue.md §2.2), then the other kernel files the bundle packs; every sglang module with a
file must come from $GDN_SGLANG_SITE."""

import importlib
import importlib.metadata
import importlib.util
import os
import sys

site = os.environ["GDN_SGLANG_SITE"]
spec = importlib.util.find_spec("sglang")
print("find_spec:", list(spec.submodule_search_locations), "version:", importlib.metadata.version("sglang"))
assert list(spec.submodule_search_locations)[0].startswith(site), spec
from fuzz.targets.sglang_glue_loader import load_sglang_glue  # noqa: E402 (after the find_spec check)
from fuzz.targets.wheel_import import register_packages  # noqa: E402

g = load_sglang_glue()  # the kernel files' loader, then the glue's packages and stubs (serving-glue.md §2.2)
print("loader:", g.version, g.source_dir)
assert str(g.source_dir).startswith(site)
register_packages(g.source_dir, "sglang.kernels.ops.attention.fla", "sglang.kernels.ops.attention.linear")
mods = [
    "sglang.srt.layers.attention.linear.kernels.kernel_backend",
    "sglang.srt.layers.attention.linear.kernels.gdn_triton",
    "sglang.srt.layers.attention.linear.kernels.gdn_flashinfer",
    "sglang.kernels.ops.attention.fla.chunk",
    "sglang.kernels.ops.attention.fla.l2norm",
    "sglang.kernels.ops.attention.fla.fused_recurrent",
    "sglang.kernels.ops.attention.linear.fused_sigmoid_gating_recurrent",
    "sglang.kernels.ops.attention.linear.fused_recurrent_linear_replayssm",
    "sglang.kernels.ops.attention.linear.fused_gdn_gating",
    "sglang.kernels.ops.mamba.mamba_state_scatter_triton",
]
for m in mods:
    importlib.import_module(m)
names = {
    "sglang.srt.layers.attention.linear.kernels.gdn_flashinfer": ["FlashInferGDNKernel"],
    "sglang.srt.layers.attention.linear.kernels.gdn_triton": ["TritonGDNKernel"],
    "sglang.kernels.ops.attention.fla.l2norm": ["gdn_prefill_qkv_prepare_fwd"],
    "sglang.kernels.ops.attention.fla.chunk": ["chunk_gated_delta_rule"],
    "sglang.kernels.ops.mamba.mamba_state_scatter_triton": [
        "scatter_mamba_states_after_mtp_verify",
        "fused_mamba_state_scatter_with_mask",
    ],
}
for m, ns in names.items():
    for n in ns:
        assert hasattr(sys.modules[m], n), (m, n)
loaded = sorted(n for n, m in sys.modules.items() if n.startswith("sglang") and getattr(m, "__file__", None))
outside = [n for n in loaded if not sys.modules[n].__file__.startswith(site)]
print(f"{len(loaded)} sglang modules with files loaded, all from {site}: {not outside}", outside)
packed = {
    os.path.relpath(os.path.join(d, f), site)
    for d, _, fs in os.walk(site)
    for f in fs
    if f.endswith(".py") and f != "__init__.py"
}
used = {os.path.relpath(sys.modules[n].__file__, site) for n in loaded}
print("packed but not imported here:", sorted(packed - used))
assert not outside
print("SGL DRY RUN OK")
