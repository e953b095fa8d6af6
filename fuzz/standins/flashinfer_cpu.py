"""FlashInfer 0.7.4 GDN decode API (`flashinfer.gdn_decode`) and varlen prefill (`flashinfer.gdn_prefill`) on the
CPU, in float32 PyTorch.

Same signatures, routing and per-path padding contracts (shared/research/flashinfer_gdn.md 3.1, 3.3,
3.4, 3.6, 4), so a target override can fuzz it without a GPU. Independent of `reference/` on purpose.

Invariants, as the kernels keep them:
  * q, k, v, a, b are converted to bf16 (`as_bf16`), then all math is float32, vectorised over the
    batch rows and heads; one loop over the T tokens of a call.
  * The running state stays float32 across the T tokens; it is rounded to the pool / buffer dtype
    only when stored (each intermediate step, the final write-back).
  * All slot reads are gathered before any write, and every write goes through indexing assignment
    on the caller's tensor (index_put_ on the view), so strided pools are updated in place.
  * Pools are V-major [pool, HV, V, K]; decode output [B, T, HV, V] is produced in bf16, prefill output
    [tokens, HV, V] in q's dtype (the real prefill is a chunked algorithm; this is its recurrent equivalent).
Each behaviour a bug could hide in is one small method below: a mutant overrides one of them.
"""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import torch

_INDEX = (torch.int32, torch.int64)
# Where this module runs (fuzz.targets.contract.runs_on). The module itself reports no release: it is the 0.7.4 API
# at any size, without the release's preconditions (release_api below adds a release's).
RUNS_ON = CPU = "cpu"


def default_disable_state_update(disable_state_update: bool | None, stacklevel: int = 3) -> bool:
    """gated_delta_rule_mtp's disable_state_update: not given (None), 0.7.4 warns (at the caller of the method that
    calls this, by default) and takes True."""
    if disable_state_update is None:
        warnings.warn(
            "gated_delta_rule_mtp(): disable_state_update defaults to True; "
            "pass it explicitly (the default changes to False in 0.8.0)",
            stacklevel=stacklevel,
        )
        return True
    return disable_state_update


