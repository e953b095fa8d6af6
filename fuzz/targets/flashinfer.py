"""FlashInfer GDN decode / MTP and varlen prefill (0.7.4 API). The override contract for the `flashinfer` family
is a module exposing `gated_delta_rule_decode_pretranspose`, `gated_delta_rule_mtp`, `gated_delta_rule_decode` and
`chunk_gated_delta_rule` with 0.7.4's signatures."""
from __future__ import annotations

import dataclasses

import torch

from fuzz.case import Case
from fuzz.generate.materialize import Tensors
from fuzz.targets.base import Family, Support, Target, Unavailable, import_or_unavailable, installed_version

HINT = "pip install 'gdn-fuzz[flashinfer]'"
# Kernel-availability flags of flashinfer.gdn_decode: a kernel that failed to import is an error the user
# sees, never a quiet fallback to another path.
AVAILABILITY_FLAGS = ("_GDN_DECODE_BF16_STATE_AVAILABLE", "_PRETRANSPOSE_AVAILABLE", "_MTP_AVAILABLE")


class FlashInferFamily(Family):
    _prefill: object = None  # flashinfer.gdn_prefill, or the Unavailable its loading raised

    def load_real(self):
        version = installed_version("flashinfer-python")
        module = import_or_unavailable("flashinfer.gdn_decode", HINT)
        off = [flag for flag in AVAILABILITY_FLAGS if getattr(module, flag, True) is not True]
        if off:
            raise Unavailable(f"flashinfer {version}: kernels failed to import ({', '.join(off)} is False); "
                              "check nvidia-cutlass-dsl and apache-tvm-ffi")
        module.__version__ = version
        return module

    def prefill(self):
        """flashinfer.gdn_prefill, imported when a prefill target first asks (a larger import closure than
        gdn_decode's): its failure makes the prefill target unavailable, never the decode ones."""
        if self.override:
            return self.api()
        if self._prefill is None:
            self._prefill = _load_prefill(self.version())
        if isinstance(self._prefill, Unavailable):
            raise self._prefill
        return self._prefill

    def reset(self, override: str | None) -> None:
        super().reset(override)
        self._prefill = None


def _load_prefill(version: str):
    try:
        module = import_or_unavailable("flashinfer.gdn_prefill", HINT)
    except Unavailable as e:
        return e
    # gdn_kernels sets a kernel that failed to import to None; the call would then raise NotImplementedError on every
    # case. The chunked (sm{major}0) and context-parallel kernels of this GPU must both be there.
    major = torch.cuda.get_device_capability()[0] if torch.cuda.is_available() else None
    names = (f"chunk_gated_delta_rule_sm{major}0", f"cp_delta_rule_dsl_sm{major}0") if major else ()
    off = [name for name in names if getattr(module, name, True) is None]
    if off:
        return Unavailable(f"flashinfer {version}: prefill kernels failed to import ({', '.join(off)} is None); "
                           "check nvidia-cutlass-dsl and cuda-bindings")
    return module


PRETRANSPOSE = "gated_delta_rule_decode_pretranspose"
CHUNK = "chunk_gated_delta_rule"
FLASHINFER = FlashInferFamily("flashinfer", (PRETRANSPOSE, "gated_delta_rule_mtp", "gated_delta_rule_decode", CHUNK))
SM90_PLUS = (9, 10, 11, 12)
HEAD_128 = ((128, 128),)


class FlashInferTarget(Target):
    family = FLASHINFER

    def __init__(self, name: str, path: str, support: Support, function: str, backend: str = "flashinfer"):
        self.name, self.path, self.support, self.needs, self.backend = name, path, support, (function,), backend

    def call(self, case: Case, t: Tensors) -> torch.Tensor:
        """Mapped by the function called (the backend is the target's): several paths share one function."""
        api, function = self.api(), self.needs[0]
        inputs = dict(q=t.q, k=t.k, v=t.v, A_log=t.A_log, a=t.a, dt_bias=t.dt_bias, b=t.b, scale=case.scale,
                      output=t.output.view, use_qk_l2norm=case.l2norm)
        if function == "gated_delta_rule_decode":  # K-major, no pool: the state is [B, HV, K, V] itself
            out, _ = api.gated_delta_rule_decode(**inputs, state=t.pool.view, backend=self.backend)
            return out
        pooled = dict(inputs, initial_state=t.pool.view, initial_state_indices=t.read_slots,
                      output_state_indices=t.write_slots)
        if function == "gated_delta_rule_mtp":
            # ssm_state_indices is int32-only in 0.7.4 (asserted), whatever dtype the other indices have.
            token_slots = None if t.token_slots is None else t.token_slots.to(torch.int32)
            out, _ = api.gated_delta_rule_mtp(
                **pooled, intermediate_states_buffer=None if t.inter is None else t.inter.view,
                ssm_state_indices=token_slots, disable_state_update=not case.update)
            return out
        extra = {} if case.T == 1 else dict(
            intermediate_states_buffer=None if t.inter is None else t.inter.view, disable_state_update=not case.update)
        out, _ = api.gated_delta_rule_decode_pretranspose(**pooled, state=None, backend=self.backend, **extra)
        return out


