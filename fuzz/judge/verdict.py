"""Judging one call: memory contracts first, then numerics. Each failure kind is its own exception
class, so Hypothesis keeps a separate minimal example per kind."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from fuzz.case import Case
from fuzz.generate.materialize import Guarded, has_pattern
from fuzz.targets.semantics import DTYPE_NAMES, Semantics
from fuzz.judge.tolerance import tolerance
from reference import PoolResult


class GdnFailure(AssertionError):
    """Base: a target disagreed with the oracle or broke a memory contract."""


class OutputMismatch(GdnFailure):
    pass


class StateMismatch(GdnFailure):
    pass


class IntermediateMismatch(GdnFailure):
    pass


class PoolCorruption(GdnFailure):
    """A pool slot or buffer row the contract leaves untouched changed."""


class GuardBreach(GdnFailure):
    """Bytes outside the buffer (or in a strided view's gaps) changed: an out-of-bounds write."""


class UnwrittenOutput(GdnFailure):
    """Output the contract says is written still holds the poison pattern."""


class NonFinite(GdnFailure):
    """NaN or Inf where the oracle is finite."""


class RejectedValidInput(GdnFailure):
    """The target raised on a case inside its declared support."""


class AcceptedInvalidInput(GdnFailure):
    """The target ran a case it must reject (e.g. HV not a multiple of H)."""


class KernelCrash(GdnFailure):
    """The isolated worker process died during the call (signal, nonzero exit) or its CUDA context was
    poisoned (illegal memory access, launch failure): the message carries the kernel's error text."""


class KernelHang(GdnFailure):
    """The call did not return within the per-call timeout; the worker was killed."""


FAILURE_KINDS = (OutputMismatch, StateMismatch, IntermediateMismatch, PoolCorruption, GuardBreach,
                 UnwrittenOutput, NonFinite, RejectedValidInput, AcceptedInvalidInput, KernelCrash, KernelHang)


# The numerics of the current check (fuzz.run.harness clears it per case): one {kind, path, worst, bound, ratio}
# per comparison made, read by fuzz.run.session for --gdn-report; ratio = worst / bound, a failure above 1.
COMPARED: list[dict] = []


@dataclass(frozen=True)
class Expected:
    exact: PoolResult  # float64
    model: PoolResult  # the target's precision model


def judge(case: Case, path: str, sem: Semantics, pool: Guarded, inter: Guarded | None, output: Guarded,
          got_output: torch.Tensor, expected: Expected) -> None:
    for name, buf in (("pool", pool), ("intermediate", inter), ("output", output)):
        if buf is not None:
            _check_guards(case, name, buf)
    _check_output(case, path, sem, output, got_output, expected)
    _check_pool(case, path, sem, pool, expected)
    if inter is not None:
        _check_intermediate(case, path, inter, expected)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view({4: torch.int32, 2: torch.int16}[t.element_size()])


def _check_guards(case, name, buf: Guarded) -> None:
    changed = (_bits(buf.full) != _bits(buf.before)) & ~buf.mask
    if changed.any():
        where = tuple(changed.nonzero()[0].tolist())
        raise GuardBreach(f"{case!r}: {name} written outside the buffer at allocation index {where} "
                          f"({int(changed.sum())} elements; the view is rows {buf.lead}.., first "
                          f"{buf.view.shape[1]} of dim 1)")


def _token_rows(case: Case, n: int) -> slice:
    start = sum(case.tokens[:n])
    return slice(start, start + case.tokens[n])


def _flat_tokens(x: torch.Tensor, case: Case) -> torch.Tensor:
    return x.reshape(-1, *x.shape[-2:]) if case.op != "prefill" else x


def _check_output(case, path, sem: Semantics, output: Guarded, got: torch.Tensor, expected: Expected) -> None:
    got_f, before = _flat_tokens(got, case), _flat_tokens(output.before_view, case)
    judged = torch.zeros(got_f.shape[0], dtype=torch.bool)
    for n, padded in enumerate(case.padded):
        rows = _token_rows(case, n)
        if padded and sem.pad.read == "slot0":
            continue  # computed from the sacrificial slot 0: undefined by contract
        if padded and sem.pad.read == "skip_untouched":
            if got is output.view and not torch.equal(_bits(got_f[rows]), _bits(before[rows])):
                raise PoolCorruption(f"{case!r}: padded request {n} output changed; contract: untouched")
            continue
        judged[rows] = True
    if got is output.view and has_pattern(got_f[judged], "poison").any():
        unwritten = _rows_with(has_pattern(got_f, "poison") & _bcast(judged, got_f))
        raise UnwrittenOutput(f"{case!r}: output token rows {unwritten} still hold poison")
    idx = judged.nonzero().squeeze(1).to(got_f.device)
    _compare(case, "output", OutputMismatch, path, got_f[idx], _flat_tokens(expected.exact.output, case)[idx],
             _flat_tokens(expected.model.output, case)[idx], DTYPE_NAMES[got.dtype])


def _check_pool(case, path, sem: Semantics, pool: Guarded, expected: Expected) -> None:
    written = set(expected.exact.written_slots)
    redirected = sem.pad.read == "slot0" and any(case.padded) or sem.pad.write == "slot0" and case.write_slots and any(
        w < 0 if case.null < 0 else w <= 0 for w in case.write_slots)
    racing = {0} if redirected else set()  # several padded rows may race on slot 0
    untouched = torch.ones(case.pool, dtype=torch.bool, device=pool.view.device)  # every slot at once: up to 8 GiB
    untouched[sorted(written | racing)] = False
    changed = (_bits(pool.view) != _bits(pool.before_view)).flatten(1).any(1) & untouched
    if changed.any():
        slot = int(changed.nonzero()[0])
        raise PoolCorruption(f"{case!r}: pool slot {slot} changed but the contract leaves it untouched "
                             f"(written slots: {sorted(written)})")
    slots = sorted(written - racing)
    if slots:
        _compare(case, "state", StateMismatch, path, pool.view[slots], expected.exact.pool[slots],
                 expected.model.pool[slots], case.state_dtype)


def _check_intermediate(case, path, inter: Guarded, expected: Expected) -> None:
    before = inter.before_view
    rows = sorted(expected.exact.written_rows)
    T = max(case.tokens, default=0)
    for r in range(case.inter_rows):
        keep = slice(0, None) if r not in rows else slice(T, None)
        if not torch.equal(_bits(inter.view[r, keep]), _bits(before[r, keep])):
            raise PoolCorruption(f"{case!r}: intermediate row {r} steps {keep.start}: changed but the contract "
                                 f"leaves them untouched (written rows: {rows})")
    if rows:
        got = inter.view[rows, :T]
        if has_pattern(got, "poison").any():
            raise IntermediateMismatch(f"{case!r}: intermediate rows {rows} steps < T={T} still hold poison")
        _compare(case, "intermediate", IntermediateMismatch, path, got, expected.exact.intermediate[rows, :T],
                 expected.model.intermediate[rows, :T], case.state_dtype)


def _compare(case, kind, failure, path, got, exact, model, dtype) -> None:
    if got.numel() == 0:
        return
    # float64 on the device the result lives on: no host copies of [B, T, HV, V, K] intermediate buffers
    got64, exact64, model64 = (x.detach().to(got.device, torch.float64) for x in (got, exact, model))
    # Judged where the oracle is finite and representable where the result is stored: an fp16 output whose true
    # value exceeds 65504 is inf, a property of the dtype, not of the kernel (also when the kernel computes in bf16
    # and only the caller's fp16 buffer overflows). The last 1% below the largest finite value rounds either way.
    representable = exact64.abs() <= 0.99 * torch.finfo(got.dtype).max
    finite = torch.isfinite(exact64) & torch.isfinite(model64) & representable
    bad = finite & ~torch.isfinite(got64)
    if bad.any():
        at = tuple(bad.nonzero()[0].tolist())
        raise NonFinite(f"{case!r}: {kind}{list(at)} = {got64[at].item()} where the oracle is {exact64[at].item():.6g}")
    zero = exact64.new_zeros(())
    err = (got64 - exact64).abs().where(finite, zero)
    model_err = float((model64 - exact64).abs().where(finite, zero).max())
    scale = float(exact64.abs().where(finite, zero).max())
    tol = tolerance(path, kind, dtype)
    bound = tol.bound(model_err, scale, case.T)
    worst = float(err.max())
    COMPARED.append({"kind": kind, "path": path, "worst": worst, "bound": bound, "ratio": worst / bound})
    if worst > bound:
        at = tuple(int(i) for i in torch.unravel_index(err.argmax(), err.shape))
        raise failure(f"{case!r}: {kind}{list(at)}: target {got64[at].item():.7g}, oracle {exact64[at].item():.7g}, "
                      f"model {model64[at].item():.7g}; max error {worst:.3g} > bound {bound:.3g} "
                      f"(= {tol.c} x model error {model_err:.3g} + floor at |oracle|max {scale:.3g}, T={case.T})")


def _bcast(mask, like):
    return mask.view(-1, *([1] * (like.dim() - 1))).expand_as(like)


def _rows_with(m: torch.Tensor) -> list[int]:
    return m.flatten(1).any(1).nonzero().squeeze(1).tolist()
