"""Judging one call: memory contracts first, then numerics. A broken contract raises its failure kind
(fuzz.judge.failures) with a cause naming the contract; each numeric comparison made is appended to `compared`."""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import torch

from fuzz.judge.failures import (
    GuardBreach,
    IntermediateMismatch,
    NonFinite,
    OutputMismatch,
    PoolCorruption,
    StateMismatch,
    UnwrittenOutput,
)
from fuzz.judge.oracle import Expected
from fuzz.judge.tolerance import tolerance
from fuzz.model.case import DTYPE_NAMES, Case
from fuzz.model.guarded import Guarded
from fuzz.model.patterns import has_pattern
from fuzz.model.tensors import Tensors
from fuzz.targets.semantics import Semantics


@dataclass(frozen=True)
class Comparison:
    """One judged buffer: the worst error against the float64 oracle and the verdict's bound for it."""

    kind: str  # "output", "state" or "intermediate"
    worst: float
    bound: float

    @property
    def ratio(self) -> float:
        return self.worst / self.bound if self.bound else float("inf")


def judge(
    case: Case,
    path: str,
    sem: Semantics,
    t: Tensors,
    got_output: torch.Tensor,
    expected: Expected,
    compared: list[Comparison],
) -> None:
    for name, buf in (("pool", t.pool), ("intermediate", t.inter), ("output", t.output)):
        if buf is not None:
            _check_guards(case, name, buf)
    try:
        if not sem.epilogue:  # an epilogue's output is the pair's to judge (fuzz.judge.pair)
            _check_output(case, path, sem, t.output, got_output, expected, compared)
        _check_pool(case, path, sem, t.pool, expected, compared)
        if t.inter is not None:
            _check_intermediate(case, path, sem, t.inter, expected, compared)
    except (NonFinite, OutputMismatch, StateMismatch, IntermediateMismatch) as e:
        if hint := _wrap_hint(case, t.pool):  # a wrapped read of the guard below the pool returns its NaN
            raise type(e)(case, e.detail + hint, f"{e.cause}; an int{t.pool.offset_bits} offset there wraps") from None
        raise


def _wrap_hint(case: Case, pool: Guarded) -> str:
    """Where a request's slot offset passes 2^(bits-1) elements, a wrapped offset reads elsewhere: below the pool
    (its guard's NaN) for a signed one, on a low slot of the pool past 2^bits."""
    bits, stride = pool.offset_bits, pool.full.stride(0)
    slots = [s for s in (*case.read_slots, *(case.write_slots or ())) if s >= 0 and s * stride >= 2 ** (bits - 1)]
    if not slots:
        return ""
    offset = slots[0] * stride
    where = (
        f"onto slot {(offset - 2**bits) // stride} of the pool"
        if offset >= 2**bits
        else "below the pool, whose guard NaN a wrapped read returns"
    )
    return (
        f" (slot {slots[0]}'s element offset {offset} passes 2^{bits - 1 if offset < 2**bits else bits}: "
        f"an int{bits} offset there wraps {where})"
    )


_ROW_NAMES = {"pool": "slot", "intermediate": "row", "output": "token row"}


def _check_guards(case, name, buf: Guarded) -> None:
    """Guard bits changed outside the view: an out-of-bounds write. Where the write landed 2^32 elements (or bytes)
    from a row of the view, that row's offset wrapped in int32, and the failure says so."""
    if (where := buf.outside_changed()) is None:
        return
    element = buf.element(where)
    if (wrap := buf.wrapped(element)) is not None:
        raise GuardBreach(
            case,
            f"{name} written outside the buffer: {wrap.describe(_ROW_NAMES[name])}",
            cause=f"{name} written outside the buffer where a wrapped int{wrap.bits} {wrap.unit} offset lands",
        )
    raise GuardBreach(
        case,
        f"{name} written outside the buffer at element {element} from its first (allocation "
        f"index {where}; the view is rows {buf.lead}.., first {buf.view.shape[1]} of dim 1)",
        cause=f"{name} written outside the buffer",
    )


def _token_starts(case: Case) -> list[int]:
    """The first flat token row of each request, and one past the last row."""
    starts = [0]
    for n in case.tokens:
        starts.append(starts[-1] + n)
    return starts


def _flat_tokens(x: torch.Tensor, case: Case) -> torch.Tensor:
    return x.reshape(-1, *x.shape[-2:]) if case.op != "prefill" else x


def _undefined_requests(case: Case, sem: Semantics) -> list[int]:
    """Requests whose output, states and intermediate rows the contract leaves undefined, so none is judged: padded
    rows a "discard" contract drops (a serving engine's padding), and requests that read a scratch slot
    (Semantics.scratch_slots: SGLang's slot 0, the dummy write target of padded rows), whose starting content is
    undefined. Only guards and the untouched slots still judge what they did."""
    discard = sem.pad.read == "discard"
    return [
        n
        for n, (padded, slot) in enumerate(zip(case.padded, case.read_slots))
        if (padded and discard) or (not padded and slot in sem.scratch_slots)
    ]


