"""How each target's library call reads in an exported script: what the call's result is named, the output judged,
what the adapter does after the call, the expressions its arguments are built by, and what makes the library
importable. fuzz.export.top writes the call from the recorded one (fuzz.export.recording) with these.

A target supplies its own Snippet by defining `export_snippet(case) -> Snippet`: the extension point for targets
whose call is not one of the families below (the serving-glue targets: their snippet imports the engine's module,
with `loader` naming the gdn-fuzz function, such as fuzz.targets.sglang_glue_loader's, that makes it importable
without the serving stack; the script embeds that function verbatim and calls it first).

Format fields in the strings: {B}, {T}, {H}, {HV}, {K}, {V} of the case and {N}, its number of token rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from fuzz.model.case import Case
from fuzz.targets.base import Target

SGLANG_LOADER = ("fuzz.targets.sglang_loader", "load_sglang_kernels")
GLUE_LOADER = ("fuzz.targets.sglang_glue_loader", "load_sglang_glue")
GLUE_KERNEL = ("fuzz.targets.sglang_glue_loader", "glue_kernel")
GLUE_MODULE = "sglang.srt.layers.attention.linear.kernels"
FLASHINFER_STANDIN = "fuzz.standins.flashinfer_glue_cpu"
VLLM_LOADER = ("fuzz.targets.vllm_loader", "load_vllm_kernels")


VARLEN = (("q", "H", "K"), ("k", "H", "K"), ("v", "HV", "V"))  # (tensor, heads, head dim) packed [1, N, heads, dim]


@dataclass(frozen=True)
class Snippet:
    """One target's call in a script's top (module doc)."""

    returns: str = "out"  # the left side of the call ("" where the result is not used)
    output: str = "out"  # the output the script judges, an expression over the top's names
    after: tuple[str, ...] = ()  # statements the adapter runs after the call, over the top's names
    expressions: tuple[str, ...] = ()  # candidates for tensor arguments beyond the generic ones (fuzz.export.top)
    helpers: tuple[tuple[str, str], ...] = ()  # (module, function) of gdn-fuzz's those expressions call: embedded
    loader: tuple[str, str] | None = None  # (module, function) of gdn-fuzz's called before the import: embedded
    module: str | None = None  # where the function is imported from (default: the recorded call's module)
    imported: str | None = None  # what is imported from there (default: the function)
    build: tuple[str, ...] = ()  # statements after the import that build the object called (a glue object)
    callee: str | None = None  # the object whose method the function is (`kernel`: kernel.decode); default none
    embeds: tuple[str, ...] = ()  # gdn-fuzz modules the script carries whole, imported under their own names
    note: str = ""  # said on top of the script: where it runs what


class NotExportable(ValueError):
    """The target's call cannot be written as one library call from its recording (the message says why)."""


def snippet(target: Target, case: Case) -> Snippet:
    """The target's own export_snippet, else its family's row below."""
    own = getattr(target, "export_snippet", None)
    if own is not None:
        return own(case)
    family, path = target.family.name, target.path
    if why := getattr(target, "not_exportable", None):
        raise NotExportable(why)
    if len(target.needs) > 1:
        raise NotExportable(
            f"{target.name} makes {len(target.needs)} library calls ({', '.join(target.needs)}): its script needs an "
            "export_snippet of its own"
        )
    if family == "flashinfer":
        prefill = ("torch.exp(g)", "l2normalized(q)", "l2normalized(k)") if case.op == "prefill" else ()
        helpers = (("fuzz.targets.flashinfer", "l2normalized"),) if case.op == "prefill" else ()
        return Snippet(returns="out, _", expressions=prefill, helpers=helpers)
    if family == "sglang" and path == "sglang.packed_decode":
        return Snippet(
            returns="",
            output="output",
            expressions=(
                "torch.cat([q.reshape({B}, -1), k.reshape({B}, -1), v.reshape({B}, -1)], dim=1)",
                "a[:, 0].contiguous()",
                "b[:, 0].contiguous()",
            ),
            loader=SGLANG_LOADER,
        )
    if family == "sglang":
        return Snippet(output="out.reshape({B}, {T}, {HV}, {V})", loader=SGLANG_LOADER)
    if family == "vllm":  # every request's tokens along one axis (varlen), as vLLM's GDN layers pass them
        return Snippet(
            returns="out, _",
            output="out.reshape({B}, {T}, {HV}, {V})",
            expressions=tuple(f"{x}.reshape(1, {{N}}, {{{h}}}, {{{d}}})" for x, h, d in VARLEN)
            + tuple(f"{x}.reshape({pre}{{N}}, {{HV}})" for x in ("a", "b", "g", "beta") for pre in ("1, ", "")),
            loader=VLLM_LOADER,
        )
    if family == "sglang-glue":
        return _glue(target, case)
    if family == "fla":
        return Snippet(
            returns="out, final",
            output="out.squeeze(0)" if case.op == "prefill" else "out",
            after=("pool[slots.long()] = final.to(pool.dtype)  # fla returns the final state: into the pool",)
            if case.update
            else (),
            expressions=("pool[slots.long()]", "cu_seqlens.long()", "a.unsqueeze(0)", "b.unsqueeze(0)"),
            module="fla.ops.gated_delta_rule",
        )
    raise NotExportable(f"{target.name}: no export snippet for the {family} family")


def _glue(target: Target, case: Case) -> Snippet:
    """SGLang's glue: the glue object built as a server builds it (the FlashInfer glue for the target's arch; on a
    CPU over FlashInfer's CPU stand-in, carried in the script), then its method called as GDNAttnBackend calls it."""
    arch = getattr(target, "arch", None)
    name, module = ("TritonGDNKernel", "gdn_triton") if arch is None else ("FlashInferGDNKernel", "gdn_flashinfer")
    where = "" if arch is None else "; on a CPU: FlashInfer's stand-in, below"
    prefill = case.op == "prefill"
    return Snippet(
        returns="out, _, _" if prefill else "out",
        output="out[0]" if prefill else "out.reshape({B}, {T}, {HV}, {V})",
        expressions=("torch.cat([q.reshape({B}, -1), k.reshape({B}, -1), v.reshape({B}, -1)], dim=1)",),
        helpers=(GLUE_KERNEL,),
        loader=GLUE_LOADER,
        module=f"{GLUE_MODULE}.{module}",
        imported=name,
        build=(f"kernel = glue_kernel({name}, {arch}, run.device)  # as a server builds it{where}",),
        callee="kernel",
        embeds=() if arch is None else (FLASHINFER_STANDIN,),
        note=""
        if arch is None
        else (
            f"On a CPU (--device cpu, or no GPU) the glue runs over gdn-fuzz's CPU stand-in of FlashInfer (embedded "
            f"below) with SM{arch}0 faked while it is built; the finding is about the glue's SM{arch}0 path on the "
            "GPU, which this script runs with the installed FlashInfer."
        ),
    )
