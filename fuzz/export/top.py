"""The top of an exported script: the body of its `main`, in the library maintainer's words. It builds the case's
tensors, names the few the call reads, computes the float64 reference, makes the library call as the library's
docs write it (the function imported from its module, every keyword the adapter passes) and returns the verdict.

Each tensor argument is written as an expression over the named tensors (`pool`, `q.reshape(1, 2, 1, 8)`, a short
index tensor as a literal), found by trying candidates on the tensors the adapter was given at export: the first
that rebuilds the recorded argument bit for bit (dtype, shape, strides, storage offset, values; the same memory
where the adapter passed a view of a buffer the call writes) is taken, so the call cannot drift from the adapter's.
An argument no candidate rebuilds is an export error (NotExportable), never a guess.
"""

from __future__ import annotations

import ast
import importlib
from dataclasses import dataclass

import torch

from fuzz.export.call import Call
from fuzz.export.describe import case_words
from fuzz.export.snippets import NotExportable, Snippet
from fuzz.model.case import Case
from fuzz.model.tensors import Tensors

# (script name, Tensors field, attribute of a guarded buffer): the tensors a call may read, in the order they bind
FLOATS = (("q", "q"), ("k", "k"), ("v", "v"), ("A_log", "A_log"), ("a", "a"), ("dt_bias", "dt_bias"), ("b", "b"))
FLOATS += (("g", "g"), ("beta", "beta"))
BUFFERS = (("pool", "pool"), ("inter", "inter"), ("output", "output"))
INDICES = (("slots", "read_slots"), ("write_slots", "write_slots"), ("token_slots", "token_slots"))
INDICES += (("rows", "inter_index"), ("cu_seqlens", "cu_seqlens"), ("accepted", "accepted"))
LITERAL = 64  # an integer tensor of at most this many entries is written out
WORDS = {
    "pool": "[slots, HV, {state}], NaN guards around",
    "inter": "[rows, steps, HV, {state}], NaN until written",
    "output": "NaN until written",
    "slots": "request n reads pool[slots[n]]",
    "write_slots": "request n writes pool[write_slots[n]]",
    "token_slots": "token t of request n writes pool[token_slots[n, t]]",
    "rows": "request n writes inter[rows[n]]",
    "cu_seqlens": "sequence n: tokens cu_seqlens[n]..cu_seqlens[n+1]",
    "accepted": "request n's accepted count: its start is token_slots[n][accepted[n] - 1]",
}


@dataclass(frozen=True)
class Top:
    lines: list[str]  # main's body
    imports: list[str]  # the statements inside `with needs(run):` (the loader call, the library import)
    names: dict[str, str]  # "pool", "output", "slots", ... -> the keyword the call passes it as
    roots: tuple[tuple[str, str], ...]  # gdn-fuzz functions the top calls beyond the helpers': embedded


def namespace(t: Tensors) -> dict[str, torch.Tensor]:
    """The tensors a script's top may name, as the adapter was given them."""
    named = {name: getattr(t, field) for name, field in FLOATS + INDICES}
    named |= {name: getattr(t, field).view for name, field in BUFFERS if getattr(t, field) is not None}
    return {name: value for name, value in named.items() if value is not None}


def _storage(x: torch.Tensor) -> int:
    return x.untyped_storage().data_ptr()


def _same(candidate, recorded: torch.Tensor, buffers: set[int]) -> bool:
    """The candidate rebuilds the recorded argument: dtype, shape, strides, offset, bits, and the same memory where
    the recorded one is a view of a buffer the call writes."""
    if not isinstance(candidate, torch.Tensor):
        return False
    if (candidate.dtype, candidate.shape, candidate.stride(), candidate.storage_offset()) != (
        recorded.dtype,
        recorded.shape,
        recorded.stride(),
        recorded.storage_offset(),
    ):
        return False
    if _storage(recorded) in buffers and _storage(candidate) != _storage(recorded):
        return False
    as_bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[recorded.element_size()]
    if recorded.dtype == torch.bool:
        return torch.equal(candidate, recorded)
    return torch.equal(candidate.contiguous().view(as_bits), recorded.contiguous().view(as_bits))


