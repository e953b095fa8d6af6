"""The helpers of every exported script: what its top (fuzz.export.script writes it: the tensors, the library call,
the verdict) calls, copied below the script's marker without docstrings and without the import block.

The names imported here from gdn-fuzz are the roots fuzz.export.shake embeds after this code, verbatim: the value
generator and materialize, the float64 oracle (reference.ops), the tolerance rule, the guard and poison patterns. So
the script is one namespace and runs without gdn-fuzz. Every outcome is one line and an exit status (`say`):
1 `REPRODUCED: <kind>: <where, expected vs actual>`, 0 `NOT REPRODUCED: <what was compared>`, 2 `NOT RUN: <why>`
(a missing package with its pip line, no GPU or the wrong one, a bad argument, an error by which the library says it
does not support this device, out of memory); exit 1 means a reproduction and nothing else.

The judgment is gdn-fuzz's verdict (fuzz.judge.verdict) written for one call: the same checks in the same order, so
the script and the fuzzer agree on a case (tests/export/test_export.py holds them to it). It names the first element
past the bound where the fuzzer names the worst, in the call's own keywords (Repro.names).

Repro is what the script's end says about the finding: the case's fields (a namespace materialize reads), the
function, the library and release, `requires` (top-level module -> (distribution, version) for a missing package's
pip line), the kernel path's tolerance key, padding contract, gate form and precision model, `gpu` (the compute
capability majors the library needs; empty: a CPU too), `triton` (Triton kernels, interpreted on a CPU),
`third_party` ((name, module, attribute) the embedded code reads, imported by `needs` once TRITON_INTERPRET is set),
`scratch` (pool slots whose content is undefined after a call: SGLang's slot 0),
`offset_bits` (the width the buffers' guards are sized for) and `sources` (an override module of gdn-fuzz's, by name).
"""

import argparse
import contextlib
import dataclasses
import importlib
import importlib.metadata
import itertools
import os
from types import SimpleNamespace

import torch

from fuzz.generate.materialize import materialize
from fuzz.model.patterns import bits, has_pattern
from reference.contracts import Precision
from reference.gates import LogGates, RawGates

DTYPES = {"torch.float32": "fp32", "torch.bfloat16": "bf16", "torch.float16": "fp16"}


class Found(Exception):
    """Where the call broke its contract: the failure class (`kind`) and the place, in the call's own names."""

    def __init__(self, kind, where):
        super().__init__(where)
        self.kind = kind


def say(status, line):
    print(line)
    return status


def not_run(why):
    return say(2, f"NOT RUN: {why}")


def missing(requires, error):
    """`needs <distribution> (pip install '<distribution>==<version>')` for the package an import did not find."""
    name = (error.name or str(error).split()[-1].strip("'")).partition(".")[0]
    dist, version = requires.get(name, (name, None))
    return f"needs {dist} (pip install '{dist}{f'=={version}' if version else ''}')"


class Arguments(argparse.ArgumentParser):
    def error(self, message):
        raise SystemExit(not_run(f"bad argument: {message}"))


def start(repro, argv):
    """The command line and the device (SimpleNamespace(repro, device)), checked before anything runs."""
    parser = Arguments(description=f"Reproduce a finding on {repro.function}.")
    parser.add_argument("--device", choices=("cpu", "cuda"), help="default: cuda where torch sees a GPU")
    device, gpu = parser.parse_args(argv).device, torch.cuda.is_available()
    device, major = device or ("cuda" if gpu else "cpu"), gpu and torch.cuda.get_device_capability()[0]
    if device == "cuda" and not gpu:
        raise SystemExit(not_run(f"--device cuda: torch {torch.__version__} sees no CUDA GPU here"))
    if repro.gpu and (device == "cpu" or major not in repro.gpu):
        here = f"this GPU is {torch.cuda.get_device_name()}, {major}.x" if device == "cuda" else "--device cpu"
        here = here if gpu else f"torch {torch.__version__} sees none here"
        need = " or ".join(f"{m}.x" for m in repro.gpu)
        raise SystemExit(not_run(f"{repro.function} needs a CUDA GPU of compute capability {need}; {here}"))
    if device == "cpu" and repro.triton:
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported
    return SimpleNamespace(repro=repro, device=device)


