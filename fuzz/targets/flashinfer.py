"""FlashInfer GDN decode / MTP (0.7.4 API). The override contract for the `flashinfer` family is a module
exposing `gated_delta_rule_decode_pretranspose` and `gated_delta_rule_mtp` with 0.7.4's signatures."""
from __future__ import annotations

import dataclasses

import torch

from fuzz.case import Case
from fuzz.materialize import Tensors
from fuzz.targets.base import Family, Support, Target, Unavailable, import_or_unavailable, installed_version

# Kernel-availability flags of flashinfer.gdn_decode: a kernel that failed to import is an error the user
# sees, never a quiet fallback to another path.
AVAILABILITY_FLAGS = ("_GDN_DECODE_BF16_STATE_AVAILABLE", "_PRETRANSPOSE_AVAILABLE", "_MTP_AVAILABLE")


class FlashInferFamily(Family):
    def load_real(self):
        version = installed_version("flashinfer-python")
        module = import_or_unavailable("flashinfer.gdn_decode", "pip install 'gdn-fuzz[flashinfer]'")
        off = [flag for flag in AVAILABILITY_FLAGS if getattr(module, flag, True) is not True]
        if off:
            raise Unavailable(f"flashinfer {version}: kernels failed to import ({', '.join(off)} is False); "
                              "check nvidia-cutlass-dsl and apache-tvm-ffi")
        module.__version__ = version
        return module


PRETRANSPOSE = "gated_delta_rule_decode_pretranspose"
FLASHINFER = FlashInferFamily("flashinfer", (PRETRANSPOSE, "gated_delta_rule_mtp", "gated_delta_rule_decode"))
SM90_PLUS = (9, 10, 11, 12)
HEAD_128 = ((128, 128),)


class FlashInferTarget(Target):
    family = FLASHINFER

    def __init__(self, name: str, path: str, support: Support, function: str, backend: str = "flashinfer"):
        self.name, self.path, self.support, self.needs, self.backend = name, path, support, (function,), backend

    def call(self, case: Case, t: Tensors) -> torch.Tensor:
        api = self.family.api()
        common = dict(q=t.q, k=t.k, v=t.v, A_log=t.A_log, a=t.a, dt_bias=t.dt_bias, b=t.b, scale=case.scale,
                      output=t.output.view, output_state_indices=t.write_slots)
        if self.path == "flashinfer.decode.kmajor":  # no pool: the state is [B, HV, K, V] itself
            out, _ = api.gated_delta_rule_decode(q=t.q, k=t.k, v=t.v, state=t.pool.view, A_log=t.A_log, a=t.a,
                                                 dt_bias=t.dt_bias, b=t.b, scale=case.scale, output=t.output.view,
                                                 use_qk_l2norm=case.l2norm, backend=self.backend)
            return out
        if self.path == "flashinfer.mtp.fp32":
            # ssm_state_indices is int32-only in 0.7.4 (asserted), whatever dtype the other indices have.
            token_slots = None if t.token_slots is None else t.token_slots.to(torch.int32)
            out, _ = api.gated_delta_rule_mtp(
                **common, initial_state=t.pool.view, initial_state_indices=t.read_slots, use_qk_l2norm=case.l2norm,
                intermediate_states_buffer=None if t.inter is None else t.inter.view, ssm_state_indices=token_slots,
                disable_state_update=not case.update)
            return out
        extra = {} if case.T == 1 else dict(
            intermediate_states_buffer=None if t.inter is None else t.inter.view, disable_state_update=not case.update)
        out, _ = api.gated_delta_rule_decode_pretranspose(
            **common, state=None, use_qk_l2norm=case.l2norm, initial_state=t.pool.view,
            initial_state_indices=t.read_slots, backend=self.backend, **extra)
        return out


# 0.7.4 asserts q is fp16/bf16 (then converts to bf16 for the kernel).
_POOL = Support(ops=frozenset({"decode"}), state_dtypes=("fp32",), input_dtypes=("bf16", "fp16"), head_dims=HEAD_128,
                split_write=True,
                strided_pool=True, arch=SM90_PLUS)
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
)
