"""FlashInfer 0.7.4's SM100-only GDN paths on the CPU: the Cake decode backend (`backend="cake_gdn"`) and ReplaySSM
(`gated_delta_rule_mtp(cache_replayssm=True)` + `gated_delta_rule_replayssm_commit`), on top of
fuzz.standins.flashinfer_cpu (every other call is that stand-in's).

Modelled as the 0.7.4 source has them (gdn_decode.py, jit/cake_gdn.py, the Cake CUDA bodies,
gdn_kernels/gdn_decode_mtp.py, gdn_kernels/gdn_replayssm_spec_fold.py):
  * Cake decode: the host contract of _run_cake_gdn_decode_pretranspose / _run_cake_gdn_decode_nontranspose, each
    violation a CakeGDNUnsupportedError; then a slot outside [0, pool) (-1 among them) skips its row's state I/O
    (read: no state read or write; write: no store), the output of a skipped read is left untouched on a bf16 pool
    and written as 0 on an fp32 pool. FLASHINFER_CAKE_GDN_VALIDATE_SLOTS=1 (read at import, as there) rejects
    slots other than -1 outside the pool. Not modelled: the manifest (geometry, exact scale, the multi-token rows
    keyed by batch size) and the compute capability: a stand-in has no hardware limits.
  * ReplaySSM verify: the MTP output with a frozen pool; each live row's window at its read slot: raw v and
    pre-normalization k as bf16, log-decay and sigmoid-beta as fp32; a padded row touches neither output nor window.
  * ReplaySSM commit: fp32 replay of the first accept_lens[n] window tokens into checkpoint[:, slot] (k normalized
    when asked), slots <= null_block_id and accept 0 skipped, optional tracked step copies.
K = V = 128 and the compute-capability checks are hardware limits and are not modelled; every other check is.
Each behaviour a bug could hide in is one method (cake_slots, cache_window, commit_row), so a mutant overrides one.
"""

from __future__ import annotations

import os

import torch

from fuzz.standins.flashinfer_cpu import RUNS_ON, FlashInferCPU, default_disable_state_update

_VALIDATE_SLOTS = os.environ.get("FLASHINFER_CAKE_GDN_VALIDATE_SLOTS", "0") == "1"


class CakeGDNUnsupportedError(NotImplementedError):
    """The explicit Cake backend cannot serve the requested contract (as flashinfer.jit.cake_gdn's)."""


def _require(ok: bool, why: str) -> None:
    if not ok:
        raise CakeGDNUnsupportedError(why)


