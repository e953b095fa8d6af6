"""Verify, then commit: a chain of calls on one pool, as a serving engine makes them for speculative decoding.

A `Chain` is rounds of (a verify Case, the accepted count of each live request), then a decode Case on the same
slots. Its repr is its coordinate (`Chain.parse` gives it back): the calls' coordinates and each round's accepted
counts, joined by ' | ', e.g. 'verify-B2-T3-... | acc[2,3] | verify-B2-T3-... | acc[1,1] | decode-B2-T1-...'.

`ChainRun` runs a chain on one pool carried between its calls, composing the harness's check stages
(fuzz.run.harness.Check: tensors from the carried pool, expected, call, verdict, result: one CheckResult per call)
and, after each verify's verdict, the engine's commit (Engine, fuzz.model.engines):
  SGLang (scratch_rows): the verify ran through the glue with disable_state_update into the pool-scoped scratch of
         spec_size + 1 rows by batch row; the commit is the engine's own kernel, fused_mamba_state_scatter_with_mask
         (sglang kernels/ops/mamba/mamba_state_scatter_triton.py:312; on the CPU the loader's launch of its raw Triton
         kernel), called as update_mamba_state_after_mtp_verify calls it (hybrid_linear_attn_backend.py:1514-1560):
         the live requests' slots (mamba_cache_indices[:requests]) <- scratch[batch row, accepted - 1].
  vLLM (accepted): the verify wrote each token's state to its own slot (inplace_final_state); the commit is the next
         call's num_accepted_tokens, which selects the slot it reads (Case.accepted).
Invariant after each commit: every live request's slot equals the oracle's sequential decode of its accepted prefix
(the verify's expected intermediate state at step accepted - 1, judged by the verdict's one tolerance rule,
fuzz.judge.verdict.compare), and every other slot is bitwise unchanged (the reserved slot only where
Engine.reserved_writable lets a call write it). A broken invariant is the existing failure kind (StateMismatch,
PoolCorruption, GuardBreach) with 'after the commit' in its cause; every failure of a chain names the chain's
coordinate in its detail. The decode then reads the committed slots and is judged as any call.

The commit an override supplies (`--gdn-target sglang-glue=module:attr` exposing COMMIT, the glue-level commit
mutants of tests/mutants.py) replaces the installed one; the glue classes come from the same override.
"""

from __future__ import annotations

import dataclasses
import time

import torch

from fuzz.generate.chain import Chain, committed_slot, live_rows
from fuzz.generate.materialize import materialize
from fuzz.judge.failures import GdnFailure, GuardBreach, PoolCorruption, RejectedValidInput, StateMismatch
from fuzz.judge.oracle import Expected
from fuzz.judge.verdict import compare
from fuzz.model.case import Case
from fuzz.model.engines import ENGINES, Engine
from fuzz.model.guarded import Guarded
from fuzz.model.tensors import Tensors
from fuzz.run.harness import Check
from fuzz.run.result import CheckResult, Failure
from fuzz.run.serving import Accounts, fresh_library
from fuzz.targets.base import Target

COMMIT = "fused_mamba_state_scatter_with_mask"  # SGLang's commit after verify; an override may supply its own


