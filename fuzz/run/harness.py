"""One differential check: Case -> tensors -> oracle (exact and model) -> target -> verdict."""
from __future__ import annotations

import time
from collections import Counter
from contextlib import contextmanager

import torch
from hypothesis import event as _event
from hypothesis.errors import InvalidArgument

import reference
from fuzz.case import Case
from fuzz.generate.materialize import Tensors, materialize
from fuzz.targets.semantics import Semantics
from fuzz.targets.base import Target
from fuzz.judge import verdict
from fuzz.judge.verdict import AcceptedInvalidInput, Expected, GdnFailure, RejectedValidInput, judge
from reference import LogGates, Precision, RawGates


def event(text: str) -> None:
    """Record coverage for --hypothesis-show-statistics; a no-op when replaying outside Hypothesis."""
    try:
        _event(text)
    except InvalidArgument:
        pass


def oracle(case: Case, t: Tensors, sem: Semantics, precision: Precision) -> reference.PoolResult:
    """The reference call for this case under the target's contract (before the target runs)."""
    gates = RawGates(t.A_log, t.a, t.dt_bias, t.b) if sem.gates == "raw" else LogGates(t.g, t.beta)
    common = dict(write_slots=t.write_slots, scale=case.scale, use_l2norm=case.l2norm, layout=case.layout,
                  pad=sem.pad, precision=precision)
    if case.op == "prefill":
        return reference.prefill(t.q, t.k, t.v, gates, t.cu_seqlens, t.pool.view, t.read_slots, **common)
    return reference.mtp_verify(
        t.q, t.k, t.v, gates, t.pool.view, t.read_slots, disable_state_update=not case.update,
        intermediate=None if t.inter is None else t.inter.view, intermediate_rows=t.inter_index,
        token_slots=t.token_slots, output=t.output.view, **common)


def dispatch_bucket(target: Target, case: Case) -> str:
    """What a compiled kernel is keyed by (B is dynamic): one bucket per compile on GPU targets."""
    return (f"{target.name}:{case.op}-T{case.T}-H{case.H}-HV{case.HV}-K{case.K}-V{case.V}-{case.state_dtype}"
            f"-{case.input_dtype}-{case.index_dtype}-{case.layout}{'-strided' if case.pool_gap else ''}"
            f"{'-inter' if case.inter_rows else ''}{'' if case.update else '-noupdate'}")


def check(target: Target, case: Case, device: str) -> None:
    """Raise a verdict.GdnFailure subclass if the target disagrees with the oracle on this case."""
    failure = _differential(target, case, device)
    if failure is not None:
        raise failure


PHASE_SECONDS: Counter = Counter()  # cumulative wall time per phase of check(), read by bench/throughput.py


@contextmanager
def _phase(name: str, device: str):
    start = time.perf_counter()
    try:
        yield
    finally:
        if device == "cuda":
            torch.cuda.synchronize()  # charge asynchronous kernel time to the phase that launched it
        PHASE_SECONDS[name] += time.perf_counter() - start


def _differential(target: Target, case: Case, device: str) -> GdnFailure | None:
    """The check itself. A failure is returned with its traceback cut: Hypothesis keeps failures alive while
    it shrinks, and frames holding a case's tensors (8 GiB pools on GPU) must not stay with them."""
    verdict.COMPARED.clear()
    sem = target.semantics()
    with _phase("tensors", device):
        t = materialize(case, device)
    event(f"contract: {sem.pad.read}/{sem.pad.write}, padded rows {'yes' if any(case.padded) else 'no'}")
    event(f"gate regime: {case.gate}")
    try:
        if not case.valid:
            try:
                with _phase("kernel", device):
                    target.call(case, t)
            except Exception as e:  # noqa: BLE001 - any clean error is a rejection
                event(f"rejected invalid input: {type(e).__name__}")
                return None
            raise AcceptedInvalidInput(f"{case!r}: HV={case.HV} is not a multiple of H={case.H}, yet it ran")
        event(f"bucket: {dispatch_bucket(target, case)}")
        with _phase("oracle", device):
            expected = Expected(exact=oracle(case, t, sem, reference.EXACT),
                                model=oracle(case, t, sem, sem.precision(case)))
        try:
            with _phase("kernel", device):
                _warm_up(target, case, device)
                got = target.call(case, t)
        except Exception as e:  # noqa: BLE001 - the library's own error text is the finding
            raise RejectedValidInput(f"{case!r}: {type(e).__name__}: {e}") from None
        with _phase("verdict", device):
            judge(case, target.path, sem, t.pool, t.inter, t.output, got, expected)
    except GdnFailure as failure:
        failure.__context__ = failure.__cause__ = None  # the library's exception holds frames too
        return failure.with_traceback(None)
    return None


def _warm_up(target: Target, case: Case, device: str) -> None:
    """Case.warm_pool: an unjudged first call on a larger pool (same slots, so every index stays in range)."""
    if case.warm_pool:
        warm = case.replace(pool=case.pool + case.warm_pool, warm_pool=0)
        target.call(warm, materialize(warm, device))