class FlashInferCPU:
    SOFTPLUS_THRESHOLD = 20.0  # hard-coded by the API (softplus_beta=1, threshold=20)
    L2NORM_EPS = 1e-6  # inside the rsqrt, as in the CuTe kernels

    def __init__(self):
        self.kernels = {}  # "compiled kernels": compile key -> the constexprs it was built with

    # ---- seams: one behaviour each ------------------------------------------------------------
    def to_bf16(self, x):
        """0.7.4 `as_bf16`: a value conversion (fp16/fp32 -> bf16), not a reinterpretation."""
        return x.to(torch.bfloat16)

    def softplus(self, x):
        return torch.where(x > self.SOFTPLUS_THRESHOLD, x, torch.log1p(torch.exp(x)))

    def head_map(self, H, HV):
        """qk head read by each value head: hv // (HV // H) (repeat_interleave GVA)."""
        if H <= 0 or HV % H:
            raise ValueError(f"HV={HV} must be a multiple of H={H}")
        return torch.arange(HV) // (HV // H)

    def read_slot(self, path, idx):
        """(slot, row runs). bf16: -1 reads (and later writes) sacrificial slot 0; fp32 paths skip the row."""
        if path == "bf16":
            return idx.clamp(min=0), torch.ones_like(idx, dtype=torch.bool)
        return idx, idx >= 0

    def write_slot(self, path, read, write):
        """(slot, written) for the rows that ran. MTP and prefill skip a negative write index; the others use
        slot 0."""
        if write is None:
            return read, torch.ones_like(read, dtype=torch.bool)
        if path in ("mtp", "prefill"):
            return write, write >= 0
        return write.clamp(min=0), torch.ones_like(write, dtype=torch.bool)

    def inter_row(self, rows, slots):
        """Intermediate buffers are indexed by batch row (i_n), not by pool slot."""
        return rows

    def inter_step(self, t, T):
        return t

    def should_write_back(self, disable_state_update, scatter):
        """Final write-back: not when disabled, not when per-token scatter already wrote h_T."""
        return not disable_state_update and not scatter

    def step(self, S, q, k, v, g, beta):
        """One token. S [R,HV,V,K] fp32; q,k [R,HV,K]; v [R,HV,V]; g,beta [R,HV]. Output reads the UPDATED state."""
        S = S * g[..., None, None]
        u = (v - torch.einsum("rhvk,rhk->rhv", S, k)) * beta[..., None]
        S = S + u[..., None] * k[..., None, :]
        return S, torch.einsum("rhvk,rhk->rhv", S, q)

    def load_pool(self, pool, slots):
        """The states of these slots, gathered (a copy) before any write."""
        return pool[slots]

    def store_pool(self, pool, slots, S):
        """Round on store and write into the caller's pool view itself (in place, strides honoured)."""
        pool[slots] = S.to(pool.dtype)

    def pad_output(self, out, rows):
        """fp32 pretranspose T=1 writes skipped rows' output as 0 (even into a caller buffer)."""
        out[rows] = 0

    def compile_key(self, spec):
        """CuTe compile-cache key: every constexpr, dtypes and scale included."""
        return tuple(sorted(spec.items()))

    # ---- machinery ----------------------------------------------------------------------------
    def kernel(self, **spec):
        """The cached kernel for `spec`; the math reads scale / l2norm / dt_bias dtype from it, so a
        key that omits one of them serves a stale kernel, as a real compile cache would."""
        return self.kernels.setdefault(self.compile_key(spec), SimpleNamespace(**spec))

    def l2norm(self, x):
        return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + self.L2NORM_EPS)

    def gates(self, A_log, a, dt_bias, b):
        sp = self.softplus(a.float() + dt_bias.float())
        return torch.exp(-torch.exp(A_log.float()) * sp), torch.sigmoid(b.float())

    def _run(
        self,
        path,
        q,
        k,
        v,
        pool,
        read_idx,
        write_idx,
        A_log,
        a,
        dt_bias,
        b,
        scale,
        output,
        use_l2norm,
        buf=None,
        token_slots=None,
        write_back=True,
    ):
        B, T, H, K = q.shape
        HV, V = v.shape[2:]
        assert k.shape == q.shape and v.shape[:2] == (B, T), f"q {q.shape} / k {k.shape} / v {v.shape}"
        assert a.shape == b.shape == (B, T, HV), f"a, b must be [B, T, HV] = {(B, T, HV)}"
        assert A_log.shape == dt_bias.shape == (HV,), "A_log, dt_bias must be [HV]"
        assert pool.shape[1:] == (HV, V, K), f"state pool must be [pool, {HV}, {V}, {K}], got {pool.shape}"
        for name, idx in (("initial_state_indices", read_idx), ("output_state_indices", write_idx)):
            assert idx is None or (idx.shape == (B,) and idx.dtype in _INDEX), f"{name} must be int32/int64 [B]"
        hmap = self.head_map(H, HV)
        kern = self.kernel(
            path=path,
            T=T,
            H=H,
            HV=HV,
            K=K,
            V=V,
            state_dtype=pool.dtype,
            dt_bias_dtype=dt_bias.dtype,
            index_dtype=read_idx.dtype,
            scale=K**-0.5 if scale is None else float(scale),
            use_l2norm=bool(use_l2norm),
        )
        out = torch.zeros(B, T, HV, V, dtype=torch.bfloat16, device=q.device) if output is None else output
        slot, runs = self.read_slot(path, read_idx.long())
        if path == "pretranspose":
            self.pad_output(out, (~runs).nonzero().squeeze(1))
        rows = runs.nonzero().squeeze(1)
        slot = slot[rows]
        qf, kf = (self.to_bf16(x)[rows].float() for x in (q, k))
        if kern.use_l2norm:
            qf, kf = self.l2norm(qf), self.l2norm(kf)
        qf, kf = qf[:, :, hmap] * kern.scale, kf[:, :, hmap]  # [R, T, HV, K]
        vf = self.to_bf16(v)[rows].float()
        g, beta = self.gates(A_log, self.to_bf16(a)[rows], dt_bias.to(kern.dt_bias_dtype), self.to_bf16(b)[rows])
        S = self.load_pool(pool, slot).float()  # gathered before any write
        irow = None if buf is None else self.inter_row(rows, slot)
        for t in range(T):
            S, o = self.step(S, qf[:, t], kf[:, t], vf[:, t], g[:, t], beta[:, t])
            out[rows, t] = o.to(torch.bfloat16).to(out.dtype)  # kernel output is bf16
            if buf is not None:
                buf[irow, self.inter_step(t, T)] = S.to(buf.dtype)
            if token_slots is not None:  # negative = OOB write in the real kernel; skipped here
                ts = token_slots[rows, t].long()
                self.store_pool(pool, ts[ts >= 0], S[ts >= 0])
        if write_back:
            wslot, written = self.write_slot(path, slot, None if write_idx is None else write_idx.long()[rows])
            self.store_pool(pool, wslot[written], S[written])
        return out.to(q.dtype) if output is None and q.dtype != out.dtype else out  # result follows q.dtype

    # ---- public API (0.7.4 signatures) ---------------------------------------------------------
    def gated_delta_rule_decode_pretranspose(
        self,
        q,
        k,
        v,
        state,
        A_log,
        a,
        dt_bias,
        b,
        scale=None,
        output=None,
        use_qk_l2norm=True,
        initial_state=None,
        initial_state_indices=None,
        output_state_indices=None,
        intermediate_states_buffer=None,
        disable_state_update=False,
        backend="auto",
    ):
        B, T = q.shape[:2]
        assert backend in ("auto", "flashinfer", "cake_gdn", "rubin"), f"unknown backend {backend!r}"
        if T == 1 and (intermediate_states_buffer is not None or disable_state_update):
            raise ValueError("intermediate_states_buffer and disable_state_update are supported only with T > 1")
        if backend == "cake_gdn":
            cake = self.cake_decode(
                (q, k, v, A_log, a, dt_bias, b),
                initial_state,
                (initial_state_indices, output_state_indices),
                scale=scale,
                output=output,
                use_qk_l2norm=use_qk_l2norm,
            )
            if cake is not None:
                return cake
        use_pool = initial_state is not None
        assert use_pool == (initial_state_indices is not None), (
            "initial_state and initial_state_indices must be provided together"
        )
        assert output_state_indices is None or use_pool, "output_state_indices requires initial_state"
        assert A_log.dtype == torch.float32, f"A_log must be float32, got {A_log.dtype}"
        assert dt_bias.dtype in (torch.bfloat16, torch.float32), f"dt_bias must be bf16/fp32, got {dt_bias.dtype}"
        pool = initial_state if use_pool else state
        assert pool is not None, "Either state or initial_state must be provided"
        assert use_pool or pool.shape[0] == B, f"state must be [B={B}, HV, V, K], got {pool.shape}"
        assert pool.stride(-1) == 1, f"state must be K-contiguous, got stride {pool.stride()}"
        # Non-pool mode: state is a pool of size B read and written at arange(B).
        idx = initial_state_indices if use_pool else torch.arange(B, dtype=torch.int32)
        args = (q, k, v, pool, idx, output_state_indices, A_log, a, dt_bias, b, scale, output, use_qk_l2norm)
        if pool.dtype == torch.bfloat16:  # bf16 state kernels (gdn_decode_bf16_state), T >= 1
            buf = intermediate_states_buffer
            assert buf is None or (buf.dtype == torch.bfloat16 and buf.shape[0] == B and buf.shape[1] >= T), (
                f"intermediate_states_buffer must be bf16 [B={B} exactly, >={T}, HV, V, K]"
            )
            return self._run(
                "bf16", *args, buf=buf, write_back=self.should_write_back(disable_state_update, False)
            ), pool
        assert pool.dtype == torch.float32, f"state must be float32 or bfloat16, got {pool.dtype}"
        if T > 1:
            assert use_pool, f"fp32 state with T={T} > 1 requires pool mode (initial_state + indices)"
            return self.gated_delta_rule_mtp(
                q,
                k,
                v,
                initial_state,
                initial_state_indices,
                A_log,
                a,
                dt_bias,
                b,
                scale=scale,
                output=output,
                intermediate_states_buffer=intermediate_states_buffer,
                disable_state_update=disable_state_update,
                use_qk_l2norm=use_qk_l2norm,
                output_state_indices=output_state_indices,
            )
        return self._run("pretranspose", *args), pool

    def gated_delta_rule_mtp(
        self,
        q,
        k,
        v,
        initial_state,
        initial_state_indices,
        A_log,
        a,
        dt_bias,
        b,
        scale=None,
        output=None,
        intermediate_states_buffer=None,
        ssm_state_indices=None,
        disable_state_update=None,
        use_qk_l2norm=True,
        output_state_indices=None,
        cache_replayssm=False,
        replayssm_rawv=None,
        replayssm_rawk=None,
        replayssm_g=None,
        replayssm_beta=None,
    ):
        windows = (replayssm_rawv, replayssm_rawk, replayssm_g, replayssm_beta)
        if cache_replayssm:
            return self.replayssm_verify(
                (q, k, v, initial_state, initial_state_indices, A_log, a, dt_bias, b),
                windows,
                scale=scale,
                output=output,
                use_qk_l2norm=use_qk_l2norm,
                output_state_indices=output_state_indices,
                mtp_only=(disable_state_update, intermediate_states_buffer, ssm_state_indices),
            )
        self.replayssm_unused(windows)
        disable_state_update = default_disable_state_update(disable_state_update)
        B, T = q.shape[:2]
        pool, buf = initial_state, intermediate_states_buffer
        assert pool.dtype == torch.float32, f"initial_state must be float32, got {pool.dtype}"
        assert A_log.dtype == torch.float32, f"A_log must be float32, got {A_log.dtype}"
        assert dt_bias.dtype in (torch.bfloat16, torch.float32), f"dt_bias must be bf16/fp32, got {dt_bias.dtype}"
        # Batch-row indexed; a [:, :T] view of a bigger buffer is legal in 0.7.4 (inner dims contiguous).
        assert buf is None or (
            buf.dtype == torch.float32 and buf.shape[0] >= B and buf.shape[1] >= T and buf[0, 0].is_contiguous()
        ), f"intermediate_states_buffer must be fp32 [>={B}, >={T}, HV, V, K] with contiguous inner dims"
        if ssm_state_indices is not None:
            assert buf is None, "ssm_state_indices and intermediate_states_buffer are mutually exclusive"
            assert not disable_state_update, "ssm_state_indices requires disable_state_update=False"
            assert T >= 2, f"ssm_state_indices requires T >= 2 (got T={T})"
            assert ssm_state_indices.shape == (B, T) and ssm_state_indices.dtype == torch.int32, (
                f"ssm_state_indices must be int32 [B={B}, T={T}]"
            )
        read, write = initial_state_indices, output_state_indices
        args = (q, k, v, pool, read, write, A_log, a, dt_bias, b, scale, output, use_qk_l2norm)
        out = self._run(
            "mtp",
            *args,
            buf=buf,
            token_slots=ssm_state_indices,
            write_back=self.should_write_back(disable_state_update, ssm_state_indices is not None),
        )
        return out, initial_state

    def cake_decode(self, inputs, pool, slots, scale, output, use_qk_l2norm):
        """gated_delta_rule_decode_pretranspose(backend="cake_gdn"): None here, where the default path serves it
        (FlashInferSM100CPU has the Cake backend)."""
        return None

    def replayssm_verify(self, inputs, windows, scale, output, use_qk_l2norm, output_state_indices, mtp_only):
        """gated_delta_rule_mtp(cache_replayssm=True); `inputs` its first nine arguments, `windows` the replayssm_*
        buffers, `mtp_only` (disable_state_update, intermediate_states_buffer, ssm_state_indices)."""
        raise NotImplementedError("cache_replayssm (ReplaySSM) runs on SM100/SM103/SM120 only")

    def replayssm_unused(self, windows) -> None:
        """The replayssm_* buffers of a gated_delta_rule_mtp call without cache_replayssm: ignored here."""

    def gated_delta_rule_decode(
        self, q, k, v, state, A_log, a, dt_bias, b, scale=None, output=None, use_qk_l2norm=True, backend="auto"
    ):
        """K-major fp32 state [B, HV, K, V], T = 1, no pool or padding."""
        B, T = q.shape[:2]
        assert T == 1, f"gated_delta_rule_decode supports T=1 only, got T={T}"
        assert state.dtype == torch.float32 and state.shape[0] == B, f"state must be fp32 [B={B}, HV, K, V]"
        vmajor = state.transpose(-1, -2)  # the same memory seen V-major, so the update lands in place
        out = self._run(
            "pretranspose",
            q,
            k,
            v,
            vmajor,
            torch.arange(B, dtype=torch.int32),
            None,
            A_log,
            a,
            dt_bias,
            b,
            scale,
            output,
            use_qk_l2norm,
        )
        return out, state

    def chunk_gated_delta_rule(
        self,
        q,
        k,
        v,
        g=None,
        beta=None,
        scale=None,
        initial_state=None,
        output_final_state=False,
        cu_seqlens=None,
        use_qk_l2norm_in_kernel=False,
        output=None,
        output_state=None,
        state_checkpoints=None,
        checkpoint_cu_starts=None,
        checkpoint_every_n_tokens=0,
        use_cp="auto",
        state_indices=None,
        _cp_chunk_len=None,
        backend="auto",
        max_seqlen=None,
        *,
        gate_domain="linear",
        output_state_indices=None,
        **unmodelled,
    ):
        """Varlen prefill: q, k [tokens, H, K], v [tokens, HV, V], g (linear alpha) and beta fp32 [tokens, HV].
        With state_indices, initial_state / output_state are pools. Checkpoints, in-kernel gating, logit beta and
        the Cake / cuDNN / SM120 backends are not modelled."""
        extras = [name for name, x in unmodelled.items() if x is not None and x is not False]
        extras += ["checkpoints"] if checkpoint_every_n_tokens or state_checkpoints is not None else []
        if extras or backend not in ("auto", "flashinfer"):
            raise NotImplementedError(
                f"the CPU stand-in models the native prefill kernels only (got {extras}, backend {backend!r})"
            )
        assert gate_domain in ("linear", "log"), f"gate_domain must be 'linear' or 'log', got {gate_domain!r}"
        total, H, K = q.shape
        HV, V = v.shape[1:]
        assert q.dtype in (torch.bfloat16, torch.float16) and k.dtype == v.dtype == q.dtype, (
            f"q, k, v must share an fp16/bf16 dtype, got {q.dtype}, {k.dtype}, {v.dtype}"
        )
        assert cu_seqlens is not None and cu_seqlens.dtype in _INDEX and cu_seqlens.numel() >= 2, (
            "cu_seqlens must be int32/int64 [N + 1], N >= 1"
        )
        cu = cu_seqlens.tolist()
        N = len(cu) - 1
        g, beta = self._prefill_gates(g, beta, (total, HV), gate_domain)
        read = self._prefill_reads(N, state_indices, output_state_indices, output_state, output_final_state)
        S = torch.zeros(N, HV, V, K, device=q.device)  # one running state per sequence; read id -1: the zero state
        if initial_state is not None:
            assert initial_state.shape[1:] == (HV, V, K), f"initial_state must be [*, {HV}, {V}, {K}]"
            S[read >= 0] = initial_state[read[read >= 0]].float()  # gathered before any write
        if use_qk_l2norm_in_kernel:  # normalized in fp32, rounded back to the input dtype before the kernel
            q, k = (self.l2norm(x.float()).to(x.dtype) for x in (q, k))
        hmap = self.head_map(H, HV)
        qf = q.float()[:, hmap] * (K**-0.5 if not scale else float(scale))  # scale 0 also means the default
        kf, vf = k.float()[:, hmap], v.float()
        out = torch.empty(total, HV, V, dtype=q.dtype, device=q.device) if output is None else output
        assert out.dtype == q.dtype and out.shape == (total, HV, V), f"output must be {q.dtype} [{total}, {HV}, {V}]"
        for n in range(N):
            for i in range(cu[n], cu[n + 1]):
                S[n : n + 1], o = self.step(
                    S[n : n + 1], qf[i : i + 1], kf[i : i + 1], vf[i : i + 1], g[i : i + 1], beta[i : i + 1]
                )
                out[i] = o[0].to(out.dtype)
        if not output_final_state:
            return out
        return out, self._prefill_store(S, read, output_state_indices, output_state, cu_seqlens)

    def _prefill_gates(self, g, beta, shape, gate_domain):
        """chunk_gated_delta_rule's g as the linear alpha, and beta: fp32 `shape` [tokens, HV], ones where not given."""
        ones = torch.ones(shape)
        g, beta = ones if g is None else g, ones if beta is None else beta
        assert g.dtype == beta.dtype == torch.float32 and g.shape == beta.shape == shape, (
            f"g, beta must be fp32 [{shape[0]}, {shape[1]}]"
        )
        return torch.exp(g) if gate_domain == "log" else g, beta

    def _prefill_reads(self, N, state_indices, output_state_indices, output_state, output_final_state):
        """chunk_gated_delta_rule's pool arguments, checked: the slot each of the N sequences reads (int64; -1, the
        zero state, only beside output_state_indices); the sequence's own index without state_indices."""
        split = output_state_indices is not None
        assert not split or (state_indices is not None and output_state is not None and output_final_state), (
            "output_state_indices requires state_indices, an output_state pool and output_final_state=True"
        )
        if state_indices is None:  # sequence-ordered states [N, HV, V, K]
            state_indices = torch.arange(N)
        elif output_final_state and output_state is None:
            raise ValueError("state_indices requires an explicit output_state pool")
        for name, idx in (("state_indices", state_indices), ("output_state_indices", output_state_indices)):
            assert idx is None or (idx.shape == (N,) and idx.dtype in _INDEX), f"{name} must be int32/int64 [{N}]"
        read = state_indices.long()
        if not split and bool((read < 0).any()):  # the kernel would read before the pool
            raise ValueError("state_indices: -1 needs output_state_indices")
        return read

    def _prefill_store(self, S, read, output_state_indices, output_state, cu_seqlens):
        """The final states S [N, HV, V, K] stored into output_state (a new [N, HV, V, K] when not given) at the write
        slots, an empty sequence storing nothing; returns output_state."""
        if output_state is None:
            output_state = torch.empty(S.shape, device=S.device)
        write = None if output_state_indices is None else output_state_indices.long()
        slot, written = self.write_slot("prefill", read, write)
        written &= (cu_seqlens[1:] > cu_seqlens[:-1]).to(written.device)  # an empty sequence stores nothing
        self.store_pool(output_state, slot[written], S[written])
        return output_state


