"""FlashInfer 0.7.4 GDN paths that run only on Blackwell-family GPUs: the source-only Cake backend and ReplaySSM.

Both reuse the `flashinfer` family (FLASHINFER) and FlashInferTarget's call mapping; what differs is declared here.

Cake (`backend="cake_gdn"`, flashinfer/jit/cake_gdn.py): nvcc compiles one CUDA kernel per manifest record
(data/csrc/gdn/cake/manifest.json) at its first call; a request outside the records raises CakeGDNUnsupportedError
(fail closed). The backend is pinned: under `backend="auto"` an off-manifest request falls through to the CuTe
kernels silently, and the fuzzer would judge the wrong kernel. Records exist for compute capability 10.0, 10.3, 10.7
only, K = V = 128, bf16 q/k/v/a/b, fp32 A_log/dt_bias, int32 slots, in-kernel q/k l2norm, scale K^-0.5 (a few also
1.0), and exact (H, HV) geometries (CAKE_*_HEADS below; multi-token rows are keyed by the exact batch size as well,
so no Support can hold a draw inside them: they are not targets). Support.heads keeps the strategies on the
manifest's geometries; an override stand-in has no manifest, so its contract is fuzzed at every geometry. An override
module models the Cake backend when it exports CakeGDNUnsupportedError (fuzz.standins.flashinfer_sm100_cpu
does; fuzz.standins.flashinfer_cpu takes backend="cake_gdn" but runs its CuTe model, so the Cake targets are
unavailable there).

ReplaySSM (`gated_delta_rule_mtp(cache_replayssm=True)`, then `gated_delta_rule_replayssm_commit`): verify leaves the
fp32 checkpoint frozen, writes the output and caches the raw window (v, pre-norm k as bf16, log-decay and
sigmoid-beta as fp32) in per-pool-slot buffers; commit replays the first accept_lens[n] tokens of the window into
pool[slot]. ReplaySSMTarget maps this onto the oracle's verify (see its docstring).
"""

from __future__ import annotations

import dataclasses
import os

import torch

from fuzz.model.case import Case
from fuzz.model.support import Support
from fuzz.model.tensors import Tensors
from fuzz.targets.base import KV_STATE, Unavailable, import_or_unavailable
from fuzz.targets.flashinfer import FP32, HINT, FlashInferTarget, decode_keywords
from fuzz.targets.flashinfer_contract import CAKE_ARCH, REPLAYSSM_ARCH

CAKE_CAPABILITIES = ((10, 0), (10, 3), (10, 7))  # jit/cake_gdn.py arch_for_compute_capability
# ReplaySSM: gdn_decode.py runs it on major 10, or exactly (12, 0)

# (H, HV) of the manifest's T = 1 decode records (0.7.4), each present on sm_100a, sm_103a and sm_107a for every
# state-head band the route tables (cake_gdn_bf16_t1_route, cake_gdn_fp32_t1_route) pick, at SCALE = 128**-0.5.
CAKE_BF16_T1_HEADS = ((2, 8), (4, 8), (4, 16), (8, 16), (8, 32), (16, 32))  # vec8 / vec8occ / wide128 bodies
CAKE_FP32_T1_HEADS = ((16, 32),)  # splitv8 (also at SCALE = 1.0)
CAKE_KMAJOR_T1_HEADS = ((16, 32),)  # nontranspose small/large (also 1.0); (4, 8) only below 32 rows: left out