class FlashInferPrefill(FlashInferTarget):
    """chunk_gated_delta_rule on the pool in place: initial_state = output_state = the pool, state_indices read."""

    def api(self):
        return self.family.prefill()

    def call(self, case: Case, t: Tensors) -> torch.Tensor:
        # g goes in as linear alpha = exp(g), fp32: what the chunked kernels read (0.7.4's gate_domain="log" does the
        # same exp on the host; 0.7.2.post1 has no gate_domain).
        alpha = torch.exp(t.g)
        # Index -1 is legal only with output_state_indices (read -1: zero state, write -1: no store). Without padding
        # the plain in-place pool mode runs: it alone may take the context-parallel route on SM90 (D = 128).
        write = t.write_slots if t.write_slots is not None else t.read_slots.clone() if any(case.padded) else None
        out, _ = self.api().chunk_gated_delta_rule(
            q=t.q, k=t.k, v=t.v, g=alpha, beta=t.beta, scale=case.scale, initial_state=t.pool.view,
            output_final_state=True, cu_seqlens=t.cu_seqlens, use_qk_l2norm_in_kernel=case.l2norm,
            output=t.output.view, output_state=t.pool.view, state_indices=t.read_slots, backend=self.backend,
            output_state_indices=write)
        return out


# 0.7.4 asserts q is fp16/bf16 (then converts to bf16 for the kernel).
_POOL = Support(ops=frozenset({"decode"}), state_dtypes=("fp32",), input_dtypes=("bf16", "fp16"), head_dims=HEAD_128,
                split_write=True, strided_pool=True, arch=SM90_PLUS)
TARGETS = (
    FlashInferTarget("flashinfer-pretranspose-fp32", "flashinfer.pretranspose.fp32", _POOL, PRETRANSPOSE),
    FlashInferTarget("flashinfer-bf16", "flashinfer.bf16", dataclasses.replace(
        _POOL, ops=frozenset({"decode", "verify"}), state_dtypes=("bf16",), intermediate=True, no_update=True,
        exact_rows=True, verify_min_T=2), PRETRANSPOSE),  # verify T=1 is the decode kernel: no verify flags
    # K-major fp32 decode (V % 32 == 0, K, V >= 128); non-contiguous state is copied and copied back.
    FlashInferTarget("flashinfer-decode-kmajor", "flashinfer.decode.kmajor", dataclasses.replace(
        _POOL, layouts=("kv",), pool=False, split_write=False), "gated_delta_rule_decode"),
    FlashInferTarget("flashinfer-mtp-fp32", "flashinfer.mtp.fp32", dataclasses.replace(
        _POOL, ops=frozenset({"decode", "verify"}), intermediate=True, sliced_intermediate=True, token_slots=True,
        no_update=True), "gated_delta_rule_mtp"),
    # SM90 chunked prefill (delta_rule_sm90.py): one head size D = K = V = 128, fp16/bf16 q/k/v and output alike,
    # at least one token per call ("max_seqlen must be positive": a stated precondition, seen on the H200),
    # HV = ratio * H; a strided pool is fine (only its inner strides enter the compile key). gdn_prefill.py
    # dispatches majors 8, 9, 10 (CUDA 13) and 12; 11 raises.
    FlashInferPrefill("flashinfer-prefill-chunk", "flashinfer.prefill.chunk", Support(
        ops=frozenset({"prefill"}), state_dtypes=("fp32",), input_dtypes=("bf16", "fp16"), head_dims=HEAD_128,
        split_write=True, strided_pool=True, empty_prefill=False, arch=(9, 10, 12),
        # The chunk kernel inverts I + beta*tril(K K^T) in fp16: it needs unit-norm keys, so callers with
        # use_qk_l2norm_in_kernel=False pass l2-normalized q, k (FlashInfer's tests do). Raw keys overflow that
        # inverse to NaN (H200: T=12 fp16, T=130 bf16), outside the kernel's domain: only in-kernel l2norm is drawn.
        l2norm_off=False), CHUNK),
)
