"""SGLang's Triton GDN kernels (0.5.12+ layout: pool [slots, HV, V, K]), loaded from the installed wheel
without SGLang's package init (see sglang_loader). The override contract for the `sglang` family is a
module exposing the three kernel functions below under their SGLang names."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import torch

from fuzz.model.case import Case
from fuzz.model.support import Support
from fuzz.model.tensors import Tensors
from fuzz.targets.base import VERIFYING, Family, unavailable_as
from fuzz.targets.triton_common import TritonTarget

PACKED = "fused_recurrent_gated_delta_rule_packed_decode"
SIGMOID = "fused_sigmoid_gating_delta_rule_update"
RECURRENT = "fused_recurrent_gated_delta_rule_update"


class SglangFamily(Family):
    def load_real(self):
        from fuzz.targets.sglang_loader import SglangUnavailable, load_sglang_kernels  # imports triton

        with unavailable_as(SglangUnavailable):
            k = load_sglang_kernels()
        return SimpleNamespace(
            __version__=k.version,
            **{PACKED: k.packed_decode, SIGMOID: k.sigmoid_gating_update, RECURRENT: k.recurrent_update},
        )


SGLANG = SglangFamily("sglang", (PACKED, SIGMOID, RECURRENT))


def _packed_tokens(case: Case, x: torch.Tensor) -> torch.Tensor:
    """[B, T, heads, D] -> [1, B*T, heads, D]: SGLang takes requests packed along one token axis."""
    return x.reshape(1, case.B * case.T, *x.shape[2:])


class SglangTarget(TritonTarget):
    family = SGLANG

    def __init__(self, name: str, path: str, support: Support, function: str):
        self.name, self.path, self.support, self.needs = name, path, support, (function,)

    def call(self, case: Case, t: Tensors) -> torch.Tensor:
        api = self.family.api()
        B, T = case.B, case.T
        if self.path == "sglang.packed_decode":
            mixed = torch.cat([t.q.reshape(B, -1), t.k.reshape(B, -1), t.v.reshape(B, -1)], dim=1)
            getattr(api, PACKED)(
                mixed_qkv=mixed,
                a=t.a[:, 0].contiguous(),
                b=t.b[:, 0].contiguous(),
                A_log=t.A_log,
                dt_bias=t.dt_bias,
                scale=case.scale or case.K**-0.5,
                initial_state=t.pool.view,
                out=t.output.view,
                ssm_state_indices=t.read_slots,
                use_qk_l2norm_in_kernel=case.l2norm,
            )
            return t.output.view
        rows = t.inter_index if t.inter_index is not None else torch.arange(B, dtype=torch.int32, device=t.q.device)
        common = dict(
            q=_packed_tokens(case, t.q),
            k=_packed_tokens(case, t.k),
            v=_packed_tokens(case, t.v),
            scale=case.scale,
            initial_state_source=t.pool.view,
            initial_state_indices=t.read_slots,
            use_qk_l2norm_in_kernel=case.l2norm,
            disable_state_update=not case.update,
            cu_seqlens=torch.arange(0, B * T + 1, T, dtype=torch.int32, device=t.q.device),
            intermediate_states_buffer=None if t.inter is None else t.inter.view,
            intermediate_state_indices=rows.to(torch.int32),
            cache_steps=case.inter_steps or None,
        )
        if self.path == "sglang.sigmoid_gating":
            o = getattr(api, SIGMOID)(
                A_log=t.A_log,
                a=t.a.reshape(B * T, -1),
                dt_bias=t.dt_bias,
                softplus_beta=1.0,
                softplus_threshold=20.0,
                b=t.b.reshape(B * T, -1),
                **common,
            )
        else:
            o = getattr(api, RECURRENT)(g=_packed_tokens(case, t.g), beta=_packed_tokens(case, t.beta), **common)
        return o.reshape(B, T, case.HV, case.V)


_DECODE = Support(ops=frozenset({"decode"}), strided_pool=True)
_VERIFY = dataclasses.replace(_DECODE, **VERIFYING, explicit_rows=True)
TARGETS = (
    SglangTarget("sglang-packed", "sglang.packed_decode", _DECODE, PACKED),
    SglangTarget("sglang-sigmoid", "sglang.sigmoid_gating", _VERIFY, SIGMOID),
    SglangTarget("sglang-recurrent", "sglang.recurrent_update", _VERIFY, RECURRENT),
)