@contextlib.contextmanager
def needs(run):
    """The block's imports, after the embedded code's own (third_party): a missing package, a loader that cannot
    load the library's files, or a library that fails to import is the one NOT RUN line."""
    try:
        for name, module, attribute in run.repro.third_party:
            value = importlib.import_module(module)
            globals()[name] = getattr(value, attribute) if attribute else value
        yield
    except Exception as error:  # noqa: BLE001 - the import's own failure: a missing package behind it, or its text
        cause = error if isinstance(error, ImportError) else error.__cause__
        why = (
            missing(run.repro.requires, cause) if isinstance(cause, ImportError) else f"{type(error).__name__}: {error}"
        )
        raise SystemExit(not_run(why)) from None


def tensors(run, warm=False):  # the tensors the script's top names
    """The case's tensors (materialize); `warm`: the unjudged first call's, on a larger pool with the same slots."""
    case = run.repro.case
    if warm:
        case = SimpleNamespace(**{**vars(case), "pool": case.pool + case.warm_pool, "warm_pool": 0})
    return materialize(case, run.device, offset_bits=run.repro.offset_bits)


def expected(run, t):
    """The float64 gated delta rule and the same in the kernel's precision model (repro.oracle: reference.ops'
    verify or prefill), on the tensors before the call, and what the slots it writes hold before it."""
    repro, case = run.repro, run.repro.case
    model = repro.model
    if repro.triton and os.environ.get("TRITON_INTERPRET") == "1":
        model = dataclasses.replace(model, bf16_truncates=True)  # the CPU interpreter truncates fp32 -> bf16
    gates = RawGates(t.A_log, t.a, t.dt_bias, t.b) if repro.gates == "raw" else LogGates(t.g, t.beta)
    kw = dict(write_slots=t.write_slots, scale=case.scale, use_l2norm=case.l2norm, layout=case.layout, pad=repro.pad)
    inputs = [t.q, t.k, t.v, gates, t.pool.view, t.read_slots]
    if case.op == "prefill":
        inputs.insert(4, t.cu_seqlens)
    else:
        kw |= dict(disable_state_update=not case.update, intermediate=t.inter and t.inter.view, output=t.output.view)
        kw |= dict(intermediate_rows=t.inter_index, token_slots=t.token_slots)
    exact, fp32 = (repro.oracle(*inputs, **kw, precision=p) for p in (Precision(), model))
    return exact, fp32, {s: t.pool.view[s].clone() for s in exact.written_slots}  # the written slots, before


def verdict(run, status, line):
    """The outcome line, with the library's release and the device."""
    try:
        lib = f"{run.repro.library} {importlib.metadata.version(run.repro.library)}"
    except (importlib.metadata.PackageNotFoundError, ValueError):
        lib = run.repro.library or "gdn-fuzz's module"
    return say(status, f"{line} ({lib}, {run.device})")


def raised(run, error, valid=True):
    """The call raised: on a valid case a reproduction (RejectedValidInput) unless the error is a missing package,
    the device's memory, or the library's word that it does not support this device; on an invalid one, as it must."""
    repro, name = run.repro, type(error).__name__
    if isinstance(error, ImportError):
        return not_run(missing(repro.requires, error))
    if not valid:
        return verdict(run, 0, f"NOT REPRODUCED: HV={repro.case.HV} with H={repro.case.H} rejected ({name})")
    why = repro.device_error and repro.device_error(error)  # unsupported_here: FlashInfer's words for it
    if why or isinstance(error, torch.OutOfMemoryError):
        return not_run(f"{repro.function} cannot run on {run.device}: {why or 'out of memory'}")
    return verdict(run, 1, f"REPRODUCED: RejectedValidInput: {name}: {' '.join(str(error).split())}")


