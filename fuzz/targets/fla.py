"""fla-core's fused_recurrent_gated_delta_rule (0.6.0). No pools: identity slots, a fresh fp32 final state
that the adapter stores into the pool. Always keyword arguments: the positional order (gk, gv between g
and beta) silently turns beta into gk."""

from __future__ import annotations

import torch

from fuzz.model.case import Case
from fuzz.model.support import Support
from fuzz.model.tensors import Tensors
from fuzz.targets.base import Family, import_or_unavailable, installed_version
from fuzz.targets.triton_common import TritonTarget


class FlaFamily(Family):
    def load_real(self):
        version = installed_version("fla-core")
        module = import_or_unavailable("fla.ops.gated_delta_rule", "pip install 'gdn-fuzz[triton]'")
        module.__version__ = version
        return module


FLA = FlaFamily("fla", ("fused_recurrent_gated_delta_rule",))


class FlaRecurrent(TritonTarget):
    family = FLA
    needs = ("fused_recurrent_gated_delta_rule",)
    support = Support(
        ops=frozenset({"decode", "verify", "prefill"}), layouts=("kv", "vk"), pool=False, state_dtypes=("fp32", "bf16")
    )

    def __init__(self, gates_in_kernel: bool):
        self.gates_in_kernel = gates_in_kernel
        self.name = "fla-recurrent" if gates_in_kernel else "fla-recurrent-loggates"
        self.path = "fla.fused_recurrent" if gates_in_kernel else "fla.fused_recurrent.loggates"

    def call(self, case: Case, t: Tensors) -> torch.Tensor:
        packed = case.op == "prefill"
        batch = (lambda x: x.unsqueeze(0)) if packed else (lambda x: x)  # varlen wants B = 1
        if self.gates_in_kernel:
            gates = dict(
                g=batch(t.a),
                beta=batch(t.b),
                use_gate_in_kernel=True,
                A_log=t.A_log,
                dt_bias=t.dt_bias,
                use_beta_sigmoid_in_kernel=True,
            )
        else:
            gates = dict(g=batch(t.g), beta=batch(t.beta))
        slots = t.read_slots.long()
        o, final = self.family.api().fused_recurrent_gated_delta_rule(
            q=batch(t.q),
            k=batch(t.k),
            v=batch(t.v),
            **gates,
            scale=case.scale,
            initial_state=t.pool.view[slots],
            output_final_state=True,
            use_qk_l2norm_in_kernel=case.l2norm,
            state_v_first=case.layout == "vk",
            cu_seqlens=t.cu_seqlens.long() if packed else None,
        )
        if case.update:
            t.pool.view[slots] = final.to(t.pool.view.dtype)
        return o.squeeze(0) if packed else o


TARGETS = (FlaRecurrent(True), FlaRecurrent(False))
