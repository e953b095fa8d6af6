"""vLLM 0.34.0's spec-decode GDN Triton kernels (family `vllm`), called the way vLLM's GDN layers and their metadata
builder call them (paths from the wheel's `vllm/`; shared/research/serving-glue.md §3), loaded by
fuzz.targets.vllm_loader without vLLM's package init. An override module (`--gdn-target vllm=module`, a mutant)
exposes the four functions under their vLLM names.

  vllm-recurrent  fused_recurrent_gated_delta_rule with precomputed log gates and beta (OLMo hybrid's route,
                  model_executor/layers/mamba/gdn/olmo_gdn_linear_attn.py:443-486)
  vllm-sigmoid    fused_sigmoid_gating_delta_rule_update (Qwen GDN's route, qwen_gdn_linear_attn.py:1972-2013)
  vllm-mtp        the Triton MTP decode port fused_gdn_decode_post_conv_mtp_triton with its gated RMSNorm epilogue
                  (ROCm's route, qwen_gdn_linear_attn.py:133-143, 2363-2391), paired (Target.paired,
                  fuzz.judge.pair) with fused_sigmoid_gating followed by rmsnorm_fn as the layer combines them
                  (:2513-2520, 2444-2474)

The batch is what v1/attention/backends/gdn_attn.py builds for a CUDA-graph batch: cu_seqlens over every row, the
padded tail rows zero-length (:660-665, 682-687) while q/k/v keep B x T tokens; the null block 0 in every column of a
padded row (:639, 680), accepted 1 there (:671).
  decode: ssm_state_indices [B] = block_table[:, 0] (:406, 487-489), no accepted counts: the non-spec decode.
  verify: ssm_state_indices [B, T] = block_table[:, :num_spec + 1] (:463-465, 484-486), Case.token_slots, with
          num_accepted_tokens = Case.accepted and inplace_final_state=True: the spec decode.
A verify case without accepted counts passes its read slots as 1-D indices: the non-spec path with T > 1 tokens,
which vLLM never builds (the flat-indices-multitoken edge, fuzz.model.engines).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import torch

from fuzz.model.case import Case
from fuzz.model.support import Support
from fuzz.model.tensors import Tensors
from fuzz.model.values import Values
from fuzz.targets.base import Family, unavailable_as
from fuzz.targets.contract import Contract
from fuzz.targets.triton_common import TritonTarget, triton_where

RECURRENT = "fused_recurrent_gated_delta_rule"
SIGMOID = "fused_sigmoid_gating_delta_rule_update"
MTP = "fused_gdn_decode_post_conv_mtp_triton"
NORM = "rmsnorm_fn"
NORM_EPS = 1e-6  # Qwen3-Next / Qwen3.5 layer_norm_epsilon
GATE_STREAM = 0x6A7E  # the Values stream of the MTP pair's output gate and norm weight (not the case's inputs')


class VllmFamily(Family):
    def load_real(self):
        from fuzz.targets.vllm_loader import VllmUnavailable, load_vllm_kernels  # imports triton

        with unavailable_as(VllmUnavailable):
            k = load_vllm_kernels()
        kernels = (k.fused_recurrent, k.sigmoid_gating_update, k.mtp_decode, k.gated_rmsnorm)
        return SimpleNamespace(__version__=k.version, **dict(zip(self.functions, kernels)))


VLLM = VllmFamily("vllm", (RECURRENT, SIGMOID, MTP, NORM))


@dataclass(frozen=True)
class Batch:
    """One call's batch as vLLM's GDN metadata gives it to the kernels."""

    cu_seqlens: torch.Tensor  # [B + 1] int32; padded tail rows zero-length
    indices: torch.Tensor  # [B, T] block table columns (spec decode) or [B] (non-spec)
    accepted: torch.Tensor | None  # [B] int32 (spec decode) or None
    tokens: int  # B * T: q/k/v keep every row's tokens


def batch(case: Case, t: Tensors) -> Batch:
    """The case's batch: a verify's per-token slots and accepted counts, else its read slots, flat (a decode; past
    T = 1 in a buffer whose entries past the rows name the pool's first guard slot, as Tensors.token_slots'
    does, so the kernel's reads of token t at n + t stay in memory we own)."""
    live = max((n + 1 for n in range(case.B) if not padding(case, n)), default=0)
    lengths = [case.T if n < live else 0 for n in range(case.B)]  # padded rows are zero-length at the tail only
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32, device=t.q.device)
    if case.op == "verify" and case.accepted is not None:
        return Batch(cu, t.token_slots, t.accepted, case.B * case.T)
    indices = t.read_slots
    if case.T > 1:  # token t of request n reads entry n + t: the buffer goes on T - 1 entries past the last request
        indices = torch.full((case.B + case.T - 1,), case.pool, dtype=indices.dtype, device=indices.device)
        indices[: case.B] = t.read_slots
        indices = indices[: case.B]
    return Batch(cu, indices, None, case.B * case.T)