def accepted(run):
    case = run.repro.case
    return verdict(
        run, 1, f"REPRODUCED: AcceptedInvalidInput: HV={case.HV} is not a multiple of H={case.H}, yet it ran"
    )


def judged(run, t, got, want):
    """REPRODUCED with the first place that breaks the contract, else NOT REPRODUCED with what was compared: writes
    outside a buffer's view first, then the checks of repro.checks (output, pool, intermediate states: the verdict's
    order). What the call must leave alone is compared bit for bit with the reference's copy of it (the buffer before
    the call), or with the poison an output buffer starts with."""
    repro = run.repro
    try:
        for what, buffer in (("pool", t.pool), ("inter", t.inter), ("output", t.output)):
            if buffer is not None:
                outside = ~has_pattern(buffer.full, "guard")
                outside[buffer.lead : buffer.lead + buffer.view.shape[0], : buffer.view.shape[1]] = False
                if outside.any():
                    at = outside.nonzero()[0].tolist()
                    raise Found("GuardBreach", f"{repro.names.get(what, what)} written outside its view, at {at}")
        compared = [line for check in repro.checks for line in check(repro, t, got, *want)]
    except Found as found:
        return verdict(run, 1, f"REPRODUCED: {found.kind}: {found}")
    return verdict(run, 0, f"NOT REPRODUCED: largest errors: {', '.join(compared)}")


def undefined(repro):
    """Requests whose output, states and intermediate rows the contract leaves undefined, so none is judged: padded
    ones a "discard" contract drops (a serving engine's padding), and live ones that read a scratch slot
    (repro.scratch: SGLang's slot 0, the dummy write target of padded rows), whose starting content is undefined."""
    case, discard = repro.case, repro.pad.read == "discard"
    pairs = enumerate(zip(case.padded, case.read_slots))
    return [n for n, (pad, slot) in pairs if (pad and discard) or (not pad and slot in repro.scratch)]


def check_output(repro, t, got, exact, model, before):
    case, name, read = repro.case, repro.names.get("output", "output"), repro.pad.read
    flat = (lambda x: x) if case.op == "prefill" else (lambda x: x.reshape(-1, *x.shape[-2:]))
    rows, starts, ours = flat(got), [0, *itertools.accumulate(case.tokens)], got is t.output.view
    rows_of = lambda ns: [r for n in ns for r in range(starts[n], starts[n + 1])]
    padded = rows_of(n for n, pad in enumerate(case.padded) if pad)
    for r in padded if read == "skip_untouched" and ours else ():  # the caller's buffer: poison where not written
        if not has_pattern(rows[r], "poison").all():
            raise Found("PoolCorruption", f"{name} token row {r} (a padded request's) changed; it must stay as given")
    skipped = set(rows_of(undefined(repro))) | (set(padded) if read in ("slot0", "skip_untouched") else set())
    judged = [r for r in range(rows.shape[0]) if r not in skipped]
    if unwritten := [r for r in judged if ours and has_pattern(rows[r], "poison").any()]:
        raise Found("UnwrittenOutput", f"{name} token rows {unwritten} were not written")
    dtype = max(got.dtype, repro.output_dtype, key=lambda d: torch.finfo(d).eps)  # the coarser of two roundings
    place = lambda r: [r] if case.op == "prefill" else list(divmod(r, case.T))  # token row -> [request, token]
    at = lambda i: f"{name}{place(judged[i[0]]) + list(i[1:])}"
    return compare(repro, "output", rows[judged], flat(exact.output)[judged], flat(model.output)[judged], dtype, at)