_DEFAULT = FlashInferCPU()
gated_delta_rule_decode_pretranspose = _DEFAULT.gated_delta_rule_decode_pretranspose
gated_delta_rule_mtp = _DEFAULT.gated_delta_rule_mtp
gated_delta_rule_decode = _DEFAULT.gated_delta_rule_decode
chunk_gated_delta_rule = _DEFAULT.chunk_gated_delta_rule

__all__ = [
    "FlashInferCPU",
    "chunk_gated_delta_rule",
    "gated_delta_rule_decode",
    "gated_delta_rule_decode_pretranspose",
    "gated_delta_rule_mtp",
]


# ---- older releases' APIs -------------------------------------------------------------------------------------------
# The stand-in as a release's API: the four entry points take exactly that release's parameters, in its positional
# order, with its defaults (read from each wheel's AST, docs/research/flashinfer-releases.md §1); any other keyword is
# a TypeError, as there. Each reports the release it imitates (`__version__`; `api_release` too) and RUNS_ON = "cpu":
# the fuzzer holds it to that release's contract (fuzz.targets.flashinfer_contract: head dims, state dtypes, T) but not
# to its GPU, and a call outside the contract raises AssertionError, as the release's asserts do. What runs inside is
# the full (0.7.4) stand-in above: these objects mimic a release's signatures and preconditions, never its kernels'
# routing or bugs.
_COMMON = "q, k, v, state, A_log, a, dt_bias, b, scale=None, output=None, use_qk_l2norm=True"
_MTP = "q, k, v, initial_state, initial_state_indices, A_log, a, dt_bias, b, scale=None, output=None"
_CHUNK = (
    "q, k, v, g=None, beta=None, scale=None, initial_state=None, output_final_state=False, cu_seqlens=None, "
    "use_qk_l2norm_in_kernel=False, output=None, output_state=None"
)
_CHECKPOINTS = ", state_checkpoints=None, checkpoint_cu_starts=None, checkpoint_every_n_tokens=0"
_POOL_0_6_9 = ", initial_state=None, initial_state_indices=None, output_state_indices=None"
_VERIFY_0_7_0 = ", intermediate_states_buffer=None, disable_state_update=False, backend='auto'"
_MTP_0_6_14 = (
    ", intermediate_states_buffer=None, ssm_state_indices=None, disable_state_update=None, "
    "use_qk_l2norm=True, output_state_indices=None"
)
_REPLAYSSM = ", cache_replayssm=False, replayssm_rawv=None, replayssm_rawk=None, replayssm_g=None, replayssm_beta=None"
_CHUNK_0_7_1 = (
    _CHUNK + _CHECKPOINTS + ", use_cp='auto', state_indices=None, _cp_chunk_len=None, backend='auto', max_seqlen=None"
)
RELEASE_SIGNATURES = {
    "0.6.5": {  # no pool on the pretranspose; MTP's disable_state_update defaults to True
        "gated_delta_rule_decode_pretranspose": _COMMON,
        "gated_delta_rule_mtp": _MTP + ", intermediate_states_buffer=None, disable_state_update=True, "
        "use_qk_l2norm=True",
        "gated_delta_rule_decode": _COMMON,
        "chunk_gated_delta_rule": _CHUNK,
    },
    "0.6.10": {  # 0.6.9 .. 0.6.13 pretranspose, 0.6.7 .. 0.6.13 MTP, 0.6.8 .. 0.6.13 prefill
        "gated_delta_rule_decode_pretranspose": _COMMON + _POOL_0_6_9,
        "gated_delta_rule_mtp": _MTP + ", intermediate_states_buffer=None, disable_state_update=None, "
        "use_qk_l2norm=True",
        "gated_delta_rule_decode": _COMMON,
        "chunk_gated_delta_rule": _CHUNK + _CHECKPOINTS,
    },
    "0.6.16.post4": {  # 0.6.14 MTP (positional order changed), 0.6.16 prefill state_indices
        "gated_delta_rule_decode_pretranspose": _COMMON + _POOL_0_6_9,
        "gated_delta_rule_mtp": _MTP + _MTP_0_6_14,
        "gated_delta_rule_decode": _COMMON,
        "chunk_gated_delta_rule": _CHUNK + _CHECKPOINTS + ", use_cp='auto', state_indices=None",
    },
    "0.7.2.post1": {  # 0.7.0 pretranspose / decode, 0.7.2 MTP (ReplaySSM), 0.7.1 prefill
        "gated_delta_rule_decode_pretranspose": _COMMON + _POOL_0_6_9 + _VERIFY_0_7_0,
        "gated_delta_rule_mtp": _MTP + _MTP_0_6_14 + _REPLAYSSM,
        "gated_delta_rule_decode": _COMMON + ", backend='auto'",
        "chunk_gated_delta_rule": _CHUNK_0_7_1,
    },
    "0.7.4": {
        "gated_delta_rule_decode_pretranspose": _COMMON + _POOL_0_6_9 + _VERIFY_0_7_0,
        "gated_delta_rule_mtp": _MTP + _MTP_0_6_14 + _REPLAYSSM,
        "gated_delta_rule_decode": _COMMON + ", backend='auto'",
        "chunk_gated_delta_rule": _CHUNK_0_7_1 + ", *, gate_domain='linear', use_gate_in_kernel=False, A_log=None, "
        "dt_bias=None, beta_is_logit=False, cu_seqlens_cpu=None, output_state_indices=None, "
        "checkpoint_state_indices=None, prefix_lens=None",
    },
}
RELEASE_SIGNATURES["0.6.11"] = RELEASE_SIGNATURES["0.6.10"]  # same four signatures (0.6.11 rewrote bf16 kernels)


