"""FlashInfer GDN decode / MTP and varlen prefill, on every release 0.6.5 .. 0.7.4.

The override contract for the `flashinfer` family is a module exposing `gated_delta_rule_decode_pretranspose`,
`gated_delta_rule_mtp`, `gated_delta_rule_decode` and `chunk_gated_delta_rule` with the signatures of any release in
that range: what each target can ask for is read from the loaded functions' signatures (fuzz.targets.api), once per
loaded API (its Plan), and narrows its Support; calls pass only keywords the function takes. Where a
release differs in what its kernels route rather than in its signature (docs/research/flashinfer-releases.md §2, §8),
the reported release's version decides (installed, or an override module's `__version__`); a module that reports no
release is narrowed by its signatures alone. What a release accepts (head dims, state dtypes, T, the GPU) is its
contract (fuzz.targets.flashinfer_contract), applied by Target.declared.

What each release's signatures give (research §1):
  * gated_delta_rule_decode_pretranspose: the pool (`initial_state`, `initial_state_indices`) from 0.6.6 (bf16 state;
    fp32 from 0.6.7: before, the target passes the batch's states as `state=`, identity slots), split read / write
    slots (`output_state_indices`) from 0.6.9, `intermediate_states_buffer`, `disable_state_update` and `backend` from
    0.7.0.
  * gated_delta_rule_mtp: `ssm_state_indices` (per-token slots) and `output_state_indices` from 0.6.14, which also
    moved `disable_state_update` one place right: calls use keywords only.
  * gated_delta_rule_decode: `backend` from 0.7.0.
  * chunk_gated_delta_rule: `state_indices` from 0.6.16 (routed on SM90 from 0.7.0), `backend` from 0.7.0,
    `output_state_indices` (so -1 padding) in 0.7.4; without it the target draws identity slots only.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

import torch
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from fuzz.model import dispatch
from fuzz.model.case import Case
from fuzz.model.support import Support
from fuzz.model.tensors import Tensors
from fuzz.targets.api import AdapterError, accepts, keywords, lacks, no_keyword, where
from fuzz.targets.base import (
    KV_STATE,
    VERIFYING,
    Family,
    ReleasePlan,
    Target,
    Unavailable,
    import_or_unavailable,
    installed_version,
)
from fuzz.targets.flashinfer_contract import CONTRACTS, HEAD_128, PREFILL_ARCH, SM90_PLUS

HINT = "pip install 'gdn-fuzz[flashinfer]'"
DISTRIBUTION = "flashinfer-python"
DECODE_MODULE, PREFILL_MODULE = "flashinfer.gdn_decode", "flashinfer.gdn_prefill"  # where the entry points live
# Kernel-availability flags of flashinfer.gdn_decode, per kernel family, with the releases that define each (research
# §9): a kernel module that failed to import sets its flag False, and the wrapper then falls through to another path
# (bf16 state -> the fp32 asserts) or fails on every call. An override module is checked for every flag it has.
FLAGS = {
    "bf16": (("_GDN_DECODE_KLAST_BF16_STATE_AVAILABLE", "<0.6.8"), ("_GDN_DECODE_BF16_STATE_AVAILABLE", ">=0.6.8")),
    "pretranspose": (("_PRETRANSPOSE_AVAILABLE", ">=0.6.7"),),  # 0.6.5, 0.6.6: inline in gdn_decode.py
    "nontranspose": (("_NONTRANSPOSE_AVAILABLE", ">=0.6.7"),),
    "mtp": (("_MTP_AVAILABLE", ">=0.6.7"),),
}
KERNELS = {
    "flashinfer.pretranspose.fp32": "pretranspose",
    "flashinfer.bf16": "bf16",
    "flashinfer.decode.kmajor": "nontranspose",
    "flashinfer.mtp.fp32": "mtp",
    "flashinfer.replayssm": "mtp",
}
# Backends a release without the `backend` keyword runs anyway (it has only FlashInfer's own kernels).
NEUTRAL = {"backend": ("auto", "flashinfer")}
# The SM90 prefill of 0.6.5 .. 0.6.13 is CUDA C++ that flashinfer.jit.gdn renders and builds with nvcc at the first
# call, from these files of the wheel's flashinfer/data (not in a pruned bundle).
PREFILL_CXX_SOURCES = (
    "csrc/gdn_prefill_sm90_kernel_inst.jinja",
    "csrc/gdn_prefill_launcher.cu",
    "csrc/prefill_kernel_delta_rule_sm90.cu",
    "include/flashinfer/flat",
)


class FlashInferFamily(Family):
    distribution = DISTRIBUTION
    _prefill: object = None  # flashinfer.gdn_prefill, or the Unavailable its loading raised

    def load_real(self):
        version = installed_version(DISTRIBUTION)
        module = import_or_unavailable(DECODE_MODULE, HINT)
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
        return self.tapped(self._prefill)

    def reset(self, override: str | None) -> None:
        super().reset(override)
        self._prefill = None


def _major() -> int | None:
    return torch.cuda.get_device_capability()[0] if torch.cuda.is_available() else None


def _load_prefill(version: str):
    try:
        module = import_or_unavailable(PREFILL_MODULE, HINT)
    except Unavailable as e:
        return e
    module.__version__ = version
    # gdn_kernels sets a kernel that failed to import to None; the call would then raise NotImplementedError on every
    # case. The chunked (sm{major}0) and context-parallel kernels of this GPU must both be there where the release has
    # them (0.6.14+; before, SM90 runs the C++ JIT module: see FlashInferPrefill.release_support).
    major = _major()
    names = (f"chunk_gated_delta_rule_sm{major}0", f"cp_delta_rule_dsl_sm{major}0") if major else ()
    off = [name for name in names if getattr(module, name, True) is None]
    if off:
        return Unavailable(
            f"flashinfer {version}: prefill kernels failed to import ({', '.join(off)} is None); "
            "check nvidia-cutlass-dsl and cuda-bindings"
        )
    return module


PRETRANSPOSE = "gated_delta_rule_decode_pretranspose"
MTP = "gated_delta_rule_mtp"
KMAJOR = "gated_delta_rule_decode"
CHUNK = "chunk_gated_delta_rule"
FLASHINFER = FlashInferFamily("flashinfer", (PRETRANSPOSE, MTP, KMAJOR, CHUNK))


@dataclass(frozen=True)
class Plan(ReleasePlan):
    """How a target calls one loaded API, decided once per API with what it narrows (Target.release_plan)."""

    pool: bool = True  # slot-addressed pool keywords (pretranspose: initial_state*, prefill: state_indices)
    prenormalize: bool = False  # prefill: the release ignores use_qk_l2norm_in_kernel, so the adapter normalizes


class FlashInferTarget(Target):
    family = FLASHINFER
    library_module = DECODE_MODULE
    contracts = CONTRACTS
    # {function: keywords} this target cannot run without (a missing one makes it unavailable on the release)
    essential: dict = {}

    def __init__(self, name: str, path: str, support: Support, function: str, backend: str = "flashinfer"):
        self.name, self.path, self.support, self.needs, self.backend = name, path, support, (function,), backend

    # ---- what the loaded release can do ----------------------------------------------------------------------------
    def held(self, spec: str) -> bool:
        """Whether the reported release is in `spec`; a module that reports none routes what it accepts."""
        version = self.release()
        return version is None or Version(version) in SpecifierSet(spec)

    def is_release(self, spec: str) -> bool:
        """Whether the loaded API reports a release in `spec` (never a module that reports none)."""
        version = self.release()
        return version is not None and Version(version) in SpecifierSet(spec)

    def release_support(self, api) -> Plan:
        function = self.needs[0]
        fn = getattr(api, function, None)
        if fn is None:  # unavailable_reason names the missing function
            return Plan()
        here = where(self.family)
        off = [
            flag
            for flag, spec in FLAGS.get(KERNELS.get(self.path), ())
            if self.held(spec) and getattr(api, flag, True) is not True
        ]
        if off:
            return Plan(
                unavailable=f"flashinfer {self.family.version()}: kernels failed to import ({', '.join(off)} is "
                "False); check nvidia-cutlass-dsl and apache-tvm-ffi"
            )
        for name, needed in self.essential.items():
            other = getattr(api, name, None)
            missing = lacks(other, needed) if other is not None else []
            if missing:
                return Plan(unavailable=no_keyword(name, missing[0], here))
        if not accepts(fn, "backend") and self.backend not in NEUTRAL["backend"]:
            return Plan(unavailable=no_keyword(function, "backend", here))
        narrow: dict = {}
        if function == PRETRANSPOSE:
            fp32 = "bf16" not in self.support.state_dtypes
            # 0.6.6 takes a pool for bf16 states only (the fp32 path asserts `not use_pool`)
            pool = not lacks(fn, ("initial_state", "initial_state_indices")) and (not fp32 or self.held(">=0.6.7"))
            if not pool:
                narrow.update(pool=False, split_write=False)
            if not accepts(fn, "output_state_indices"):
                narrow["split_write"] = False
            if not accepts(fn, "intermediate_states_buffer"):
                narrow["intermediate"] = False
            if not accepts(fn, "disable_state_update"):
                narrow["no_update"] = False
            if fp32 and self.is_release(">=0.6.7,<0.6.8"):
                narrow["strided_pool"] = False  # 0.6.7 asserts a contiguous fp32 pool
            return Plan(narrowing=narrow, pool=pool)
        if function == MTP:
            if not accepts(fn, "output_state_indices"):
                narrow["split_write"] = False
            if not accepts(fn, "ssm_state_indices"):
                narrow["token_slots"] = False
            return Plan(narrowing=narrow)
        return Plan(narrowing=narrow)

    def variant(self, case: Case) -> str | None:
        """The kernel the release dispatches the case to, by the kernel-level thresholds of fuzz.model.dispatch
        (bf16 state 0.6.11+: ILP4 or wide_vec by B*HV; fp32 MTP: inline or warp-specialized; K-major: small or big
        batch; SM90 prefill: context-parallel or chunked): one bug in one kernel stays apart from another in the
        other."""
        return dispatch.variant(
            self.path,
            self.release(),
            case.B,
            case.H,
            case.HV,
            case.T,
            bool(case.inter_rows),
            case.update,
            dispatch.num_sms(),
        )

    # ---- the call ------------------------------------------------------------------------------------------------
    def call(self, case: Case, t: Tensors) -> torch.Tensor:
        """Mapped by the function called (the backend is the target's): several paths share one function."""
        api, function, plan = self.api(), self.needs[0], self.release_plan()
        fn = getattr(api, function)
        values = decode_keywords(case, t, t.output.view if case.output_given else None)
        values.update(backend=self.backend)
        if function == KMAJOR:  # K-major, no pool: the state is [B, HV, K, V] itself
            values.update(state=t.pool.view)
        elif function == MTP:
            # ssm_state_indices is int32-only (asserted), whatever dtype the other indices have.
            values.update(
                initial_state=t.pool.view,
                initial_state_indices=t.read_slots,
                output_state_indices=t.write_slots,
                intermediate_states_buffer=None if t.inter is None else t.inter.view,
                ssm_state_indices=None if t.token_slots is None else t.token_slots.to(torch.int32),
                disable_state_update=not case.update,
            )
        else:
            if plan.pool:
                values.update(
                    state=None,
                    initial_state=t.pool.view,
                    initial_state_indices=t.read_slots,
                    output_state_indices=t.write_slots,
                )
            else:  # no pool on this release: the pool of B identity slots is the batch's state [B, HV, V, K]
                _identity(case)
                values.update(state=t.pool.view)
            if case.T > 1:  # T = 1 takes neither (0.7.0+ raise ValueError for a buffer or disable_state_update)
                values.update(
                    intermediate_states_buffer=None if t.inter is None else t.inter.view,
                    disable_state_update=not case.update,
                )
        out, _ = fn(**keywords(fn, values, NEUTRAL, function))
        return out


def decode_keywords(case: Case, t: Tensors, output: torch.Tensor | None) -> dict:
    """q, k, v, the raw gates, scale, output and use_qk_l2norm: the keywords every decode entry point takes alike."""
    inputs = {name: getattr(t, name) for name in ("q", "k", "v", "A_log", "a", "dt_bias", "b")}
    return dict(inputs, scale=case.scale, output=output, use_qk_l2norm=case.l2norm)


def _identity(case: Case) -> None:
    if case.read_slots != tuple(range(case.B)) or case.write_slots is not None or case.token_slots is not None:
        raise AdapterError(f"{case!r}: slot maps drawn for a release without a pool (Support.pool is off there)")


def l2normalized(x: torch.Tensor) -> torch.Tensor:
    """x * rsqrt(sum x^2 + 1e-6) in fp32, back in x's dtype: what FlashInfer 0.7.1+ does on the host (normalize_qk)
    before its chunked prefill kernels, and what older releases leave to the caller."""
    f = x.float()
    return (f * torch.rsqrt((f * f).sum(-1, keepdim=True) + 1e-6)).to(x.dtype)


class FlashInferPrefill(FlashInferTarget):
    """chunk_gated_delta_rule on the pool in place: initial_state = output_state = the pool.

    0.7.4: state_indices read, output_state_indices written (so -1 padding). 0.7.0 .. 0.7.2.post1: state_indices without
    padding (-1 is no id there): identity slots. Before 0.7.0 (SM90): sequence-ordered states, the pool of B identity
    slots passed as they are. Before 0.7.1 use_qk_l2norm_in_kernel is ignored: the adapter l2-normalizes q and k itself
    (research §7.3), as 0.7.1+ do on the host."""

    library_module = PREFILL_MODULE

    def api(self):
        return self.family.prefill()

    def release_support(self, api) -> Plan:
        plan = super().release_support(api)
        fn = getattr(api, CHUNK, None)
        if plan.unavailable or fn is None:
            return plan
        narrow = dict(plan.narrowing)
        major = _major()
        # state_indices: SM100 from 0.6.16, SM90 / SM120 from 0.7.0 (0.6.16 .. 0.6.18 raise NotImplementedError there)
        pool = accepts(fn, "state_indices") and (self.held(">=0.7.0") or (major == 10 and self.held(">=0.6.16")))
        if not accepts(fn, "output_state_indices"):
            narrow.update(pool=False, split_write=False)  # -1 is padding only with output_state_indices (0.7.4)
        if not pool and self.is_release("<0.7.0"):
            narrow["strided_pool"] = False  # sequence-ordered states must be contiguous (0.6.14 .. 0.6.18, C++ path)
        if self.is_release("<0.6.14") and major != 10 and hasattr(api, "gen_gdn_prefill_sm90_module"):
            reason = _cxx_prefill_missing(self.family.version())
            if reason:
                return Plan(unavailable=reason)
        return Plan(narrowing=narrow, pool=pool, prenormalize=self.is_release("<0.7.1"))

    def variant(self, case: Case) -> str | None:
        """0.7.4 runs the chunked kernel whenever output_state_indices is passed (padded or split slot maps, see
        call), whatever the work; otherwise the dispatch threshold decides."""
        if self.release_plan().pool and (case.write_slots is not None or any(case.padded)) and self.held(">=0.7.4"):
            return "chunked"
        return super().variant(case)

    def call(self, case: Case, t: Tensors) -> torch.Tensor:
        plan, fn = self.release_plan(), getattr(self.api(), CHUNK)
        q, k, l2norm = t.q, t.k, case.l2norm
        if plan.prenormalize and l2norm:
            q, k, l2norm = l2normalized(q), l2normalized(k), False
        # g goes in as linear alpha = exp(g), fp32: what the chunked kernels read on every release (0.7.4's
        # gate_domain="log" does the same exp on the host).
        values = dict(
            q=q,
            k=k,
            v=t.v,
            g=torch.exp(t.g),
            beta=t.beta,
            scale=case.scale,
            initial_state=t.pool.view,
            output_final_state=True,
            cu_seqlens=t.cu_seqlens,
            use_qk_l2norm_in_kernel=l2norm,
            output=t.output.view if case.output_given else None,
            output_state=t.pool.view,
            backend=self.backend,
        )
        if plan.pool:
            # Index -1 is legal only with output_state_indices (read -1: zero state, write -1: no store). Without
            # padding the plain in-place pool mode runs: it alone may take the context-parallel route on SM90.
            write = t.write_slots if t.write_slots is not None else t.read_slots.clone() if any(case.padded) else None
            values.update(state_indices=t.read_slots, output_state_indices=write)
        else:
            _identity(case)
        out, _ = fn(**keywords(fn, values, NEUTRAL, CHUNK))
        return out


def _cxx_prefill_missing(version: str) -> str | None:
    """Why the 0.6.5 .. 0.6.13 SM90 prefill (C++ JIT) cannot build here, or None."""
    try:
        env = import_or_unavailable("flashinfer.jit.env", HINT)
        data = env.FLASHINFER_DATA
    except (Unavailable, AttributeError) as e:
        return f"unavailable on this release: the SM90 prefill JIT-compiles CUDA C++ ({e}; {DISTRIBUTION} {version})"
    absent = [name for name in PREFILL_CXX_SOURCES if not (data / name).exists()]
    if absent:
        return (
            f"unavailable on this release: the SM90 prefill JIT-compiles CUDA C++ from flashinfer/data, and "
            f"{', '.join(absent)} are absent under {data} (a pruned install; {DISTRIBUTION} {version})"
        )
    try:
        nvcc = os.path.join(import_or_unavailable("flashinfer.jit.cpp_ext", HINT).get_cuda_path(), "bin", "nvcc")
    except (Unavailable, RuntimeError, AttributeError) as e:
        return f"unavailable on this release: the SM90 prefill compiles with nvcc at its first call: {e}"
    if not os.path.isfile(nvcc):
        return (
            f"unavailable on this release: the SM90 prefill compiles with nvcc at its first call; {nvcc} does not "
            "exist (set CUDA_HOME)"
        )
    return None


# Inputs: q, k, v fp16 or bf16 on every release (asserted). The kernels consume them as bf16: by value from 0.7.2
# (pretranspose fp32), 0.6.18 (MTP, bf16 state); earlier they reinterpret fp16 bits (a bug, not a contract).
# FP32: fp32 state, K = V = 128, the base of every FlashInfer target's Support; _POOL: the pool-addressed SM90+ decode.
FP32 = Support(ops=frozenset({"decode"}), state_dtypes=("fp32",), input_dtypes=("bf16", "fp16"), head_dims=HEAD_128)
_POOL = dataclasses.replace(FP32, split_write=True, strided_pool=True, output_optional=True, arch=SM90_PLUS)
TARGETS = (
    FlashInferTarget("flashinfer-pretranspose-fp32", "flashinfer.pretranspose.fp32", _POOL, PRETRANSPOSE),
    FlashInferTarget(
        "flashinfer-bf16",
        "flashinfer.bf16",
        # VERIFYING's sliced intermediate: a leading view cache[:, :T] of a longer cache is a documented input (0.7.4
        # _flatten_intermediate_cache_view); 0.7.0 .. 0.7.2.post1 copy a non-contiguous buffer and lose its writes
        # (a bug to find, not a limit). verify T=1 is the decode kernel: no verify flags.
        dataclasses.replace(_POOL, **VERIFYING, state_dtypes=("bf16",), exact_rows=True, verify_min_T=2),
        PRETRANSPOSE,
    ),
    # K-major fp32 decode (V % 32 == 0, K, V >= 128); non-contiguous state is copied and copied back.
    FlashInferTarget(
        "flashinfer-decode-kmajor",
        "flashinfer.decode.kmajor",
        dataclasses.replace(_POOL, **KV_STATE),
        KMAJOR,
    ),
    FlashInferTarget(
        "flashinfer-mtp-fp32",
        "flashinfer.mtp.fp32",
        dataclasses.replace(_POOL, **VERIFYING, token_slots=True),
        MTP,
    ),
    # SM90 chunked prefill (delta_rule_sm90.py): one head size D = K = V = 128, fp16/bf16 q/k/v and output alike,
    # at least one token per call ("max_seqlen must be positive": a stated precondition, seen on the H200),
    # HV = ratio * H; a strided pool is fine (only its inner strides enter the compile key). gdn_prefill.py
    # dispatches majors 8, 9, 10 (CUDA 13) and 12; 11 raises.
    FlashInferPrefill(
        "flashinfer-prefill-chunk",
        "flashinfer.prefill.chunk",
        dataclasses.replace(
            _POOL,
            ops=frozenset({"prefill"}),
            empty_prefill=False,
            arch=PREFILL_ARCH,
            # The chunk kernel inverts I + beta*tril(K K^T) in fp16: it needs unit-norm keys, so callers with
            # use_qk_l2norm_in_kernel=False pass l2-normalized q, k (FlashInfer's tests do). Raw keys overflow that
            # inverse to NaN (H200: T=12 fp16, T=130 bf16), outside the kernel's domain: only in-kernel l2norm is drawn.
            l2norm_off=False,
        ),
        CHUNK,
    ),
)
