"""Two paths of one engine judged against each other (Target.paired; fuzz.run.harness runs the pair after the
standard verdict): a Disagreement beyond the pair's bound is a finding, even where the oracle is unsure.
  sglang-glue-fallback  the FlashInfer glue and its Triton fallback on a misaligned pool (fuzz.targets.sglang_glue)
  vllm-mtp              vLLM's Triton MTP port and fused_sigmoid_gating + the gated RMSNorm (fuzz.targets.vllm)
Each run is judged against the oracle first (fuzz.judge.verdict; a partner not under test is not,
Target.oracle_judged); this compares only what both contracts define: the output rows of live requests, the pool
slots the oracle says they write, and their scratch rows. Padded rows and the engine's scratch slots
(Semantics.scratch_slots: SGLang's reserved slot 0), with the requests that read one, differ by contract and are left
out.

The pair's bound is the verdict's tolerance rule (fuzz.judge.tolerance) with one run standing for the oracle: c times
how far apart the two runs' precision models are, plus the floor once for each run's reduction order,

    |a - b|max  <=  c * |model_a - model_b|max  +  2 * (rel * |exact|max + abs) * (1 + growth * (T - 1)),

with the tolerance of the coarser of the two stored dtypes. A value finite in one run and not in the other
disagrees whatever the bound.

An output through a fused epilogue the oracle does not model (Semantics.epilogue: the MTP port's gated RMSNorm) has
no oracle values to scale by: both runs store the same quantity in one dtype after fp32 arithmetic in another order,
so each element may differ by the rounding of its own value plus the reduction noise of the row it is normalized by,

    |a - b|  <=  EPILOGUE_ULPS * eps(dtype) * (|b| + EPILOGUE_REL * |b|max).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fuzz.judge.failures import Disagreement
from fuzz.judge.oracle import Expected
from fuzz.judge.tolerance import tolerance
from fuzz.judge.verdict import Comparison
from fuzz.model.case import DTYPE_NAMES, Case
from fuzz.model.tensors import Tensors
from fuzz.targets.semantics import Semantics

EPILOGUE_ULPS, EPILOGUE_REL = 8.0, 2**-4  # the epilogue's bound (module doc)


@dataclass(frozen=True)
class Run:
    """One path's call on the case: its tensors after the call, the output it returned, the oracle's values under
    its own contract."""

    tensors: Tensors
    output: torch.Tensor
    expected: Expected


def judge_pair(case: Case, sem: Semantics, a: Run, b: Run, compared: list[Comparison]) -> None:
    """Raise Disagreement where runs `a` and `b` of the case differ beyond the pair's bound, on what both contracts
    define; `sem` is a's contract (its scratch slots, its epilogue). Appends a "pair" comparison per kind compared."""
    live = [n for n, padded in enumerate(case.padded) if not padded and case.read_slots[n] not in sem.scratch_slots]
    starts = [0, *torch.tensor(case.tokens, dtype=torch.int64).cumsum(0).tolist()]
    written = lambda run: run.expected.exact
    slots = set(written(a).written_slots) & set(written(b).written_slots) - set(sem.scratch_slots)
    rows = {case.inter_index[n] if case.inter_index else n for n in live} if case.inter_rows else set()
    index = {
        "output": [r for n in live for r in range(starts[n], starts[n + 1])],
        "state": sorted(slots),
        "intermediate": sorted(rows & written(a).written_rows & written(b).written_rows),
    }
    for kind, at in index.items():
        if at and kind == "output" and sem.epilogue:
            _compare_epilogue(case, sem.epilogue, a.output, b.output, at, compared)
        elif at:
            _compare(case, kind, _values(case, a, kind, at), _values(case, b, kind, at), compared)


