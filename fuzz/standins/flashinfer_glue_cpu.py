"""What SGLang's FlashInfer GDN glue imports from FlashInfer 0.7.4, on the CPU (fuzz.targets.sglang_glue_loader takes
this module as its `api`).

SGLang 0.5.23's `gdn_flashinfer._get_flashinfer_gdn_kernels` imports four entry points:
  * flashinfer.gdn_decode.gated_delta_rule_decode_pretranspose  -> `gated_delta_rule_decode_pretranspose`
  * flashinfer.gdn_decode.gated_delta_rule_mtp                  -> `gated_delta_rule_mtp`
  * flashinfer.gdn_prefill.chunk_gated_delta_rule               -> `chunk_gated_delta_rule`
  * flashinfer.gdn_kernels.gdn_decode_bf16_state.gated_delta_rule_mtp (internal, bf16 state; SGLang's SM100 verify
    adapter calls it)                                            -> `gated_delta_rule_mtp_bf16`
The first three are fuzz.standins.flashinfer_cpu's (the 0.7.4 API, no release contract: its chunk prefill already
takes the bf16 `initial_state` / `output_state` the SM100 glue passes, reading it as float32 and storing in the
output_state's dtype, as 0.7.4's SM100 kernel does). The fourth is an adapter below onto that stand-in's bf16-state
route (the pretranspose with a bf16 pool), which is where 0.7.4's own pretranspose sends a bf16 pool with T > 1.
"""

from __future__ import annotations

import torch

from fuzz.standins.flashinfer_cpu import (
    RUNS_ON,
    chunk_gated_delta_rule,
    gated_delta_rule_decode_pretranspose,
    gated_delta_rule_mtp,
)

__all__ = [
    "RUNS_ON",
    "chunk_gated_delta_rule",
    "gated_delta_rule_decode_pretranspose",
    "gated_delta_rule_mtp",
    "gated_delta_rule_mtp_bf16",
]


def gated_delta_rule_mtp_bf16(
    A_log,
    a,
    dt_bias,
    softplus_beta=1.0,
    softplus_threshold=20.0,
    q=None,
    k=None,
    v=None,
    b=None,
    initial_state_source=None,
    initial_state_indices=None,
    output_state_indices=None,
    intermediate_states_buffer=None,
    accepted_steps=None,
    ssm_state_indices=None,
    disable_state_update=False,
    use_qk_l2norm_in_kernel=True,
    scale=None,
    output=None,
    disable_output=False,
    recovery_steps=0,
):
    """flashinfer.gdn_kernels.gdn_decode_bf16_state.gated_delta_rule_mtp (0.7.4 signature): bf16 pool
    [pool, HV, V, K] read at `initial_state_indices` (-1: slot 0, as the stand-in's bf16 route), T tokens, an
    optional batch-row intermediate buffer [B, >=T, HV, V, K] bf16; returns the bf16 output [B, T, HV, V] alone
    (not a tuple). Its asserts are kept; what the stand-in does not model raises NotImplementedError."""
    unmodelled = {
        "softplus_beta": softplus_beta != 1.0,
        "softplus_threshold": softplus_threshold != 20.0,
        "accepted_steps": accepted_steps is not None,
        "ssm_state_indices": ssm_state_indices is not None,
        "disable_output": bool(disable_output),
        "recovery_steps": recovery_steps != 0,
    }
    if any(unmodelled.values()):
        raise NotImplementedError(f"the CPU stand-in does not model {[n for n, on in unmodelled.items() if on]}")
    assert q is not None and k is not None and v is not None
    assert b is not None and initial_state_source is not None
    q, k, v, a, b = (x.to(torch.bfloat16) for x in (q, k, v, a, b))  # 0.7.4 as_bf16: a value conversion
    assert output is None or output.dtype == torch.bfloat16, f"output must be bf16; got {output.dtype}"
    T, K, V = q.shape[1], q.shape[3], v.shape[3]
    assert K == 128 and V == 128, f"K and V must be 128, got K={K}, V={V}"
    assert initial_state_source.dtype == torch.bfloat16
    assert initial_state_indices is not None, "Pool mode is required: pass initial_state_indices."
    assert intermediate_states_buffer is None or intermediate_states_buffer.dtype == torch.bfloat16
    if T == 1 and (disable_state_update or intermediate_states_buffer is not None):
        raise NotImplementedError(
            "T = 1 with disable_state_update or an intermediate buffer: the stand-in's bf16 "
            "route (the pretranspose) refuses it, the internal kernel does not"
        )
    if output_state_indices is not None and output_state_indices.dtype != torch.int32:
        output_state_indices = output_state_indices.to(torch.int32)
    out, _ = gated_delta_rule_decode_pretranspose(
        q,
        k,
        v,
        None,
        A_log,
        a,
        dt_bias,
        b,
        scale=scale,
        output=output,
        use_qk_l2norm=use_qk_l2norm_in_kernel,
        initial_state=initial_state_source,
        initial_state_indices=initial_state_indices,
        output_state_indices=output_state_indices,
        intermediate_states_buffer=intermediate_states_buffer,
        disable_state_update=disable_state_update,
    )
    return out
