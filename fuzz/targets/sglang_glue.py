"""SGLang's GDN kernel glue as targets (the `sglang-glue` family): each adapter calls the glue classes of the
installed SGLang (`FlashInferGDNKernel`, `TritonGDNKernel` in srt/layers/attention/linear/kernels/, loaded by
fuzz.targets.sglang_glue_loader), never the kernels beneath them, so the glue's own index handling, scratch slicing,
copy-back, alignment fallback and dtype casts run under test.

The glue's inputs are built from a Case as SGLang's GDNAttnBackend builds them (forward_decode, forward_extend:
gdn_backend.py:678, 948; shared/research/serving-glue.md §1.3-1.4):
  * q, k, v packed [1, B*T, heads, D]; a, b [B*T, HV]; A_log, dt_bias [HV]; ssm_states: the pool itself;
    cache_indices: the read slots, int32, -1 for a padded row. CUDA graphs pad at the tail, and a padded row's
    query_start_loc row is empty while q, k, v keep its T tokens (hybrid_linear_attn_backend.py:877-910);
  * verify: the pool-scoped scratch intermediate_states_buffer [spec_size + 1, T, HV, V, K] (Case.inter_rows,
    inter_steps), intermediate_state_indices = the batch positions with rows past the scratch on its extra last row
    (linear/utils.py:125-157), cache_steps = T, retrieve_parent_token None (topk 1); the glue itself passes
    disable_state_update;
  * prefill (extend): g (log decay) and beta from the case's log gates, query_start_loc the sequences' offsets;
  * packed decode: mixed_qkv [B, H*K + H*K + HV*V] and the layer's scale K^-0.5 (gdn_backend.py:866-880).
The glue passes no scale of its own (the kernels' K^-0.5) and always l2-normalizes q, k in the kernel; a case
outside that call shape is our defect (AdapterError): the targets' Support and the engine's rules never draw one.

Where each target runs (`where` says it in the targets table):
  sglang-glue-fi-sm90, -sm100  FlashInferGDNKernel built for that arch: on a GPU of that arch the installed
                               FlashInfer; on the CPU its stand-in (fuzz.standins.flashinfer_glue_cpu), the arch
                               faked while the glue is built; on a GPU of another arch: unavailable
  sglang-glue-triton           TritonGDNKernel.decode / target_verify, and extend on a GPU only
  sglang-glue-triton-packed    TritonGDNKernel.packed_decode
  sglang-glue-fallback         the SM90 FlashInfer glue, paired (Target.paired) with the same glue on a misaligned
                               copy of the pool, where it falls back to Triton (_mutable_inputs_are_aligned,
                               gdn_flashinfer.py:335-351, 402, 655)
The glue objects persist across calls, as in a server (their aligned-scratch caches with them).

Override contract (`--gdn-target sglang-glue=module[:attr]`, the glue-level mutants): a module exposing
`FlashInferGDNKernel` and / or `TritonGDNKernel`, classes that behave as the glue's (a mutant subclasses the real
one, `load_sglang_glue().TritonGDNKernel`, with one defect); a target whose class the module lacks is unavailable.
A FlashInferGDNKernel class is built as the real one is (SglangGlue.flashinfer_kernel: the target's arch, the
installed FlashInfer or its CPU stand-in behind it). `__version__`, if given, is the sglang release whose semantics
rows and known bugs hold for it; without one the newest rows hold and no mask applies.
"""

from __future__ import annotations

import dataclasses
import itertools
from types import SimpleNamespace

import torch

from fuzz.model.case import Case
from fuzz.model.known_bugs import FI_BF16, FI_MTP, FI_PRETRANSPOSE
from fuzz.model.support import Support
from fuzz.model.tensors import Tensors
from fuzz.targets.api import AdapterError
from fuzz.targets.base import Family, Target, Unavailable, installed_version, unavailable_as
from fuzz.targets.flashinfer_contract import HEAD_128
from fuzz.targets.triton_common import TritonTarget, interpreted, sm, triton_where

