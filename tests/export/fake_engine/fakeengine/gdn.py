"""A serving engine's GDN glue, for tests/export: a T = 1 decode on a state pool [slots, HV, V, K] in float32, with the
SGLang recurrent update's contract (a slot index -1 runs from a zero state and writes no state). `broken` leaves the
pool unwritten (a lost state write). It imports the engine's config from the serving stack, as real glue does."""

import torch

from fakeengine.server import ServerArgs  # noqa: F401 - stubbed by the loader where the stack is absent

broken = False


def gdn_decode(q, k, v, g, beta, initial_state, initial_state_indices, scale=None):
    """q, k [B, 1, H, K], v [B, 1, HV, V], g, beta [B, 1, HV]: the output [B, 1, HV, V] in v's dtype."""
    B, _, H, K = q.shape
    HV = v.shape[2]
    scale = K**-0.5 if scale is None else scale
    out = torch.empty(v.shape, dtype=v.dtype, device=v.device)
    for n in range(B):
        slot = int(initial_state_indices[n])
        S = initial_state[slot].float() if slot >= 0 else initial_state.new_zeros(initial_state.shape[1:]).float()
        qn = q[n, 0].float() * torch.rsqrt((q[n, 0].float() ** 2).sum(-1, keepdim=True) + 1e-6) * scale
        kn = k[n, 0].float() * torch.rsqrt((k[n, 0].float() ** 2).sum(-1, keepdim=True) + 1e-6)
        qn, kn = qn.repeat_interleave(HV // H, 0), kn.repeat_interleave(HV // H, 0)
        S = torch.exp(g[n, 0].float())[:, None, None] * S
        u = beta[n, 0].float()[:, None] * (v[n, 0].float() - torch.einsum("hvk,hk->hv", S, kn))
        S = S + u[:, :, None] * kn[:, None, :]
        out[n, 0] = torch.einsum("hvk,hk->hv", S, qn).to(v.dtype)
        if slot >= 0 and not broken:
            initial_state[slot] = S.to(initial_state.dtype)
    return out
