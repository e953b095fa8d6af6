"""Device smoke test of the .gpu bundle (and the .gpu-fi072 overlay).

Run on the H200 from the repo root:
    . .gpu/gpu_env.sh && python3 scripts/gpu_bundle_smoke.py            # candidate (0.7.4)
    . .gpu-fi072/use.sh && PYTHONPATH=$GDN_FI_BASELINE_PYTHONPATH python3 scripts/gpu_bundle_smoke.py

Prints the flashinfer version, the availability flags, and for one small call of each GDN entry
point (pretranspose T=1 fp32, fp32 MTP with an intermediate buffer of S=T+2 steps, bf16-pool MTP,
chunk_gated_delta_rule) the max abs error against a float64 recurrence. Two probes show known
0.7.2.post1 -> 0.7.4 fixes: large gate input (a+dt_bias=100: masked softplus NaN in 0.7.2 bf16
kernels) and intermediate buffers with S > T (0.7.2 kernels index them with stride T).
Every step is independent: a failure is printed and the next step runs.
"""

import sys
import time
import traceback

import flashinfer
import torch

print("flashinfer", flashinfer.__version__, flashinfer.__file__, flush=True)
dev = torch.device("cuda")
torch.manual_seed(0)
H, HV, K, V = 2, 4, 128, 128
B, T = 3, 3
scale = K**-0.5


def gates(A_log, a, dt_bias, b):
    x = a.double() + dt_bias.double()
    sp = torch.where(x > 20, x, torch.log1p(torch.exp(torch.clamp(x, max=20))))
    return torch.exp(-torch.exp(A_log.double()) * sp), torch.sigmoid(b.double())


def l2n(x):
    x = x.double()
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6)


def ref(q, k, v, g, beta, S, l2=True):
    """q,k [B,T,H,K]; v [B,T,HV,V]; g,beta [B,T,HV]; S [B,HV,V,K] -> o, states per step."""
    S = S.double().clone()
    if l2:
        q, k = l2n(q), l2n(k)
    q, k, v = q.double(), k.double(), v.double()
    rep = HV // q.shape[2]
    q = q.repeat_interleave(rep, 2) * scale
    k = k.repeat_interleave(rep, 2)
    outs, states = [], []
    for t in range(q.shape[1]):
        S = S * g[:, t, :, None, None]
        u = torch.einsum("bhvk,bhk->bhv", S, k[:, t])
        d = (v[:, t] - u) * beta[:, t, :, None]
        S = S + d[..., None] * k[:, t, :, None, :]
        outs.append(torch.einsum("bhvk,bhk->bhv", S, q[:, t]))
        states.append(S.clone())
    return torch.stack(outs, 1), torch.stack(states, 1)


def reference(q, k, v, A_log, a, dt_bias, b, S):
    """ref() with the gates of the raw inputs (the call's own arguments): o, states per step."""
    g, beta = gates(A_log, a, dt_bias, b)
    return ref(q, k, v, g, beta, S)


def errors(*pairs, nan_in=None):
    """'<label> err <largest absolute difference>' for each (label, got, want), then whether `nan_in` (if given)
    holds a NaN, joined by ', '."""
    parts = [f"{label} err {(got.double() - want).abs().max().item():.2e}" for label, got, want in pairs]
    return ", ".join(parts + ([] if nan_in is None else [f"nan {bool(torch.isnan(nan_in).any())}"]))


def inputs(T_, big_gate=False, B=B):
    bf = torch.bfloat16
    q = torch.randn(B, T_, H, K, device=dev, dtype=bf)
    k = torch.randn(B, T_, H, K, device=dev, dtype=bf)
    v = torch.randn(B, T_, HV, V, device=dev, dtype=bf) * 0.5
    A_log = (torch.rand(HV, device=dev) * 0.5).float()
    a = (torch.randn(B, T_, HV, device=dev) * 0.5).to(bf)
    if big_gate:
        a.fill_(100.0)
    dt_bias = (torch.randn(HV, device=dev) * 0.1).float()
    b = torch.randn(B, T_, HV, device=dev).to(bf)
    return q, k, v, A_log, a, dt_bias, b


def step(name, fn):
    t0 = time.time()
    try:
        msg = fn()
        print(f"[ok]   {name}: {msg}  ({time.time() - t0:.1f} s)", flush=True)
    except Exception as e:  # noqa: BLE001
        print(f"[FAIL] {name}: {type(e).__name__}: {e}  ({time.time() - t0:.1f} s)", flush=True)
        traceback.print_exc(limit=3, file=sys.stdout)


def flags():
    import flashinfer.gdn_decode as gd

    names = (
        "_GDN_DECODE_BF16_STATE_AVAILABLE",
        "_PRETRANSPOSE_AVAILABLE",
        "_MTP_AVAILABLE",
        "_NONTRANSPOSE_AVAILABLE",
        "_CAKE_GDN_AVAILABLE",
    )
    import flashinfer.gdn_prefill as gp

    return " ".join(f"{n}={getattr(gd, n, '<absent>')}" for n in names) + (
        f" prefill_sm90={gp.chunk_gated_delta_rule_sm90 is not None}"
    )