def check_pool(repro, t, got, exact, model, before):
    case, pad, name, view = repro.case, repro.pad, repro.names.get("pool", "pool"), t.pool.view
    padded_write = any(w < 0 if case.null < 0 else w <= 0 for w in case.write_slots or ())
    racing = {0} if pad.read == "slot0" and any(case.padded) or pad.write == "slot0" and padded_write else set()
    racing |= set(repro.scratch)  # and what live requests starting from a scratch slot write: undefined
    for n in (n for n in undefined(repro) if not case.padded[n]):
        racing |= {(case.write_slots or case.read_slots)[n], *(case.token_slots[n] if case.token_slots else ())}
    slots = sorted(set(exact.written_slots) - racing)
    for s in sorted(set(range(case.pool)) - set(exact.written_slots) - racing):
        if not torch.equal(bits(view[s]), bits(exact.pool[s])):
            raise Found("PoolCorruption", f"{name}[{s}] changed; only slots {slots} may be written")
    at = lambda i: f"{name}{[slots[i[0]], *i[1:]]}"
    try:
        return compare(repro, "state", view[slots], exact.pool[slots], model.pool[slots], view.dtype, at)
    except Found as found:  # a lost write leaves the state as it was: say so
        kept = [s for s in slots if torch.equal(bits(view[s]), bits(before[s]))]
        lost = f"; {name} slots {kept} kept their state from before the call" if kept else ""
        raise Found(found.kind, f"{found}{lost}") from None


def check_inter(repro, t, got, exact, model, before):
    name, view, before = repro.names.get("inter", "intermediate states"), t.inter.view, exact.intermediate
    case, index = repro.case, repro.case.inter_index or range(repro.case.B)  # a request's row: explicit, else batch
    skipped = {min(index[n], case.inter_rows - 1) for n in undefined(repro) if index[n] >= 0}  # undefined requests'
    rows, steps = sorted(set(exact.written_rows) - skipped), max(case.tokens, default=0)
    kept = [r for r in range(view.shape[0]) if r not in rows and r not in skipped]
    for r, first in [(r, 0) for r in kept] + [(r, steps) for r in rows]:
        if not torch.equal(bits(view[r, first:]), bits(before[r, first:])):
            raise Found("PoolCorruption", f"{name}[{r}, {first}:] changed; only rows {rows}, steps < {steps} may")
    if has_pattern(view[rows, :steps], "poison").any():
        raise Found("IntermediateMismatch", f"{name} rows {rows}, steps < {steps} were not all written")
    at = lambda i: f"{name}{[rows[i[0]], *i[1:]]}"
    got, fp32 = view[rows, :steps], model.intermediate[rows, :steps]
    return compare(repro, "intermediate", got, before[rows, :steps], fp32, view.dtype, at)


def compare(repro, kind, got, exact, model, dtype, at):
    """got within the tolerance rule of the float64 `exact`: at most c times the precision model's own error plus a
    floor of a few ulps of the largest value, growing with T; judged where the reference is finite and the stored
    dtype can hold it."""
    if got.numel() == 0:
        return []
    biggest = torch.finfo(got.dtype).max
    got, exact, model = (x.detach().to(got.device, torch.float64) for x in (got, exact, model))
    defined = exact.isfinite() & model.isfinite() & (torch.maximum(exact.abs(), model.abs()) <= 0.99 * biggest)
    if (bad := defined & ~got.isfinite()).any():
        i = tuple(bad.nonzero()[0].tolist())
        raise Found("NonFinite", f"{at(i)} = {got[i].item()}, expected {exact[i].item():.7g}")
    zero = exact.new_zeros(())
    error = (got - exact).abs().where(defined, zero)
    model_error = float((model - exact).abs().where(defined, zero).max())
    tol = repro.tolerances[kind, DTYPES[str(dtype)]]
    bound = tol.bound(model_error, float(exact.abs().where(defined, zero).max()), repro.case.T)
    if error.max() > bound:
        i, worst = tuple((error > bound).nonzero()[0].tolist()), float(error.max())
        where = f"{at(i)} = {got[i].item():.7g}, expected {exact[i].item():.7g}"
        raise Found(f"{kind.capitalize()}Mismatch", f"{where} (largest error {worst:.2g}, allowed {bound:.2g})")
    return [f"{kind} {error.max():.2g} (allowed {bound:.2g})"]