def _undefined_slots(case: Case, sem: Semantics) -> set[int]:
    """Pool slots whose content is undefined after the call: the scratch slots, and the slots that requests starting
    from one write (their write slot or per-token slots)."""
    slots = set(sem.scratch_slots)
    for n in _undefined_requests(case, sem):
        if not case.padded[n]:
            slots |= {(case.write_slots or case.read_slots)[n], *(case.token_slots[n] if case.token_slots else ())}
    return slots


def _undefined_rows(case: Case, sem: Semantics) -> set[int]:
    """Intermediate rows of undefined requests (their explicit row, else their batch row; a padded batch past the
    scratch puts the requests past it on its last row, SGLang's discard row)."""
    rows = case.inter_index or range(case.B)
    return {min(rows[n], case.inter_rows - 1) for n in _undefined_requests(case, sem) if rows[n] >= 0}


def _check_output(case, path, sem: Semantics, output: Guarded, got: torch.Tensor, expected: Expected, compared) -> None:
    got_f = _flat_tokens(got, case)
    starts = _token_starts(case)
    rows_of = lambda ns: [r for n in ns for r in range(starts[n], starts[n + 1])]
    padded = [n for n, p in enumerate(case.padded) if p]
    # padded requests read from the sacrificial slot 0 are undefined by contract; untouched ones keep the poison
    untouched = padded if sem.pad.read == "skip_untouched" else []
    if untouched and got is output.view:
        rows = rows_of(untouched)
        kept = has_pattern(got_f[_index(rows, got_f)], "poison").flatten(1).all(1).tolist()
        if not all(kept):
            n = bisect.bisect_right(starts, rows[kept.index(False)]) - 1
            raise PoolCorruption(
                case,
                f"padded request {n} output changed; contract: untouched",
                cause="padded request output changed; contract: untouched",
            )
    judged = torch.ones(got_f.shape[0], dtype=torch.bool, device=got_f.device)
    if padded and sem.pad.read in ("slot0", "skip_untouched"):
        judged[_index(rows_of(padded), got_f)] = False
    if undefined := _undefined_requests(case, sem):
        judged[_index(rows_of(undefined), got_f)] = False
    if got is output.view and has_pattern(got_f[judged], "poison").any():
        unwritten = _rows_with(has_pattern(got_f, "poison") & _bcast(judged, got_f))
        raise UnwrittenOutput(
            case, f"output token rows {unwritten} still hold poison", cause="output rows still hold poison"
        )
    idx = judged.nonzero().squeeze(1).to(got_f.device)
    _compare(
        case,
        "output",
        OutputMismatch,
        path,
        got_f[idx],
        _flat_tokens(expected.exact.output, case)[idx],
        _flat_tokens(expected.model.output, case)[idx],
        _rounded(got.dtype, sem.output_dtype(case)),
        compared,
    )


def _rounded(stored: torch.dtype, computed: torch.dtype) -> str:
    """The dtype an output was last rounded to on its way out: the coarser of the buffer's and the one the kernel
    writes (Semantics.output: a FlashInfer kernel rounds to bf16, then stores into an fp16 buffer). A kernel whose
    fp32 value sits near a rounding boundary of that dtype may land one unit from the model's: the tolerance of the
    coarser dtype allows it (an fp16 buffer's tolerance is 8x tighter than the bf16 rounding it holds)."""
    return DTYPE_NAMES[max(stored, computed, key=lambda d: torch.finfo(d).eps)]


def _check_pool(case, path, sem: Semantics, pool: Guarded, expected: Expected, compared) -> None:
    exact, model = expected.exact, expected.model
    written = set(exact.written_slots)
    redirected = (
        sem.pad.read == "slot0"
        and any(case.padded)
        or sem.pad.write == "slot0"
        and case.write_slots
        and any(w < 0 if case.null < 0 else w <= 0 for w in case.write_slots)
    )
    racing = {0} if redirected else set()  # several padded rows may race on slot 0
    racing |= _undefined_slots(case, sem)
    changed = pool.changed_rows(sorted(set(range(case.pool)) - written - racing))  # block by block: up to 8 GiB
    if changed:
        wrap = next((w for r in changed if (w := pool.wrapped(r * pool.full.stride(0))) and w.row in written), None)
        if wrap is not None:  # a written slot's offset wrapped onto another slot of the pool
            raise PoolCorruption(
                case,
                f"pool slot {changed[0]} changed but the contract leaves it untouched: {wrap.describe('slot')}",
                cause=f"untouched pool slot changed where a wrapped int{wrap.bits} {wrap.unit} offset lands",
            )
        raise PoolCorruption(
            case,
            f"pool slot {changed[0]} changed but the contract leaves it untouched (written slots: {sorted(written)})",
            cause="untouched pool slot changed",
        )
    slots = sorted(written - racing)
    if slots:
        _compare(
            case,
            "state",
            StateMismatch,
            path,
            pool.view[slots],
            _at(exact.slots, exact.states, slots),
            _at(model.slots, model.states, slots),
            case.state_dtype,
            compared,
        )