FLASHINFER, TRITON = "FlashInferGDNKernel", "TritonGDNKernel"
# The FlashInfer kernel the glue calls for each operation on each arch, as the semantics path FlashInfer's known bugs
# are recorded on (shared/research/serving-glue.md §1.2): SM90 decodes the gathered fp32 slots through the fp32
# pretranspose kernel (gdn_flashinfer.py:461-475) and verifies through the fp32 MTP kernel; SM100 decodes its bf16
# pool through the pool API, which runs the bf16 kernel, and verifies through the internal bf16 MTP (l.231-263).
# Extend runs FlashInfer's chunked prefill, on which no record is kept.
BENEATH = {9: {"decode": FI_PRETRANSPOSE, "verify": FI_MTP}, 10: {"decode": FI_BF16, "verify": FI_BF16}}
ALIGNMENT = 32  # gdn_flashinfer._FLASHINFER_GDN_ALIGNMENT: a mutable buffer off it sends the call to Triton


class GlueFamily(Family):
    distribution = "sglang"  # the glue ships in SGLang: its release keys the glue's rows and records

    def load_real(self):
        from fuzz.targets.sglang_glue_loader import load_sglang_glue  # imports triton
        from fuzz.targets.sglang_loader import SglangUnavailable

        with unavailable_as(SglangUnavailable):
            glue = load_sglang_glue()
        classes = {FLASHINFER: glue.FlashInferGDNKernel, TRITON: glue.TritonGDNKernel}
        return SimpleNamespace(__version__=glue.version, **classes)


SGLANG_GLUE = GlueFamily("sglang-glue", (FLASHINFER, TRITON))


class GlueTarget(TritonTarget):
    """One glue entry (its class in `needs`); arch: the SM major a FlashInferGDNKernel is built for (None: Triton).
    A prefill case runs under its semantics row's `prefill` row: extend runs another kernel (gates as g and beta)."""

    family = SGLANG_GLUE

    def __init__(self, name: str, path: str, support: Support, arch: int | None = None, packed: bool = False):
        self.name, self.path, self.support, self.arch, self.packed = name, path, support, arch, packed
        self.needs = (TRITON,) if arch is None else (FLASHINFER,)

    def op_unavailable(self, op: str, profile_device: str) -> str | None:
        if op == "prefill" and self.arch is None and interpreted():
            return (
                "TritonGDNKernel.extend runs SGLang's chunked kernel, which gives wrong numbers under the Triton "
                "interpreter (max error 6e9 against the recurrent kernel: shared/research/serving-glue.md §2.3, "
                "triton_gdn.md top-10 fact 9): prefill is fuzzed on a GPU only"
            )
        return None

    def unavailable_reason(self, profile_device: str) -> str | None:
        reason = super().unavailable_reason(profile_device)
        if reason or self.arch is None:
            return reason
        major = torch.cuda.get_device_capability()[0] if profile_device == "cuda" else None
        if major is not None and major != self.arch:
            return f"SM{self.arch}0 path: fuzzed on the CPU stand-in only (no SM{self.arch}0 GPU here)"
        try:
            self.kernel(profile_device)
        except Unavailable as e:
            return str(e)
        return None

    def where(self, profile_device: str) -> str:
        if self.arch is None:
            return triton_where(profile_device)
        if profile_device == "cpu":
            return f"CPU stand-in, arch {self.arch} faked"
        try:
            return f"real FlashInfer {installed_version('flashinfer-python')} on {sm()}"
        except Unavailable:  # not installed: the target is unavailable, its reason says so
            return None

    def beneath(self, profile_device: str) -> dict[str, tuple[str, str]]:
        """On a GPU the FlashInfer glue runs the installed FlashInfer: per operation the path it calls there
        (BENEATH) at that release. Its CPU stand-in reports no release: no record holds for it."""
        if self.arch is None or profile_device == "cpu":
            return {}
        try:
            release = installed_version("flashinfer-python")
        except Unavailable:  # not installed: the target is unavailable
            return {}
        return {op: (path, release) for op, path in BENEATH[self.arch].items() if op in self.support.ops}

    def kernel(self, device: str):
        """The glue object for this device, built once per loaded API (a server keeps one per backend)."""
        api, kind = self.api(), torch.device(device).type
        memo = self.__dict__.get("_kernel")
        if memo is None or memo[0] is not api or memo[1] != kind:
            memo = self._kernel = (api, kind, _build(api, self.arch, kind))
        return memo[2]

    def call(self, case: Case, t: Tensors) -> torch.Tensor:
        return glue_call(self.family.tapped(self.kernel(t.q.device)), case, t, t.pool.view, self.packed)