class ChainRun:
    """One chain on one pool: `run(chain)` -> the first Failure (None: the chain held), every call's CheckResult in
    `results`. `test`: the accounts of a test it runs in (fuzz.run.serving.Accounts). The library is reset
    (fuzz.run.serving.fresh_library) before the chain."""

    def __init__(self, target: Target, device: str, test: Accounts | None = None):
        self.target, self.device, self.test = target, device, test
        self.engine: Engine = ENGINES[target.support.engine]
        self.pool: Guarded | None = None
        self.results: list[CheckResult] = []
        self.ended = False  # a call rejected its edge case cleanly, as the edge's contract asks: nothing to commit

    def run(self, chain: Chain) -> Failure | None:
        if self.test is not None:
            self.test.example()
        fresh_library(self.target)
        steps = [*chain.rounds, (chain.decode, None)]
        for i, (case, accepted) in enumerate(steps, 1):
            if self.ended or self.test is not None and not self.test.may_check_now():
                return None
            began = time.monotonic()
            result = self._call(case, accepted)
            if result.failure is not None:
                where = f"call {i} of {len(steps)} ({case.op})"
                failure = result.failure
                failure = dataclasses.replace(
                    failure,
                    detail=f"{failure.detail}; {where} of the chain {chain!r}",
                    before=tuple(earlier for earlier, _ in steps[: i - 1]),  # the calls triage may find masked
                )
                result = dataclasses.replace(result, failure=failure)
            self.results.append(result)
            if self.test is not None:
                self.test.recorded(result, time.monotonic() - began, first=i == 1)
            if result.failure is not None:
                return result.failure.with_notes(f"the chain (fuzz.run.chain.Chain.parse):\n  {chain!r}")
        return None

    def _call(self, case: Case, accepted: tuple[int, ...] | None) -> CheckResult:
        """One call's check on the carried pool, with the commit after a verify's verdict."""
        check = Check(self.target, case, self.device)
        with check.judging():
            t = check.tensors(lambda: self._tensors(case))
            want = check.expected(t)
            try:
                got = check.call(t)
            except RejectedValidInput:
                if not check.rejected_as_asked():
                    raise
                self.ended = True  # the chain ends: nothing to commit
                return check.result()
            check.verdict(t, got, want)
            if accepted is not None:
                with check.phase("verdict"):
                    self._commit(case, t, want, accepted, check.compared)
        return check.result()

    def _tensors(self, case: Case) -> Tensors:
        if self.pool is None:  # the first call: its pool exactly as the case alone builds it
            t = materialize(case, self.device, offset_bits=self.target.offset_bits())
            self.pool = t.pool
            return t
        _remember(self.pool)
        return materialize(case, self.device, pool=self.pool, offset_bits=self.target.offset_bits())

    # ---- the commit and its invariant ----------------------------------------------------------------------------
    def _commit(self, case: Case, t: Tensors, want: Expected, accepted: tuple[int, ...], compared: list) -> None:
        rows = live_rows(case)
        if len(accepted) != len(rows):
            raise ValueError(f"{case!r}: {len(accepted)} accepted counts for {len(rows)} live requests")
        _remember(self.pool)
        if self.engine.scratch_rows:  # SGLang: the commit kernel; vLLM's commit is the next call's accepted counts
            steps = torch.tensor([a - 1 for a in accepted], dtype=torch.int32, device=t.q.device)
            dst = t.read_slots[: len(rows)].to(torch.int32)
            self.commit()(self.pool.view[None], t.inter.view[None], dst, steps)
        try:
            self._check_committed(case, want, rows, accepted, compared)
        except GdnFailure as e:
            raise type(e)(e.case, f"after the commit: {e.detail}", f"after the commit: {e.cause}") from e

    def commit(self):
        """SGLang's commit kernel: the override's COMMIT where it gives one, else the installed wrapper on a GPU and
        the loader's launch of its raw kernel elsewhere (the wrapper refuses CPU tensors)."""
        if (own := getattr(self.target.api(), COMMIT, None)) is not None:
            return own
        from fuzz.targets.sglang_glue_loader import load_sglang_glue  # imports triton

        glue = load_sglang_glue()
        return glue.scatter if str(self.device).startswith("cuda") else glue.launch_scatter

    def _check_committed(self, case: Case, want: Expected, rows, accepted, compared: list) -> None:
        """Each live request's committed slot holds its accepted prefix's state; no other slot changed. A request
        the verify skipped (an edge: the oracle wrote no scratch row or slot for it) or committed to the reserved
        slot (slot-zero) has no defined state."""
        pool, engine = self.pool, self.engine
        if (where := pool.outside_changed()) is not None:
            raise GuardBreach(case, f"pool written outside its allocation at index {where}", "pool written outside")
        committed = [(n, a, committed_slot(case, n, a)) for n, a in zip(rows, accepted)]
        written = want.exact.written_rows if engine.scratch_rows else want.exact.written_slots
        judged = [(n, a, s) for n, a, s in committed if s != engine.reserved and (n, s)[engine.accepted] in written]
        slots = [s for _, _, s in judged]
        free = {engine.reserved} if engine.reserved_writable else set()
        if changed := pool.changed_rows(sorted(set(range(case.pool)) - set(slots) - free)):
            raise PoolCorruption(
                case,
                f"pool slot {changed[0]} changed; the commit writes only the live requests' slots {sorted(slots)}",
                cause="pool slot outside the committed requests changed",
            )
        if not judged:
            return
        exact, model = (self._accepted_states(r, judged) for r in (want.exact, want.model))
        got, path = pool.view[slots], self.target.path
        compare(case, "state", StateMismatch, path, got, exact, model, case.state_dtype, compared)

    def _accepted_states(self, result, judged) -> torch.Tensor:
        """The verify's expected state of each (batch row n, accepted a, slot): SGLang: its scratch row at step
        a - 1; vLLM: what its a-th token stored into its own slot."""
        if self.engine.scratch_rows:
            where = {int(r): i for i, r in enumerate(result.rows.tolist())}
            return torch.stack([result.row_states[where[n], a - 1] for n, a, _ in judged])
        where = {int(s): i for i, s in enumerate(result.slots.tolist())}
        return torch.stack([result.states[where[s]] for _, _, s in judged])


def _remember(pool: Guarded) -> None:
    """Make the pool's record (every slot) what it holds now: the next check compares against it bit for bit."""
    pool.keep(list(range(pool.view.shape[0])), pool.view.clone())


__all__ = ["COMMIT", "Chain", "ChainRun"]