def _signature(name: str, params: str):
    import inspect

    namespace: dict = {}
    exec(f"def {name}({params}):\n    pass", namespace)  # our own constant parameter lists
    return inspect.signature(namespace[name])


# The contract path each entry point runs (the pretranspose by its state dtype: bf16 kernels or the fp32 path)
_PATHS = {
    "gated_delta_rule_mtp": "flashinfer.mtp.fp32",
    "gated_delta_rule_decode": "flashinfer.decode.kmajor",
    "chunk_gated_delta_rule": "flashinfer.prefill.chunk",
}


def require_contract(release: str, name: str, arguments: dict) -> None:
    """Raise AssertionError, as `release` does, when the call's head dims, state dtype or T are outside its contract
    (fuzz.targets.flashinfer_contract; the device requirement is the one thing a CPU stand-in does not keep)."""
    from fuzz.targets.contract import contract_for
    from fuzz.targets.flashinfer_contract import CONTRACTS

    state = next((arguments.get(k) for k in ("initial_state", "state") if arguments.get(k) is not None), None)
    bf16 = state is not None and state.dtype == torch.bfloat16
    path = _PATHS.get(name) or ("flashinfer.bf16" if bf16 else "flashinfer.pretranspose.fp32")
    row = contract_for(CONTRACTS, path, release)
    q, v = arguments["q"], arguments["v"]
    T = None if name == "chunk_gated_delta_rule" else q.shape[1]
    why = row and row.violation(q.shape[-1], v.shape[-1], "bf16" if bf16 else "fp32", T)
    if why:
        raise AssertionError(f"flashinfer-python {release} {name}: {why} ({row.why})")