class FallbackTarget(GlueTarget):
    """sglang-glue-fallback: the FlashInfer glue (judged as its arch's target) paired with the same call on a copy of
    the pool off the 32-byte alignment, which the glue hands to its Triton fallback (`Misaligned`)."""

    def __init__(self, name: str, path: str, support: Support, arch: int):
        super().__init__(name, path, support, arch)
        self.twin = Misaligned(f"{name}[misaligned]", "sglang.glue.triton", support, arch)

    def paired(self) -> Target:
        return self.twin

    def where(self, profile_device: str) -> str:
        return f"{super().where(profile_device)}; misaligned pool: its fallback, {triton_where(profile_device)}"


class Misaligned(GlueTarget):
    """The FlashInfer glue on the case's pool copied (guards and all) to an address off the 32-byte alignment, then
    copied back: the glue runs its Triton fallback on the copy, and the verdict reads what it did in the case's own
    buffer. Judged by the Triton glue's semantics row (the fallback is TritonGDNKernel)."""

    def call(self, case: Case, t: Tensors) -> torch.Tensor:
        full = t.pool.full
        shifted = torch.empty(full.numel() + 1, dtype=full.dtype, device=full.device)[1:].view(full.shape)
        shifted.copy_(full)
        pool = shifted[t.pool.lead : t.pool.lead + case.pool, : t.pool.view.shape[1]]
        if pool.data_ptr() % ALIGNMENT == 0:
            raise AdapterError(f"{case!r}: the misaligned copy of the pool is aligned (data_ptr {pool.data_ptr()})")
        out = glue_call(self.kernel(t.q.device), case, t, pool)
        full.copy_(shifted)
        return out


def _build(api, arch: int | None, device: str):
    if arch is None:
        return getattr(api, TRITON)()
    from fuzz.targets.sglang_glue_loader import glue_kernel
    from fuzz.targets.sglang_loader import SglangUnavailable

    with unavailable_as(SglangUnavailable):  # an override's class, built the way the real one is
        return glue_kernel(getattr(api, FLASHINFER), arch, device)


def glue_call(kernel, case: Case, t: Tensors, pool: torch.Tensor, packed: bool = False) -> torch.Tensor:
    """The glue's call on the case with the inputs GDNAttnBackend builds (module doc), on `pool`; its output in the
    case's output shape."""
    _check_shape(case)
    slots, device = t.read_slots.to(torch.int32), t.q.device
    if case.op == "prefill":
        inputs = {name: getattr(t, name).unsqueeze(0) for name in ("q", "k", "v", "g", "beta")}
        cu = t.cu_seqlens.to(torch.int32)
        return kernel.extend(**inputs, ssm_states=pool, cache_indices=slots, query_start_loc=cu)[0][0]
    B, T = case.B, case.T
    flat = lambda x: x.reshape(B * T, *x.shape[2:])
    if packed:
        mixed = torch.cat([x.reshape(B, -1) for x in (t.q, t.k, t.v)], dim=1)
        out = kernel.packed_decode(
            mixed_qkv=mixed, a=flat(t.a), b=flat(t.b), A_log=t.A_log, dt_bias=t.dt_bias, scale=case.K**-0.5,
            ssm_states=pool, cache_indices=slots, num_v_heads=case.HV, head_v_dim=case.V,
        )  # fmt: skip
        return out.reshape(B, T, case.HV, case.V)
    q, k, v = (flat(x).unsqueeze(0) for x in (t.q, t.k, t.v))
    common = dict(ssm_states=pool, cache_indices=slots, query_start_loc=query_start_loc(case, device))
    if case.op == "decode":
        out = kernel.decode(q=q, k=k, v=v, a=flat(t.a), b=flat(t.b), A_log=t.A_log, dt_bias=t.dt_bias, **common)
    else:
        out = kernel.target_verify(
            A_log=t.A_log, dt_bias=t.dt_bias, q=q, k=k, v=v, a=flat(t.a), b=flat(t.b),
            intermediate_states_buffer=t.inter.view, intermediate_state_indices=scratch_rows(case, device),
            cache_steps=T, retrieve_parent_token=None, **common,
        )  # fmt: skip
    return out.reshape(B, T, case.HV, case.V)