def padding(case: Case, n: int) -> bool:
    """Whether request n is CUDA-graph padding: the null block in every column vLLM passes (a request on an edge
    whose read slot the case names as the null one, an out-of-range accepted count, is a live row of the batch)."""
    row = case.token_slots[n] if case.op == "verify" and case.accepted is not None else (case.read_slots[n],)
    return all(slot <= 0 for slot in row)  # the kernels skip any slot <= 0, NULL_BLOCK_ID among them


def _packed(x: torch.Tensor) -> torch.Tensor:
    """[B, T, ...] -> [1, B * T, ...]: the kernels take every request's tokens along one axis (varlen)."""
    return x.reshape(1, -1, *x.shape[2:])


class VllmTarget(TritonTarget):
    family = VLLM

    def __init__(self, name: str, path: str, support: Support, function: str):
        self.name, self.path, self.support, self.function = name, path, support, function
        self.needs = (function,)

    def where(self, profile_device: str) -> str:
        return triton_where(profile_device)

    def call(self, case: Case, t: Tensors) -> torch.Tensor:
        o = self.recurrence(case, t, t.pool.view)
        return o.reshape(case.B, case.T, case.HV, case.V)

    def recurrence(self, case: Case, t: Tensors, pool: torch.Tensor) -> torch.Tensor:
        """The recurrence kernel's call on `pool` (written in place): its output [1, B * T, HV, V] (q.new_empty: rows
        the kernel skips hold whatever that memory held)."""
        api, b = self.family.api(), batch(case, t)
        common = dict(
            q=_packed(t.q),
            k=_packed(t.k),
            v=_packed(t.v),
            scale=case.scale,
            initial_state=pool,
            inplace_final_state=True,
            cu_seqlens=b.cu_seqlens,
            ssm_state_indices=b.indices,
            num_accepted_tokens=b.accepted,
            use_qk_l2norm_in_kernel=case.l2norm,
        )
        if self.function == RECURRENT:
            o, _ = getattr(api, RECURRENT)(g=_packed(t.g), beta=_packed(t.beta), **common)
        else:
            tokens = lambda x: x.reshape(b.tokens, case.HV)
            o, _ = getattr(api, SIGMOID)(
                A_log=t.A_log, a=tokens(t.a), b=tokens(t.b), dt_bias=t.dt_bias, beta=1.0, threshold=20.0, **common
            )
        return o


# Kernel preconditions as data (fuzz.targets.contract): the MTP port asserts K and V powers of 2, V >= 64
# (fused_gdn_decode_post_conv_mtp.py:163); vLLM routes K = V = 128 models to it (qwen_gdn_linear_attn.py:943-946).
MTP_CONTRACTS = (
    Contract(
        "vllm.mtp",
        "==0.34.0",
        head_dims=((8, 64), (16, 64), (128, 128)),
        why="K == next_power_of_2(K), V == next_power_of_2(V) >= 64",
    ),
)
_SPEC = Support(ops=frozenset({"decode", "verify"}), token_slots=True, strided_pool=True, engine="vllm")
MTP_SUPPORT = Support(ops=frozenset({"verify"}), token_slots=True, strided_pool=True, l2norm_off=False, engine="vllm")