def _check_intermediate(case, path, sem: Semantics, inter: Guarded, expected: Expected, compared) -> None:
    exact, model = expected.exact, expected.model
    undefined = _undefined_rows(case, sem)
    rows = sorted(exact.written_rows - undefined)
    T = max(case.tokens, default=0)
    changed = inter.changed_rows(sorted(set(range(case.inter_rows)) - set(rows) - undefined))
    if rows and not bool(has_pattern(inter.view[rows, T:], "poison").all()):
        changed.append(next(r for r in rows if not bool(has_pattern(inter.view[r, T:], "poison").all())))
    if changed:
        r = changed[0]
        raise PoolCorruption(
            case,
            f"intermediate row {r} steps {T if r in rows else 0}..: changed but the contract "
            f"leaves them untouched (written rows: {rows})",
            cause="untouched intermediate steps changed",
        )
    if rows:
        got = inter.view[rows, :T]
        if has_pattern(got, "poison").any():
            raise IntermediateMismatch(
                case,
                f"intermediate rows {rows} steps < T={T} still hold poison",
                cause="intermediate steps still hold poison",
            )
        _compare(
            case,
            "intermediate",
            IntermediateMismatch,
            path,
            got,
            _at(exact.rows, exact.row_states, rows),
            _at(model.rows, model.row_states, rows),
            case.state_dtype,
            compared,
        )


def _index(rows: list[int], like: torch.Tensor) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.int64, device=like.device)


def _at(ids: torch.Tensor, values: torch.Tensor, wanted: list[int]) -> torch.Tensor:
    """values[i] for ids[i] in `wanted` order (a sparse result lists its slots / rows in write order)."""
    where = {int(s): i for i, s in enumerate(ids.tolist())}
    return values[torch.tensor([where[w] for w in wanted], device=values.device)]


def _compare(case, kind, failure, path, got, exact, model, dtype, compared) -> None:
    if got.numel() == 0:
        return
    # float64 on the device the result lives on: no host copies of [B, T, HV, V, K] intermediate buffers
    got64, exact64, model64 = (x.detach().to(got.device, torch.float64) for x in (got, exact, model))
    # Judged where the oracle is finite and representable where the result is stored: an fp16 output whose true
    # value exceeds 65504 is inf, a property of the dtype, not of the kernel (also when the kernel computes in bf16
    # and only the caller's fp16 buffer overflows, and when the precision model, which rounds the inputs as the
    # kernel does, lands past the largest value). The last 1% below the largest finite value rounds either way.
    representable = torch.maximum(exact64.abs(), model64.abs()) <= 0.99 * torch.finfo(got.dtype).max
    finite = torch.isfinite(exact64) & torch.isfinite(model64) & representable
    bad = finite & ~torch.isfinite(got64)
    if bad.any():
        at = tuple(bad.nonzero()[0].tolist())
        raise NonFinite(
            case,
            f"{kind}{list(at)} = {got64[at].item()} where the oracle is {exact64[at].item():.6g}",
            cause=f"{kind} not finite where the oracle is",
        )
    zero = exact64.new_zeros(())
    err = (got64 - exact64).abs().where(finite, zero)
    model_err = float((model64 - exact64).abs().where(finite, zero).max())
    scale = float(exact64.abs().where(finite, zero).max())
    tol = tolerance(kind, dtype)
    bound = tol.bound(model_err, scale, case.T)
    worst = float(err.max())
    compared.append(Comparison(kind, worst, bound))
    if worst > bound:
        at = tuple(int(i) for i in torch.unravel_index(err.argmax(), err.shape))
        raise failure(
            case,
            f"{kind}{list(at)}: target {got64[at].item():.7g}, oracle {exact64[at].item():.7g}, "
            f"model {model64[at].item():.7g}; max error {worst:.3g} > bound {bound:.3g} "
            f"(= {tol.c} x model error {model_err:.3g} + floor at |oracle|max {scale:.3g}, T={case.T})",
            cause=f"{kind} error above the bound",
        )


def _bcast(mask, like):
    return mask.view(-1, *([1] * (like.dim() - 1))).expand_as(like)


def _rows_with(m: torch.Tensor) -> list[int]:
    return m.flatten(1).any(1).nonzero().squeeze(1).tolist()