class CakeTarget(FlashInferTarget):
    """A Cake decode path with backend="cake_gdn" pinned; Support.heads holds the manifest's (H, HV) pairs for it."""

    def __init__(self, name: str, path: str, support: Support, function: str):
        super().__init__(name, path, support, function, backend="cake_gdn")

    def unavailable_reason(self, profile_device: str) -> str | None:
        reason = super().unavailable_reason(profile_device)
        if reason:
            return reason
        api = self.api()
        if self.overridden:  # an override that accepts backend="cake_gdn" without modelling it must not be judged
            return (
                None
                if hasattr(api, "CakeGDNUnsupportedError")
                else (
                    f"override {self.family.override} does not model the Cake backend "
                    "(exports no CakeGDNUnsupportedError)"
                )
            )
        if getattr(api, "_CAKE_GDN_AVAILABLE", False) is not True:
            return (
                f"flashinfer {self.family.version()}: the Cake GDN backend failed to import "
                "(_CAKE_GDN_AVAILABLE is False)"
            )
        capability = torch.cuda.get_device_capability()
        if capability not in CAKE_CAPABILITIES:
            return f"Cake GDN compiles for compute capability {CAKE_CAPABILITIES} only; this GPU is {capability}"
        try:
            nvcc = os.path.join(import_or_unavailable("flashinfer.jit.cpp_ext", HINT).get_cuda_path(), "bin", "nvcc")
        except (Unavailable, RuntimeError) as e:
            return f"Cake GDN compiles with nvcc at run time: {e}"
        if not os.path.isfile(nvcc):
            return f"Cake GDN compiles with nvcc at run time; {nvcc} does not exist (set CUDA_HOME)"
        return None


class ReplaySSMTarget(FlashInferTarget):
    """verify with cache_replayssm=True, then gated_delta_rule_replayssm_commit, judged as one verify.

    Verify (disable_state_update=True, the only mode ReplaySSM has) writes the output and the windows of every live
    row at its read slot; the windows start as NaN, so a row verify did not cache poisons its commit. Commit then
    replays accept_lens tokens into pool[read slot]: accept = T when case.update (the oracle's write-back of the final
    state to the read slot), 0 when not (a no-op by contract: the pool stays bit-identical). A padded row (-1) is
    skipped by both. With an intermediate buffer in the case, each prefix 1..T is also committed, into a compact copy
    of the live rows' checkpoints (slots 0..L-1, so the real slot ids are exercised by the main commit only), and row
    n, step s-1 of the buffer receives the state after s accepted tokens: the oracle's intermediate states, so every
    acceptance length is judged. The buffer itself is the adapter's (ReplaySSM has none).

    The commit is pinned to backend="simt" (fp32 contractions, what the precision model describes); "auto" picks the
    TF32 tcgen05 fold at T = 8 (and T = 6, 7 for larger grids), whose error the model has no term for. Verify picks
    its TF32 tcgen05 / mma.sync kernels itself (T = 4..8, int32 slots, l2norm, bf16 output, even HV and HV/H on SM100).
    """

    commit_backend = "simt"

    def __init__(self, name: str, path: str, support: Support):
        super().__init__(name, path, support, "gated_delta_rule_mtp")
        self.needs = ("gated_delta_rule_mtp", "gated_delta_rule_replayssm_commit")
        # ReplaySSM's keywords (0.7.2+): a release without them cannot run this target at all
        self.essential = {
            "gated_delta_rule_mtp": (
                "cache_replayssm",
                "replayssm_rawv",
                "replayssm_rawk",
                "replayssm_g",
                "replayssm_beta",
            ),
            "gated_delta_rule_replayssm_commit": ("use_qk_l2norm", "backend"),
        }

    def unavailable_reason(self, profile_device: str) -> str | None:
        reason = super().unavailable_reason(profile_device)
        if reason or self.overridden:
            return reason
        capability = torch.cuda.get_device_capability()
        if capability[0] == 12 and capability != (12, 0):
            return f"ReplaySSM needs compute capability 10.x or 12.0; this GPU is {capability}"
        try:  # imported by the commit on first use: its failure would reject every case
            import_or_unavailable("flashinfer.gdn_kernels.gdn_replayssm_spec_fold", HINT)
        except Unavailable as e:
            return str(e)
        return None

    def call(self, case: Case, t: Tensors) -> torch.Tensor:
        api, dev = self.api(), t.q.device
        P, T, H, HV = case.pool, case.T, case.H, case.HV
        nan = float("nan")
        windows = dict(
            replayssm_rawv=torch.full((P, HV, T, case.V), nan, dtype=torch.bfloat16, device=dev),
            replayssm_rawk=torch.full((P, H, T, case.K), nan, dtype=torch.bfloat16, device=dev),
            replayssm_g=torch.full((P, HV, T), nan, dtype=torch.float32, device=dev),
            replayssm_beta=torch.full((P, HV, T), nan, dtype=torch.float32, device=dev),
        )
        out, _ = api.gated_delta_rule_mtp(
            **decode_keywords(case, t, t.output.view),
            initial_state=t.pool.view,
            initial_state_indices=t.read_slots,
            disable_state_update=True,
            cache_replayssm=True,
            **windows,
        )
        layered = [w.unsqueeze(0) for w in windows.values()]  # commit takes [layers, slots, ...]: one layer

        def commit(checkpoint, caches, slots, accept):
            api.gated_delta_rule_replayssm_commit(
                checkpoint,
                *caches,
                slots,
                torch.full((slots.shape[0],), accept, dtype=torch.int32, device=dev),
                use_qk_l2norm=case.l2norm,
                backend=self.commit_backend,
            )

        if t.inter is not None:  # before the main commit, which moves the pool on
            rows = (t.read_slots >= 0).nonzero().squeeze(1)
            if rows.numel():
                live = t.read_slots[rows].long()
                frozen = t.pool.view[live].unsqueeze(0)
                caches = [w[:, live].contiguous() for w in layered]
                compact = torch.arange(rows.numel(), dtype=torch.int32, device=dev)
                for accepted in range(1, T + 1):
                    checkpoint = frozen.clone()
                    commit(checkpoint, caches, compact, accepted)
                    t.inter.view[rows, accepted - 1] = checkpoint[0]
        commit(t.pool.view.unsqueeze(0), layered, t.read_slots.to(torch.int32), T if case.update else 0)
        return out