def _dtype(x: torch.Tensor) -> str:
    return str(x.dtype)  # torch.int32


def _literal(x: torch.Tensor) -> str:
    return f"torch.tensor({x.tolist()}, dtype={_dtype(x)}, device=run.device)"


def _candidates(value: torch.Tensor, named: dict, snippet: Snippet, fields: dict) -> list[str]:
    """Expressions to try, plainest first: a name, the snippet's own, reshapes and casts of a name."""
    shape = ", ".join(map(str, value.shape))
    out = list(named)
    out += [text.format(**fields) for text in snippet.expressions]
    for name, x in named.items():
        if x.numel() == value.numel():
            out += [f"{name}.reshape({shape})", f"{name}.unsqueeze(0)"]
        out += [f"{name}.to({_dtype(value)})", f"{name}.long()", f"{name}.int()"]
    return out


def expression(value, named: dict, helpers: dict, snippet: Snippet, fields: dict, keyword: str) -> str:
    """`value` (a recorded argument) as code over `named` (module doc)."""
    if not isinstance(value, torch.Tensor):
        text = repr(value)
        try:
            same = ast.literal_eval(text) == value if not isinstance(value, torch.dtype) else True
        except (ValueError, SyntaxError):
            same = False
        if not same:
            raise NotExportable(f"{keyword}={text}: not a value a script can write")
        return text
    buffers = {_storage(x) for name, x in named.items() if name in dict(BUFFERS)}
    scope = {"torch": torch, **named, **helpers}
    for text in _candidates(value, named, snippet, fields):
        try:
            candidate = eval(text, scope)
        except Exception:  # noqa: BLE001 - a candidate that does not apply (a shape, a missing name)
            continue
        if _same(candidate, value, buffers):
            return text
    if not (value.dtype.is_floating_point or value.dtype.is_complex) and value.numel() <= LITERAL:
        if _storage(value) not in buffers and value.is_contiguous() and not value.storage_offset():
            return _literal(value)
    raise NotExportable(
        f"{keyword}: no expression over {sorted(named)} rebuilds the {_dtype(value)} {list(value.shape)} argument "
        "the adapter passes"
    )


def _words(x: torch.Tensor) -> str:
    text = f"{_dtype(x).removeprefix('torch.')} {list(x.shape)}"
    if not x.is_contiguous():
        text += f" strides {tuple(x.stride())}"
    return text + (f" offset {x.storage_offset()}" if x.storage_offset() else "")


def _used(lines: list[str]) -> set[str]:
    names = set()
    for line in lines:
        try:
            tree = ast.parse(line.strip().rstrip(",").split("  #")[0] or "0")
        except SyntaxError:
            continue
        names |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return names


def _bindings(used: set[str], named: dict, case: Case) -> list[str]:
    """The lines that name what the call reads: the float inputs by group, each buffer, each index map."""
    lines = []
    for group in (("q", "k", "v"), ("A_log", "a", "dt_bias", "b"), ("g", "beta")):
        names = [n for n in group if n in used]
        if names:
            alike: dict[str, list[str]] = {}  # a description, the names it fits
            for n in names:
                alike.setdefault(_words(named[n]), []).append(n)
            words = "; ".join(f"{', '.join(ns)}: {w}" for w, ns in alike.items())
            lines.append(f"{', '.join(names)} = {', '.join(f't.{n}' for n in names)}  # {words}")
    for name, field in BUFFERS:
        if name in used:
            state = "V, K" if case.layout == "vk" else "K, V"
            lines.append(f"{name} = t.{field}.view  # {_words(named[name])}: {WORDS[name].format(state=state)}")
    for name, field in INDICES:
        if name in used and (named[name].storage_offset() or not named[name].is_contiguous()):
            lines.append(f"{name} = t.{field}  # {_words(named[name])}: {WORDS[name]}, a view into a larger buffer")
        elif name in used:
            padded = f"; {'-1' if case.null < 0 else '0'}: padding" if name in ("slots", "write_slots") else ""
            lines.append(f"{name} = {_literal(named[name])}  # {WORDS[name]}{padded}")
    return lines