def query_start_loc(case: Case, device) -> torch.Tensor:
    """Each live request's T tokens at its place; a padded row (at the tail) is empty, its offset repeating the last."""
    lengths = [0 if padded else case.T for padded in case.padded]
    return torch.tensor([0, *itertools.accumulate(lengths)], dtype=torch.int32, device=device)


def scratch_rows(case: Case, device) -> torch.Tensor:
    """build_verify_intermediate_state_indices for a scratch of spec_size + 1 rows: the batch positions, every one
    past spec_size on the extra last row (the table is as long as the padded batch)."""
    spec_size = case.inter_rows - 1
    return torch.arange(max(case.B, spec_size), dtype=torch.int32, device=device).clamp(max=spec_size)


def _check_shape(case: Case) -> None:
    """What SGLang's glue call cannot express (module doc): our defect when drawn."""
    problems = {
        "a scale other than the kernels' K^-0.5": case.scale not in (None, case.K**-0.5),
        "l2norm off": not case.l2norm,
        "split or per-token slots": case.write_slots is not None or case.token_slots is not None,
        "padding before a live row (CUDA graphs pad at the tail)": any(
            p and not later for p, later in itertools.pairwise(case.padded)
        ),
        "a verify without the scratch of T steps, or one that updates the pool": case.op == "verify"
        and (case.update or not case.inter_rows or case.inter_steps != case.T or case.inter_index is not None),
    }
    if wrong := [what for what, on in problems.items() if on]:
        raise AdapterError(f"{case!r}: SGLang's glue call cannot take {', '.join(wrong)}")


# What SGLang's glue takes, whatever the kernel: its pool ([size + 1, HV, V, K] per layer, contiguous), int32 slot
# maps (forward metadata), in-kernel l2norm and the default scale, HV a multiple of H (the model's config); verify
# writes its scratch and leaves the pool (disable_state_update). Engine "sglang": slot maps, padding and scratch as
# SGLang builds them (fuzz.model.engines).
_GLUE = Support(
    ops=frozenset({"decode", "verify"}),
    index_dtypes=("i32",),
    l2norm_off=False,
    invalid_gva=False,
    intermediate=True,
    no_update=True,
    buffer_with_update=False,
    spare_steps=False,
    scales=(None,),
    engine="sglang",
)
# FlashInfer under the glue: K = V = 128, fp16 / bf16 inputs (the FlashInfer contract); the pool dtype the glue's
# path takes: SM90 fp32 (gather / scatter through the fp32 pretranspose, fp32 MTP), SM100 bf16 (the pool API and the
# internal bf16 MTP, gated_delta_rule_mtp_bf16, gdn_flashinfer.py:231-263). SM100 verifies from T = 2: the CPU
# stand-in's bf16 MTP (the pretranspose route) refuses T = 1 with a scratch, which the internal kernel takes
# (fuzz.standins.flashinfer_glue_cpu); SGLang verifies at least one draft token past the last accepted one.
_FI = dataclasses.replace(_GLUE, input_dtypes=("bf16", "fp16"), head_dims=HEAD_128)
_FI_SM90 = dataclasses.replace(_FI, ops=frozenset({"decode", "verify", "prefill"}), state_dtypes=("fp32",))
_FI_SM100 = dataclasses.replace(_FI_SM90, state_dtypes=("bf16",), verify_min_T=2)
# Triton: bf16 / fp16 inputs, the model dtypes SGLang serves GDN in (its chunk kernel rejects fp32 inputs:
# kernels/ops/attention/fla/chunk.py:217)
_TRITON = dataclasses.replace(_GLUE, ops=_FI_SM90.ops, input_dtypes=("bf16", "fp16"))
TARGETS = (
    GlueTarget("sglang-glue-fi-sm90", "sglang.glue.flashinfer.sm90", _FI_SM90, arch=9),
    GlueTarget("sglang-glue-fi-sm100", "sglang.glue.flashinfer.sm100", _FI_SM100, arch=10),
    GlueTarget("sglang-glue-triton", "sglang.glue.triton", _TRITON),
    GlueTarget("sglang-glue-triton-packed", "sglang.glue.triton.packed", _TRITON.narrowed(ops=("decode",)), None, True),
    FallbackTarget("sglang-glue-fallback", "sglang.glue.flashinfer.sm90", _FI_SM90.narrowed(ops=_GLUE.ops), arch=9),
)