def _values(case: Case, run: Run, kind: str, at: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(the run's values, its precision model's, the float64 oracle's) at token rows / slots / scratch rows `at`."""
    model, exact = run.expected.model, run.expected.exact
    if kind == "output":
        flat = lambda x: x.reshape(-1, *x.shape[-2:])[at]
        return flat(run.output), flat(model.output), flat(exact.output)
    if kind == "state":
        return run.tensors.pool.view[at], _at(model.slots, model.states, at), _at(exact.slots, exact.states, at)
    got = run.tensors.inter.view[at, : case.T]
    return got, _at(model.rows, model.row_states, at), _at(exact.rows, exact.row_states, at)


def _at(ids: torch.Tensor, values: torch.Tensor, wanted: list[int]) -> torch.Tensor:
    where = {int(s): i for i, s in enumerate(ids.tolist())}
    return values[torch.tensor([where[w] for w in wanted], device=values.device)]


def _compare(case: Case, kind: str, a: tuple, b: tuple, compared: list[Comparison]) -> None:
    stored = max(a[0].dtype, b[0].dtype, key=lambda d: torch.finfo(d).eps)
    (got_a, model_a, exact), (got_b, model_b, _) = ([x.detach().to(torch.float64) for x in v] for v in (a, b))
    finite_a, finite_b = torch.isfinite(got_a), torch.isfinite(got_b)
    if (finite_a != finite_b).any():
        at = tuple((finite_a != finite_b).nonzero()[0].tolist())
        raise Disagreement(
            case,
            f"{kind}{list(at)}: {got_a[at].item():.7g} on one path, {got_b[at].item():.7g} on the other",
            cause=f"{kind} finite on one path only",
        )
    judged = finite_a & torch.isfinite(model_a) & torch.isfinite(model_b) & torch.isfinite(exact)
    zero = got_a.new_zeros(())
    gap = lambda x, y: float((x - y).abs().where(judged, zero).max())
    worst, models, scale = gap(got_a, got_b), gap(model_a, model_b), gap(exact, zero)
    tol = tolerance(kind, DTYPE_NAMES[stored])
    bound = tol.bound(models, scale, case.T) + tol.bound(0.0, scale, case.T)
    compared.append(Comparison(f"{kind} pair", worst, bound))
    if worst > bound:
        at = _worst((got_a - got_b).abs().where(judged, zero))
        text = f"{kind}{list(at)}: {got_a[at].item():.7g} on one path, {got_b[at].item():.7g} on the other; max gap "
        text += f"{worst:.3g} > the pair's bound {bound:.3g} (= {tol.c} x model gap {models:.3g} + 2 x floor at "
        raise Disagreement(
            case, text + f"|oracle|max {scale:.3g}, T={case.T})", f"{kind} paths disagree above the pair's bound"
        )


def _compare_epilogue(
    case: Case, what: str, a: torch.Tensor, b: torch.Tensor, rows: list[int], compared: list[Comparison]
) -> None:
    """Outputs `a` against `b` (one dtype) on token rows `rows` under the epilogue's bound (module doc); a NaN or
    infinity on one side only disagrees."""
    flat = lambda x: x.reshape(-1, *x.shape[-2:])[rows].double()
    got_a, got_b = flat(a), flat(b)
    eps = torch.finfo(a.dtype).eps
    both = torch.isfinite(got_a) & torch.isfinite(got_b)
    scale = float(got_b.where(both, 0).abs().max())
    bound = EPILOGUE_ULPS * eps * (got_b.abs() + EPILOGUE_REL * scale)
    err = (got_a - got_b).abs().where(both, torch.where(torch.isfinite(got_a) == torch.isfinite(got_b), 0.0, torch.inf))
    excess = err - bound
    compared.append(Comparison("output pair", float(err.max()), float(bound.where(both, 0).max())))
    if not bool((excess > 0).any()):
        return
    at = _worst(excess)
    text = f"{what}: token row {rows[at[0]]}{list(at[1:])}: {got_a[at].item():.7g} against {got_b[at].item():.7g}, "
    text += f"error {err[at].item():.3g} > bound {bound[at].item():.3g} (= {EPILOGUE_ULPS} x eps {eps:.3g} x "
    raise Disagreement(
        case, text + f"(|value| + {EPILOGUE_REL} x |max| {scale:.3g}))", f"{what}: error above the pair's bound"
    )


def _worst(x: torch.Tensor) -> tuple[int, ...]:
    """The index of x's largest element."""
    return tuple(int(i) for i in torch.unravel_index(x.argmax(), x.shape))