def top(case: Case, call: Call, t: Tensors, snippet: Snippet, override: str | None) -> Top:
    """main's body for `case`, whose adapter made `call` on `t` (module doc)."""
    module, _, function = call.function.rpartition(".")
    helpers = {name: getattr(importlib.import_module(m), name) for m, name in snippet.helpers}
    named = namespace(t)
    fields = dict(B=case.B, T=case.T, H=case.H, HV=case.HV, K=case.K, V=case.V, N=int(t.q.shape[0] * t.q.shape[1]))
    arguments = [(key, expression(value, named, helpers, snippet, fields, key)) for key, value in call.values.items()]
    if any(key.startswith("#") for key, _ in arguments):
        raise NotExportable(f"{call.function}: the adapter passes positional arguments")
    callee = f"api.{function}" if override else f"{snippet.callee}.{function}" if snippet.callee else function
    imports = _imports(snippet, module, function, override)
    returns = f"{snippet.returns} = " if snippet.returns else ""
    output = snippet.output.format(**fields)
    call_lines = [f"{returns}{callee}(", *(f"    {key}={text}," for key, text in arguments), ")", *snippet.after]
    used = _used([*call_lines, output]) & set(named)
    names: dict[str, str] = {}  # each named tensor's first keyword
    for key, text in arguments:
        if text in dict(BUFFERS + INDICES):
            names.setdefault(text, key)
    block = ["t = tensors(run, warm)" if case.warm_pool else "t = tensors(run)  # from the case's seed (below)"]
    block += _bindings(used, named, case)
    if case.valid:
        block += ["want = expected(run, t)  # the float64 reference (below), before the call"]
        block += ["try:", *(f"    {line}" for line in call_lines)]
        block += ["except Exception as error:  # noqa: BLE001 - an error on a valid input is the finding"]
        block += ["    return raised(run, error)"]
        last = f"return judged(run, t, {output}, want)  # the first element past the bound, if any"
    else:
        block += ["try:", *(f"    {line}" for line in call_lines)]
        block += ["except Exception as error:  # noqa: BLE001 - HV not a multiple of H: any error rejects it"]
        block += ["    return raised(run, error, valid=False)"]
        last = "return accepted(run)"
    body = ["", f"# {case_words(case)}"]
    if case.warm_pool:  # the same call twice, the first on a larger pool
        body += [
            f"# First, not judged, the same call on a pool {case.warm_pool} slot(s) larger (the same slots): a kernel",
            "# cache keyed without the pool's capacity then hands the judged call the kernel built for that pool.",
            "for warm in (True, False):",
            *(f"    {line}" for line in block),
        ]
    else:
        body += block
    body.append(last)
    called = _used([*call_lines, *snippet.build])  # a helper only where an argument's expression calls it
    roots = tuple(h for h in snippet.helpers if h[1] in called) + ((snippet.loader,) if snippet.loader else ())
    return Top(body, imports, names, roots)


def _imports(snippet: Snippet, module: str, function: str, override: str | None) -> list[str]:
    if override:
        where, _, attribute = override.partition(":")
        if attribute:
            return [f"from {where} import {attribute} as api"]
        return [f"import {where} as api"]
    lines = []
    if snippet.loader:
        lines.append(f"{snippet.loader[1]}()  # below: the library's files without its package __init__")
    return [*lines, f"from {snippet.module or module} import {snippet.imported or function}", *snippet.build]