class FlashInferSM100CPU(FlashInferCPU):
    # ---- seams ------------------------------------------------------------------------------
    def write_slot(self, path, read, write):
        """Cake skips a store whose slot is outside the pool (cake_slots mapped those to -1)."""
        if path.startswith("cake"):
            return write, write >= 0
        return super().write_slot(path, read, write)

    def cake_slots(self, idx, pool_size):
        """The kernels' slot test: valid iff 0 <= slot < pool; an invalid slot is -1 from here on."""
        idx = idx.long()
        valid = (idx >= 0) & (idx < pool_size)
        if _VALIDATE_SLOTS and not bool((valid | (idx == -1)).all()):
            raise RuntimeError(f"device-side assert: slots must be -1 or in [0, {pool_size})")
        return torch.where(valid, idx, torch.full_like(idx, -1))

    def cache_window(self, windows, slot, k, v, log_g, beta):
        """Window of one live row at its pool slot: k [T, H, K], v [T, HV, V] (bf16), log_g, beta [T, HV] fp32."""
        rawv, rawk, g_cache, beta_cache = windows
        rawv[slot] = v.transpose(0, 1).to(rawv.dtype)
        rawk[slot] = k.transpose(0, 1).to(rawk.dtype)
        g_cache[slot] = log_g.transpose(0, 1)
        beta_cache[slot] = beta.transpose(0, 1)

    def commit_row(self, S, rawk, rawv, log_g, beta, hmap, accepted, use_l2norm, track=None):
        """Replay `accepted` tokens into S [HV, V, K] fp32 from one slot's window: rawk [H, T, K], rawv [HV, T, V],
        log_g, beta [HV, T]. track = (step, callback): the state after that (0-based) token goes to the callback."""
        for t in range(accepted):
            k = rawk[hmap, t].float()
            k = self.l2norm(k) if use_l2norm else k
            S, _ = self.step(
                S[None], k[None], k[None], rawv[:, t].float()[None], torch.exp(log_g[:, t])[None], beta[:, t][None]
            )
            S = S[0]
            if track is not None and track[0] == t:
                track[1](S)
        return S

    # ---- Cake -------------------------------------------------------------------------------
    def _cake_inputs(self, q, k, v, a, b, A_log, dt_bias, use_qk_l2norm):
        B, T, H, K = q.shape
        HV = v.shape[2]
        _require(
            all(x.dtype == torch.bfloat16 for x in (q, k, v, a, b)) and A_log.dtype == dt_bias.dtype == torch.float32,
            "GDN non-CP decode requires BF16 Q/K/V/gates and FP32 A_log/dt_bias",
        )
        _require(bool(use_qk_l2norm), "GDN non-CP T=1 child contract requires in-kernel Q/K L2 normalization")
        _require(H > 0 and HV > 0 and HV % H == 0, "unsupported decode head mapping")
        _require(T == 1, "the CPU stand-in models the Cake T=1 rows only (multi-token rows are exact batch sizes)")

    def cake_decode(self, inputs, pool, slots, scale, output, use_qk_l2norm):
        """gated_delta_rule_decode_pretranspose(backend="cake_gdn") (the module doc): `inputs` (q, k, v, A_log, a,
        dt_bias, b), `pool` its initial_state, `slots` (initial_state_indices, output_state_indices)."""
        q, k, v, A_log, a, dt_bias, b = inputs
        initial_state_indices, output_state_indices = slots
        _require(
            pool is not None and initial_state_indices is not None,
            "GDN non-CP pretranspose decode requires an indexed state pool",
        )
        self._cake_inputs(q, k, v, a, b, A_log, dt_bias, use_qk_l2norm)
        _require(pool.dtype in (torch.bfloat16, torch.float32), "GDN non-CP decode requires BF16 or FP32 state")
        V, K = pool.shape[2:]
        if pool.dtype == torch.bfloat16:
            _require(
                pool.stride()[1:] == (V * K, K, 1), "GDN non-CP BF16 decode requires packed inner state dimensions"
            )
        else:
            _require(
                all(x.is_contiguous() for x in (q, k, v, pool, A_log, a, dt_bias, b)),
                "GDN non-CP FP32 T=1 decode requires contiguous inputs and state",
            )
        write = initial_state_indices if output_state_indices is None else output_state_indices
        for name, idx in (("", initial_state_indices), ("output ", write)):
            _require(idx.dtype == torch.int32, f"GDN non-CP decode requires int32 {name}state indices")
            _require(
                idx.shape == (q.shape[0],) and idx.is_contiguous(),
                f"GDN non-CP decode requires contiguous [B] {name}state indices",
            )
        _require(
            output is None or (output.dtype == torch.bfloat16 and output.is_contiguous()),
            "GDN non-CP decode requires a contiguous BF16 output",
        )
        read, write = self.cake_slots(initial_state_indices, pool.shape[0]), self.cake_slots(write, pool.shape[0])
        path = "cake-bf16" if pool.dtype == torch.bfloat16 else "cake-fp32"
        out = self._run(path, q, k, v, pool, read, write, A_log, a, dt_bias, b, scale, output, use_qk_l2norm)
        if path == "cake-fp32":  # splitv8 stores 0 for a row whose read slot is invalid
            self.pad_output(out, (read < 0).nonzero().squeeze(1))
        return out, pool

    def gated_delta_rule_decode(
        self, q, k, v, state, A_log, a, dt_bias, b, scale=None, output=None, use_qk_l2norm=True, backend="auto"
    ):
        if backend == "cake_gdn":
            self._cake_inputs(q, k, v, a, b, A_log, dt_bias, use_qk_l2norm)
            _require(
                state.dtype == torch.float32 and (output is None or output.dtype == torch.bfloat16),
                "GDN non-CP nontranspose decode requires BF16 I/O/gates and FP32 state/decay",
            )
            _require(
                all(x.is_contiguous() for x in (q, k, v, state, A_log, a, dt_bias, b) if x is not None)
                and (output is None or output.is_contiguous()),
                "GDN non-CP nontranspose decode requires exact contiguous T=1 tensors",
            )
            backend = "flashinfer"  # same recurrence, in place on the K-major state
        return super().gated_delta_rule_decode(
            q, k, v, state, A_log, a, dt_bias, b, scale, output, use_qk_l2norm, backend
        )

    # ---- ReplaySSM --------------------------------------------------------------------------
    def replayssm_unused(self, windows) -> None:
        """replayssm_* buffers without cache_replayssm are an error."""
        if any(w is not None for w in windows):
            raise ValueError("replayssm_* buffers require cache_replayssm=True")

    def replayssm_verify(self, inputs, windows, scale, output, use_qk_l2norm, output_state_indices, mtp_only):
        """ReplaySSM verify (the module doc): the MTP output with the checkpoint frozen, each live row's window cached
        at its read slot."""
        q, k, v, initial_state, initial_state_indices, A_log, a, dt_bias, b = inputs
        disable_state_update, intermediate_states_buffer, ssm_state_indices = mtp_only
        replayssm_rawv, replayssm_rawk, replayssm_g, replayssm_beta = windows
        disable_state_update = default_disable_state_update(disable_state_update, stacklevel=4)
        B, T, H, K = q.shape
        HV, V = v.shape[2:]
        P = initial_state.shape[0]
        assert q.dtype in (torch.float16, torch.bfloat16), f"q must be float16/bfloat16, got {q.dtype}"
        assert initial_state.dtype == torch.float32, f"initial_state must be float32, got {initial_state.dtype}"
        assert A_log.dtype == torch.float32, f"A_log must be float32, got {A_log.dtype}"
        assert dt_bias.dtype in (torch.bfloat16, torch.float32), f"dt_bias must be bf16/fp32, got {dt_bias.dtype}"
        assert initial_state_indices.dtype in (torch.int32, torch.int64), "initial_state_indices must be int32/int64"
        if not disable_state_update:
            raise ValueError("ReplaySSM verify must leave the checkpoint frozen (disable_state_update=True)")
        if intermediate_states_buffer is not None:
            raise ValueError("ReplaySSM replaces full intermediate-state snapshots")
        if ssm_state_indices is not None:
            raise ValueError("ReplaySSM and per-token state scatter are mutually exclusive")
        if P <= 0:
            raise ValueError("ReplaySSM requires at least one checkpoint slot")
        if k.shape != q.shape or v.shape[:2] != (B, T):
            raise ValueError("ReplaySSM Q/K/V shapes must agree")
        if not a.shape == b.shape == (B, T, HV) or not A_log.shape == dt_bias.shape == (HV,):
            raise ValueError("ReplaySSM a/b must be [B,T,HV], gate parameters [HV]")
        if H <= 0 or HV % H:
            raise ValueError("ReplaySSM requires HV divisible by H")
        if initial_state_indices.shape != (B,):
            raise ValueError("initial_state_indices must be [B]")
        if T < 3:
            raise ValueError(f"ReplaySSM caching requires T >= 3, got T={T}")
        expected = (
            ((P, HV, T, V), torch.bfloat16, "replayssm_rawv"),
            ((P, H, T, K), torch.bfloat16, "replayssm_rawk"),
            ((P, HV, T), torch.float32, "replayssm_g"),
            ((P, HV, T), torch.float32, "replayssm_beta"),
        )
        for w, (shape, dtype, name) in zip(windows, expected):
            if w is None:
                raise ValueError("cache_replayssm=True requires replayssm_rawv/rawk/g/beta")
            if w.shape != shape or w.dtype != dtype or not w.is_contiguous():
                raise ValueError(f"{name} must be a contiguous {dtype} {list(shape)}, got {w.dtype} {list(w.shape)}")
        named = dict(
            q=q,
            k=k,
            v=v,
            a=a,
            b=b,
            A_log=A_log,
            dt_bias=dt_bias,
            initial_state=initial_state,
            initial_state_indices=initial_state_indices,
            output_state_indices=output_state_indices,
            output=output,
            replayssm_rawv=replayssm_rawv,
            replayssm_rawk=replayssm_rawk,
            replayssm_g=replayssm_g,
            replayssm_beta=replayssm_beta,
        )
        for name, x in named.items():
            if x is not None and x.data_ptr() % 16:
                raise ValueError(f"{name} must have a 16-byte aligned base address")
        read, write = initial_state_indices, output_state_indices
        args = (q, k, v, initial_state, read, write, A_log, a, dt_bias, b, scale, output, use_qk_l2norm)
        out = self._run("mtp", *args, write_back=False)
        kb, vb, ab, bb = (self.to_bf16(x) for x in (k, v, a, b))
        log_g = -torch.exp(A_log.float()) * self.softplus(ab.float() + dt_bias.float())  # [B, T, HV]
        beta = torch.sigmoid(bb.float())
        for n, slot in enumerate(initial_state_indices.tolist()):
            if slot >= 0:
                self.cache_window(windows, slot, kb[n], vb[n], log_g[n], beta[n])
        return out, initial_state

    def gated_delta_rule_replayssm_commit(
        self,
        checkpoint_state,
        rawv_cache,
        rawk_cache,
        g_cache,
        beta_cache,
        state_indices,
        accept_lens,
        *,
        track_state_indices=None,
        track_steps=None,
        use_qk_l2norm=True,
        null_block_id=-1,
        backend="auto",
    ):
        """ReplaySSM commit (the module doc): each accepted row's window replayed into its checkpoint slot, every
        layer, with the tracked step's state copied out where asked."""
        caches = (checkpoint_state, rawv_cache, rawk_cache, g_cache, beta_cache)
        tracking = (track_state_indices, track_steps)
        has_track = self._commit_inputs(
            caches, state_indices, accept_lens, tracking, use_qk_l2norm, null_block_id, backend
        )
        L, T = checkpoint_state.shape[0], rawk_cache.shape[3]
        hmap = self.head_map(rawk_cache.shape[2], checkpoint_state.shape[2])
        B = state_indices.shape[0]
        tracks = list(zip(track_state_indices.tolist(), track_steps.tolist())) if has_track else [None] * B
        for slot, accepted, track in zip(state_indices.tolist(), accept_lens.tolist(), tracks):
            if slot <= null_block_id or accepted <= 0:
                continue
            if accepted > T:  # the kernel would read past the window (a caller contract, unchecked there)
                raise ValueError(f"accept_lens must lie in [0, {T}], got {accepted}")
            for layer in range(L):
                on_track = None
                if track is not None and track[0] > null_block_id:

                    def on_track(S, dst=(layer, track[0])):
                        self.store_pool(checkpoint_state, dst, S)

                S = self.commit_row(
                    checkpoint_state[layer, slot].float(),
                    rawk_cache[layer, slot],
                    rawv_cache[layer, slot],
                    g_cache[layer, slot],
                    beta_cache[layer, slot],
                    hmap,
                    accepted,
                    use_qk_l2norm,
                    None if on_track is None else (track[1], on_track),
                )
                self.store_pool(checkpoint_state, (layer, slot), S)

    def _commit_inputs(self, caches, state_indices, accept_lens, tracking, use_qk_l2norm, null_block_id, backend):
        """gated_delta_rule_replayssm_commit's host checks, in the kernel's order: `caches` (checkpoint_state,
        rawv_cache, rawk_cache, g_cache, beta_cache), `tracking` (track_state_indices, track_steps). Returns whether
        steps are tracked."""
        checkpoint_state, rawv_cache, rawk_cache, g_cache, beta_cache = caches
        track_state_indices, track_steps = tracking
        if rawk_cache.ndim != 5:
            raise ValueError("rawk_cache must be [layers, slots, H, T, K]")
        if checkpoint_state.ndim != 5:
            raise ValueError("checkpoint_state must be [layers, slots, HV, V, K]")
        L, P, HV, V, K = checkpoint_state.shape
        H, T = rawk_cache.shape[2:4]
        if L < 1 or P < 1 or T < 1:
            raise ValueError("layers, slots, and max_cache_len must be positive")
        if state_indices.ndim != 1:
            raise ValueError("ssm_state_indices must be one-dimensional")
        if null_block_id < -1:
            raise ValueError("null_block_id must be >= -1")
        has_track = track_state_indices is not None or track_steps is not None
        if has_track and (track_state_indices is None or track_steps is None):
            raise ValueError("track_state_indices and track_steps are paired")
        if H <= 0 or HV % H:
            raise ValueError(f"HV={HV} must be divisible by H={H}")
        if backend not in ("auto", "simt", "tcgen05"):
            raise ValueError("backend must be auto, simt, or tcgen05")
        if checkpoint_state.dtype != torch.float32:
            raise TypeError("checkpoint_state must be float32")
        caches = (
            (rawv_cache, (L, P, HV, T, V), torch.bfloat16, "rawv_cache"),
            (rawk_cache, (L, P, H, T, K), torch.bfloat16, "rawk_cache"),
            (g_cache, (L, P, HV, T), torch.float32, "g_cache"),
            (beta_cache, (L, P, HV, T), torch.float32, "beta_cache"),
        )
        for x, shape, dtype, name in caches:
            if tuple(x.shape) != shape:
                raise ValueError(f"{name} must have shape {shape}, got {tuple(x.shape)}")
            if x.dtype != dtype:
                raise TypeError(f"{name} must have dtype {dtype}, got {x.dtype}")
        if not all(x.is_contiguous() for x in (checkpoint_state, rawv_cache, rawk_cache, g_cache, beta_cache)):
            raise ValueError("checkpoint and ReplaySSM cache tensors must be contiguous")
        B = state_indices.shape[0]
        vectors = [("ssm_state_indices", state_indices), ("accept_lens", accept_lens)]
        vectors += [("track_state_indices", track_state_indices), ("track_steps", track_steps)] if has_track else []
        for name, x in vectors:
            if x.shape != (B,) or x.dtype != torch.int32 or not x.is_contiguous():
                raise ValueError(f"{name} must be contiguous int32 with shape [{B}]")
        for name, x in [
            ("checkpoint_state", checkpoint_state),
            ("rawv_cache", rawv_cache),
            ("rawk_cache", rawk_cache),
            ("g_cache", g_cache),
            ("beta_cache", beta_cache),
            *vectors,
        ]:
            if x.data_ptr() % 16:
                raise ValueError(f"{name} must have a 16-byte aligned base address")
        if backend == "tcgen05" and not (4 <= T <= 8 and use_qk_l2norm and not has_track):
            raise ValueError("tcgen05 commit requires normalized T=4..8 without tracking")
        return has_track


_DEFAULT = FlashInferSM100CPU()
gated_delta_rule_decode_pretranspose = _DEFAULT.gated_delta_rule_decode_pretranspose
gated_delta_rule_mtp = _DEFAULT.gated_delta_rule_mtp
gated_delta_rule_decode = _DEFAULT.gated_delta_rule_decode
chunk_gated_delta_rule = _DEFAULT.chunk_gated_delta_rule
gated_delta_rule_replayssm_commit = _DEFAULT.gated_delta_rule_replayssm_commit

__all__ = [
    "RUNS_ON",
    "CakeGDNUnsupportedError",
    "FlashInferSM100CPU",
    "chunk_gated_delta_rule",
    "gated_delta_rule_decode",
    "gated_delta_rule_decode_pretranspose",
    "gated_delta_rule_mtp",
    "gated_delta_rule_replayssm_commit",
]