def pretranspose_t1():
    from flashinfer.gdn_decode import gated_delta_rule_decode_pretranspose as f

    q, k, v, A_log, a, dt_bias, b = inputs(1)
    S0 = torch.randn(B, HV, V, K, device=dev) * 0.1
    S = S0.clone()
    o, _ = f(q, k, v, S, A_log, a, dt_bias, b, use_qk_l2norm=True)
    ro, rs = reference(q, k, v, A_log, a, dt_bias, b, S0)
    return errors(("out", o, ro), ("state", S, rs[:, -1]))


def mtp_fp32(S_extra=2, big_gate=False, B=B):
    from flashinfer.gdn_decode import gated_delta_rule_mtp as f

    q, k, v, A_log, a, dt_bias, b = inputs(T, big_gate, B)
    pool = B + 2
    P0 = torch.randn(pool, HV, V, K, device=dev) * 0.1
    P = P0.clone()
    idx = torch.randperm(pool, device=dev)[:B].to(torch.int32)
    buf = torch.zeros(B, T + S_extra, HV, V, K, device=dev)
    o, _ = f(
        q,
        k,
        v,
        P,
        idx,
        A_log,
        a,
        dt_bias,
        b,
        intermediate_states_buffer=buf,
        disable_state_update=False,
        use_qk_l2norm=True,
    )
    ro, rs = reference(q, k, v, A_log, a, dt_bias, b, P0[idx.long()])
    final = ("final state", P[idx.long()], rs[:, -1])
    return errors(("out", o, ro), final, ("intermediate[:, :T]", buf[:, :T], rs), nan_in=o)


def mtp_bf16_pool(S_extra=0, big_gate=False):
    from flashinfer.gdn_kernels.gdn_decode_bf16_state import gated_delta_rule_mtp as f

    q, k, v, A_log, a, dt_bias, b = inputs(T, big_gate)
    pool = B + 2
    P0 = (torch.randn(pool, HV, V, K, device=dev) * 0.1).to(torch.bfloat16)
    P = P0.clone()
    idx = torch.tensor([2, 0, 4], device=dev, dtype=torch.int32)
    buf = torch.zeros(B, T + S_extra, HV, V, K, device=dev, dtype=torch.bfloat16)
    o = f(
        A_log,
        a,
        dt_bias,
        q=q,
        k=k,
        v=v,
        b=b,
        initial_state_source=P,
        initial_state_indices=idx,
        intermediate_states_buffer=buf,
        disable_state_update=False,
        use_qk_l2norm_in_kernel=True,
        scale=scale,
    )
    ro, rs = reference(q, k, v, A_log, a, dt_bias, b, P0[idx.long()])
    return errors(("out", o, ro), ("intermediate[:, :T]", buf[:, :T], rs), nan_in=o)


def prefill():
    from flashinfer.gdn_prefill import chunk_gated_delta_rule as f

    lens = [70, 5, 130]
    N, tot = len(lens), sum(lens)
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], device=dev, dtype=torch.int64)
    q = l2n(torch.randn(tot, H, K, device=dev)).to(torch.bfloat16)
    k = l2n(torch.randn(tot, H, K, device=dev)).to(torch.bfloat16)
    v = (torch.randn(tot, HV, V, device=dev) * 0.5).to(torch.bfloat16)
    g = torch.rand(tot, HV, device=dev) * 0.2 + 0.8
    beta = torch.rand(tot, HV, device=dev)
    S0 = torch.zeros(N, HV, V, K, device=dev)  # zero start: no layout question on input
    o, st = f(
        q,
        k,
        v,
        g,
        beta,
        scale=scale,
        initial_state=S0,
        output_final_state=True,
        cu_seqlens=cu,
        output_state=torch.empty_like(S0),
    )
    eo, es_vk, es_kv = 0.0, 0.0, 0.0
    for i, (s, e) in enumerate(zip(cu[:-1].tolist(), cu[1:].tolist())):
        ro, rs = ref(
            q[None, s:e],
            k[None, s:e],
            v[None, s:e],
            g[None, s:e].double(),
            beta[None, s:e].double(),
            S0[i : i + 1],
            l2=False,
        )
        eo = max(eo, (o[s:e].double() - ro[0]).abs().max().item())
        es_vk = max(es_vk, (st[i].double() - rs[0, -1]).abs().max().item())
        es_kv = max(es_kv, (st[i].double() - rs[0, -1].transpose(-1, -2)).abs().max().item())
    return (
        f"o{tuple(o.shape)} state{tuple(st.shape)}: out err {eo:.2e}, "
        f"state err as [V,K] {es_vk:.2e} / as [K,V] {es_kv:.2e}"
    )


step("flags", flags)
step("pretranspose T=1 fp32", pretranspose_t1)
step("fp32 MTP T=3, buffer S=T", lambda: mtp_fp32(0))
step("fp32 MTP T=3, buffer S=T+2 (0.7.2: stride-T bug expected)", lambda: mtp_fp32(2))
step("bf16-pool MTP T=3, buffer S=T", lambda: mtp_bf16_pool(0))
step("bf16-pool MTP T=3, buffer S=T+2 (0.7.2: stride-T bug expected)", lambda: mtp_bf16_pool(2))
step("bf16-pool MTP a=100 (0.7.2: NaN expected)", lambda: mtp_bf16_pool(0, True))
step("fp32 MTP a=100, B*HV=12 (inline kernel: finite in both)", lambda: mtp_fp32(0, True))
step("fp32 MTP a=100, B*HV=160 (warp-spec kernel; 0.7.2: NaN expected)", lambda: mtp_fp32(0, True, 40))
step("chunk_gated_delta_rule varlen", prefill)