def _with_signature(name: str, params: str, full, release: str):
    """`full` behind exactly `params`: binding raises TypeError as the release would, a call outside the release's
    contract AssertionError (require_contract); the bound arguments (release defaults applied) go to `full` as
    keywords."""
    sig = _signature(name, params)

    def entry(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        require_contract(release, name, bound.arguments)
        return full(**bound.arguments)

    entry.__name__ = entry.__qualname__ = name
    entry.__signature__ = sig
    entry.__doc__ = f"{name}{sig} (the API of flashinfer-python as mimicked), run by the CPU stand-in"
    return entry


def release_api(release: str, standin: FlashInferCPU | None = None) -> SimpleNamespace:
    """The stand-in (a fresh FlashInferCPU unless given) with `release`'s four signatures and contract, reporting
    `release` (`__version__`, `api_release`) and RUNS_ON = "cpu"."""
    standin = FlashInferCPU() if standin is None else standin
    entries = {
        name: _with_signature(name, params, getattr(standin, name), release)
        for name, params in RELEASE_SIGNATURES[release].items()
    }
    return SimpleNamespace(__version__=release, api_release=release, RUNS_ON=CPU, standin=standin, **entries)


release_0_6_5 = release_api("0.6.5")
release_0_6_10 = release_api("0.6.10")
release_0_6_11 = release_api("0.6.11")
release_0_6_16 = release_api("0.6.16.post4")
release_0_7_2 = release_api("0.7.2.post1")
release_0_7_4 = release_api("0.7.4")
RELEASES = {
    "0.6.5": release_0_6_5,
    "0.6.10": release_0_6_10,
    "0.6.11": release_0_6_11,
    "0.6.16.post4": release_0_6_16,
    "0.7.2.post1": release_0_7_2,
    "0.7.4": release_0_7_4,
}
__all__ += [
    "RELEASE_SIGNATURES",
    "RELEASES",
    "RUNS_ON",
    "release_api",
    "require_contract",
    "release_0_6_5",
    "release_0_6_10",
    "release_0_6_11",
    "release_0_6_16",
    "release_0_7_2",
    "release_0_7_4",
]