@dataclass(frozen=True)
class OutputGate:
    """The gated RMSNorm's other inputs, from the case's seed: output_gate z [B * T, HV, V] and the norm weight [V] in
    the input dtype (the model's), the gate activation (Qwen's config: silu, or sigmoid) and eps."""

    z: torch.Tensor
    weight: torch.Tensor
    activation: str
    eps: float = NORM_EPS

    @classmethod
    def of(cls, case: Case, t: Tensors) -> OutputGate:
        vals = Values(case.seed, t.q.device)
        vals.stream = GATE_STREAM
        z = vals.normal(case.B * case.T, case.HV, case.V).to(t.q.dtype)
        weight = vals.uniform(0.5, 1.5, case.V).to(t.q.dtype)
        return cls(z, weight, ("silu", "sigmoid")[case.seed % 2])


class VllmMtp(VllmTarget):
    """The MTP port on the case's pool: its states are plain GDN states, which the oracle judges; its output is
    RMSNorm-gated (Semantics.epilogue), so the pair judges it against its partner's, fused_sigmoid_gating then the
    gated RMSNorm on the same case (SigmoidNorm), whose states must agree with the port's too."""

    contracts = MTP_CONTRACTS
    # what `gdn-fuzz export` says instead of a script (fuzz.export.snippets): the port's gated output is judged only
    # against its partner's, which a one-call script does not run
    not_exportable = (
        "vllm-mtp is judged as a pair (the MTP port against sigmoid gating + RMSNorm): a script of one library call "
        "cannot show it; replay its coordinate with gdn-fuzz probe --target vllm-mtp"
    )

    def __init__(self):
        super().__init__("vllm-mtp", "vllm.mtp", MTP_SUPPORT, MTP)
        self.needs = (MTP, SIGMOID, NORM)
        self.partner = SigmoidNorm("vllm-mtp[sigmoid gating + RMSNorm]", "vllm.mtp", MTP_SUPPORT, SIGMOID)

    def paired(self) -> SigmoidNorm:
        return self.partner

    def call(self, case: Case, t: Tensors) -> torch.Tensor:
        api, b, gate = self.family.api(), batch(case, t), OutputGate.of(case, t)
        out = t.output.view.reshape(b.tokens, case.HV, case.V)
        getattr(api, MTP)(
            mixed_qkv=torch.cat([x.reshape(b.tokens, -1) for x in (t.q, t.k, t.v)], dim=1),
            a=t.a.reshape(b.tokens, case.HV),
            b=t.b.reshape(b.tokens, case.HV),
            A_log=t.A_log,
            dt_bias=t.dt_bias,
            state_indices=b.indices,
            cu_seqlens=b.cu_seqlens,
            num_accepted_tokens=b.accepted,
            state=t.pool.view,
            output_gate=gate.z,
            norm_weight=gate.weight,
            out=out,
            scale=case.scale or case.K**-0.5,
            norm_eps=gate.eps,
            output_gate_activation=gate.activation,
        )
        return out.reshape(case.B, case.T, case.HV, case.V)


class SigmoidNorm(VllmTarget):
    """The MTP port's partner: fused_sigmoid_gating on the case's pool, then rmsnorm_fn with the port's output gate
    and weight (OutputGate), as the layer combines them. It stands only as the pair's other side (the kernel is
    vllm-sigmoid's to judge): its states and gated output are compared with the port's."""

    oracle_judged = False

    def __init__(self, name: str, path: str, support: Support, function: str):
        super().__init__(name, path, support, function)
        self.needs = (SIGMOID, NORM)

    def call(self, case: Case, t: Tensors) -> torch.Tensor:
        gate = OutputGate.of(case, t)
        core = self.recurrence(case, t, t.pool.view)
        normed = getattr(self.family.api(), NORM)(
            core[0], gate.weight, None, z=gate.z, eps=gate.eps, norm_before_gate=True, activation=gate.activation
        )
        return normed.reshape(case.B, case.T, case.HV, case.V)


TARGETS = (
    VllmTarget("vllm-recurrent", "vllm.fused_recurrent", _SPEC, RECURRENT),
    VllmTarget("vllm-sigmoid", "vllm.sigmoid_gating", _SPEC, SIGMOID),
    VllmMtp(),
)