_BF16 = dict(state_dtypes=("bf16",), input_dtypes=("bf16",), index_dtypes=("i32",))  # the manifest's dtypes
_CAKE = dataclasses.replace(FP32, **_BF16, split_write=True, strided_pool=True, l2norm_off=False, arch=CAKE_ARCH)
TARGETS = (
    # bf16 pool: packed inner dims, any slot stride (the shim passes stride(0)); int32 read and write slots.
    CakeTarget(
        "flashinfer-cake-bf16",
        "flashinfer.cake.bf16",
        dataclasses.replace(_CAKE, heads=CAKE_BF16_T1_HEADS),
        "gated_delta_rule_decode_pretranspose",
    ),
    # fp32 pool at T = 1: q, k, v, a, b, the pool, A_log and dt_bias must all be contiguous.
    CakeTarget(
        "flashinfer-cake-fp32",
        "flashinfer.cake.fp32",
        dataclasses.replace(_CAKE, state_dtypes=("fp32",), strided_pool=False, heads=CAKE_FP32_T1_HEADS),
        "gated_delta_rule_decode_pretranspose",
    ),
    # K-major fp32 state [B, HV, K, V], no pool: every tensor contiguous.
    CakeTarget(
        "flashinfer-cake-kmajor",
        "flashinfer.cake.kmajor",
        dataclasses.replace(_CAKE, **KV_STATE, state_dtypes=("fp32",), strided_pool=False, heads=CAKE_KMAJOR_T1_HEADS),
        "gated_delta_rule_decode",
    ),
    # K = V = 128, T >= 3, fp32 checkpoint (contiguous: the commit requires it), fp16/bf16 inputs, int32/int64 verify
    # slots (the commit's are int32: converted), no write indices (verify is frozen).
    ReplaySSMTarget(
        "flashinfer-replayssm",
        "flashinfer.replayssm",
        dataclasses.replace(
            FP32, ops=frozenset({"verify"}), verify_min_T=3, intermediate=True, no_update=True, arch=REPLAYSSM_ARCH
        ),
    ),
)
