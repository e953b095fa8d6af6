"""Verdict logic on a hand-built target: the oracle itself (must pass) and single planted faults."""

import pytest
import torch

import reference
from fuzz.generate.materialize import materialize
from fuzz.judge import failures, verdict
from fuzz.judge.tolerance import TOLERANCES, Tol
from fuzz.model.case import Case
from fuzz.model.patterns import has_pattern
from fuzz.model.support import Support
from fuzz.model.tensors import named_slots
from fuzz.run.harness import check_or_raise as check
from fuzz.targets.base import Family, Target
from fuzz.targets.semantics import Semantics

CASE = Case.parse(
    "verify-B2-T3-H1-HV2-K4-V8-pool5-pad1-fp32state-fp32in-i32-vk-decay_mild-seed11-slots[3,-1]-inter3x4+1-rows[2,0]"
)


class OracleTarget(Target):
    """Answers with the float32 oracle under `sem` (default: zero-state padding), reading `reads(t)` (default: the
    case's read slots), then applies `fault` to what it wrote."""

    name, path = "oracle-fp32", "test.oracle"
    family = Family("test", ())
    support = Support(ops=frozenset({"verify"}), intermediate=True, explicit_rows=True)

    def __init__(self, fault=None, sem=None, reads=None):
        self.fault, self.sem, self.reads = fault, sem, reads

    def semantics(self):
        return self.sem or Semantics(pad=reference.PadContract("negative", "zero_state", "skip"))

    def call(self, case, t):
        sem, rows = self.semantics(), t.inter_index
        if t.inter is not None and case.inter_rows < case.B:  # past the scratch: no row (the padded tail)
            rows = torch.tensor([n if n < case.inter_rows else -1 for n in range(case.B)])
        res = reference.verify(
            t.q,
            t.k,
            t.v,
            reference.RawGates(t.A_log, t.a, t.dt_bias, t.b),
            t.pool.view,
            t.read_slots if self.reads is None else self.reads(t),
            pad=sem.pad,
            precision=sem.precision(case),
            intermediate=None if t.inter is None else t.inter.view,
            intermediate_rows=rows,
            token_slots=t.token_slots,
            disable_state_update=not case.update,
        )
        t.pool.view.copy_(res.pool)
        if t.inter is not None:
            t.inter.view.copy_(res.intermediate)
        t.output.view.copy_(res.output)
        if self.fault:
            self.fault(t)
        return t.output.view


def test_oracle_target_passes():
    check(OracleTarget(), CASE, "cpu")


FAULTS = {
    "write before the pool": (lambda t: t.pool.full[1].fill_(0.0), failures.GuardBreach),
    "write after the intermediate buffer": (lambda t: t.inter.full[-1, 0].fill_(1.0), failures.GuardBreach),
    "touch an unwritten slot": (lambda t: t.pool.view[4].add_(1e-3), failures.PoolCorruption),
    "touch an unwritten intermediate row": (lambda t: t.inter.view[1].fill_(0.0), failures.PoolCorruption),
    "skip one output row": (lambda t: t.output.view[0, 1].copy_(t.output.before_view[0, 1]), failures.UnwrittenOutput),
    "NaN in the output": (lambda t: t.output.view[0, 2, 1, 3].fill_(float("nan")), failures.NonFinite),
    "output off by 1e-3": (lambda t: t.output.view[0, 0, 0, 0].add_(1e-3), failures.OutputMismatch),
    "state off by 1e-3": (lambda t: t.pool.view[3, 1, 2, 2].add_(1e-3), failures.StateMismatch),
    "intermediate step off": (lambda t: t.inter.view[2, 1, 0, 0, 0].add_(1e-3), failures.IntermediateMismatch),
}


@pytest.mark.parametrize("fault", FAULTS, ids=lambda s: s.replace(" ", "_"))
def test_planted_fault_is_its_own_failure_kind(fault):
    plant, kind = FAULTS[fault]
    with pytest.raises(kind, match="verify-B2-T3"):
        check(OracleTarget(plant), CASE, "cpu")


def test_error_within_the_floor_passes():
    check(OracleTarget(lambda t: t.output.view[0, 0, 0, 0].add_(1e-7)), CASE, "cpu")


def test_invalid_head_ratio_must_be_rejected():
    check(OracleTarget(), CASE.replace(H=2, HV=3), "cpu")  # the oracle raises ValueError: a clean rejection

    class Unchecked(OracleTarget):
        def call(self, case, t):
            return t.output.view

    with pytest.raises(failures.AcceptedInvalidInput, match="HV=3 is not a multiple of H=2"):
        check(Unchecked(), CASE.replace(H=2, HV=3), "cpu")


def test_tolerance_rule_scales_with_model_error_and_T():
    tol = Tol(c=2, rel=1e-3, abs=0.0, growth=0.5)
    assert tol.bound(model_err=0.0, scale=1.0, T=1) == pytest.approx(1e-3)
    assert tol.bound(model_err=0.01, scale=1.0, T=1) == pytest.approx(0.021)
    assert tol.bound(model_err=0.0, scale=1.0, T=5) == pytest.approx(3e-3)
    assert all(t.c >= 1 for t in TOLERANCES.values())


def test_poison_and_guard_patterns_are_nan_and_distinct():
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        from fuzz.model.patterns import fill_pattern

        g, p = fill_pattern(torch.empty(3, dtype=dtype), "guard"), fill_pattern(torch.empty(3, dtype=dtype), "poison")
        assert g.isnan().all() and p.isnan().all()
        assert has_pattern(g, "guard").all() and not has_pattern(g, "poison").any()


def test_inf_is_judged_only_where_the_oracle_fits_the_stored_dtype():
    """An fp16 output whose true value is past 65504 is inf whatever the kernel does (FlashInfer's fp32 MTP computes in
    bf16 and stores into the caller's fp16 buffer: H200 campaign); inf where the value fits is a NonFinite."""
    exact = torch.tensor([70000.0, 100.0], dtype=torch.float64)
    got = exact.to(torch.float16)  # [inf, 100]
    assert got[0].isinf()
    verdict._compare(CASE, "output", failures.OutputMismatch, "test.oracle", got, exact, exact, "fp16", [])
    got[1] = float("inf")
    with pytest.raises(failures.NonFinite):
        verdict._compare(CASE, "output", failures.OutputMismatch, "test.oracle", got, exact, exact, "fp16", [])


def test_named_slots_come_from_the_seed_whatever_the_pool_size():
    """Only the slots a request names (and slot 0) take the case's generator: their values, which the math depends
    on, do not change with the pool size; every other slot holds finite filler that a wrong-slot read would return."""
    small, large = materialize(CASE.replace(pool=4), "cpu"), materialize(CASE.replace(pool=400), "cpu")
    named = named_slots(CASE)
    assert named == [0, 3]
    assert torch.equal(small.pool.view[named], large.pool.view[named])
    filler = large.pool.view[[s for s in range(400) if s not in named]]
    assert torch.isfinite(filler).all() and filler.std() > 0.1


def test_an_output_the_kernel_rounds_to_bf16_into_an_fp16_buffer_is_judged_at_bf16s_rounding():
    """H200, FlashInfer 0.7.4 pretranspose, fp16 inputs (2026-12-03): the kernel wrote 0.265625 where the model
    rounded to 0.2675781, the adjacent bf16 value (error 0.00195, model error 0.000812, |oracle|max 0.281). The
    fp16 buffer's tolerance called that a mismatch; the output's last rounding is bf16's (Semantics.output)."""
    from fuzz.judge.tolerance import tolerance
    from fuzz.judge.verdict import _rounded

    assert _rounded(torch.float16, torch.bfloat16) == "bf16" and _rounded(torch.float16, torch.float16) == "fp16"
    assert tolerance("output", "fp16").bound(0.000812, 0.281, 1) < 0.00195
    assert tolerance("output", "bf16").bound(0.000812, 0.281, 1) >= 0.00195


# --- the engines' padding contract ("discard"), scratch slots and the edges' cases -----------------------------------
SGLANG = Semantics(pad=reference.PadContract("negative", "discard", "skip"), scratch_slots=(0,))
VLLM = Semantics(pad=reference.PadContract("zero", "discard", "skip"))
# SGLang verify: a scratch of spec_size + 1 = 4 rows by batch row, the tail row padded; slot 5 is the pool's last.
ENGINE_CASE = Case.parse(
    "verify-B3-T2-H1-HV2-K4-V8-pool6-pad1-fp32state-fp32in-i32-vk-decay_mild-seed5-slots[3,5,-1]-inter4x2+0-noupdate"
)
# vLLM: per-token slots, accepted counts select the read slot; the middle row padded (null block, accepted 1).
VLLM_CASE = Case.parse(
    "verify-B3-T3-H1-HV2-K4-V8-pool10-pad1-fp32state-fp32in-i32-vk-decay_mild-seed5-slots[5,0,7]"
    "-tslots[4/5/6,0/0/0,7/8/9]-null0-acc[2,1,1]"
)


UNDEFINED = {  # what a "discard" contract and a scratch slot leave undefined: none of it is judged
    "garbage in the padded row's output": lambda t: t.output.view[2].fill_(3.0),
    "the padded row's output left as poison": lambda t: t.output.view[2].copy_(t.output.before_view[2]),
    "garbage in the padded row's scratch row": lambda t: t.inter.view[2].fill_(3.0),
    "the reserved slot 0 written": lambda t: t.pool.view[0].fill_(3.0),
}
JUDGED = {  # what they still judge
    "a padded row writes the last slot (a -1 wrapped)": (lambda t: t.pool.view[5].add_(1.0), failures.PoolCorruption),
    "a slot no request names changed": (lambda t: t.pool.view[1].add_(1e-3), failures.PoolCorruption),
    "a write past the scratch": (lambda t: t.inter.full[-1, 0].fill_(1.0), failures.GuardBreach),
    "a spare scratch row changed": (lambda t: t.inter.view[3].fill_(0.0), failures.PoolCorruption),
    "a live row's output off": (lambda t: t.output.view[1, 0, 0, 0].add_(1e-3), failures.OutputMismatch),
    "a live row's scratch row off": (lambda t: t.inter.view[0, 1, 0, 0, 0].add_(1e-3), failures.IntermediateMismatch),
}


@pytest.mark.parametrize("fault", UNDEFINED, ids=lambda s: s.replace(" ", "_"))
def test_discarded_rows_and_scratch_slots_are_not_judged(fault):
    check(OracleTarget(sem=SGLANG, fault=UNDEFINED[fault]), ENGINE_CASE, "cpu")


@pytest.mark.parametrize("fault", JUDGED, ids=lambda s: s.replace(" ", "_"))
def test_discard_still_judges_live_slots_live_rows_and_guards(fault):
    plant, kind = JUDGED[fault]
    with pytest.raises(kind, match="verify-B3-T2"):
        check(OracleTarget(sem=SGLANG, fault=plant), ENGINE_CASE, "cpu")


def test_slot_zero_is_judged_where_no_scratch_slot_is_declared():
    with pytest.raises(failures.PoolCorruption, match="pool slot 0 changed"):
        no_scratch = Semantics(pad=SGLANG.pad)
        check(OracleTarget(sem=no_scratch, fault=UNDEFINED["the reserved slot 0 written"]), ENGINE_CASE, "cpu")


def test_a_request_on_a_scratch_slot_is_not_judged():
    """The slot-zero edge under SGLang: a live request named on the reserved slot starts from undefined content."""
    case = ENGINE_CASE.replace(read_slots=(0, 5, -1), update=True, edge="slot-zero")
    garbage = lambda t: (t.output.view[0].fill_(3.0), t.inter.view[0].fill_(3.0))  # the slot-0 request's rows
    check(OracleTarget(sem=SGLANG, fault=garbage), case, "cpu")
    with pytest.raises(failures.OutputMismatch):
        check(OracleTarget(sem=SGLANG, fault=lambda t: t.output.view[1].add_(1.0)), case, "cpu")


def test_a_padded_batch_past_the_scratch_is_judged_inside_it():
    """pad-past-scratch: 5 rows, a scratch of 3 (spec_size 2); the rows past it write nothing outside it, and its last
    row (the discard row the engine puts them on) is undefined."""
    case = ENGINE_CASE.replace(read_slots=(3, 5, -1, -1, -1), inter_rows=3, edge="pad-past-scratch")
    check(OracleTarget(sem=SGLANG, fault=lambda t: t.inter.view[2].fill_(3.0)), case, "cpu")
    with pytest.raises(failures.GuardBreach, match="intermediate written outside"):
        check(OracleTarget(sem=SGLANG, fault=lambda t: t.inter.full[-1, 0].fill_(1.0)), case, "cpu")


def test_the_accepted_count_selects_the_read_slot():
    """vLLM: request 0 accepted 2 tokens, so it starts from its second token's slot (5); a kernel starting from the
    first (4) is found, and the padded row (null block in every column) writes nothing."""
    check(OracleTarget(sem=VLLM), VLLM_CASE, "cpu")
    first_column = lambda t: torch.where(t.read_slots > 0, t.token_slots[:, 0], t.read_slots)
    with pytest.raises((failures.OutputMismatch, failures.StateMismatch)):
        check(OracleTarget(sem=VLLM, reads=first_column), VLLM_CASE, "cpu")
    with pytest.raises(failures.PoolCorruption, match="slot 1 changed"):
        check(OracleTarget(sem=VLLM, fault=lambda t: t.pool.view[1].fill_(3.0)), VLLM_CASE, "cpu")


def test_a_clean_rejection_is_right_on_an_edge_whose_contract_asks_for_one():
    """accepted-zero: the row names no starting state; a clean error (or a skip) is the right answer. A rejection of a
    plain case, or of an edge whose contract says skip, is still RejectedValidInput."""

    def refuse(t):
        raise ValueError("num_accepted_tokens must be in 1..T")

    skipped = VLLM_CASE.replace(read_slots=(0, 0, 7), accepted=(0, 1, 1), edge="accepted-zero")
    check(OracleTarget(sem=VLLM, fault=refuse), skipped, "cpu")
    check(OracleTarget(sem=VLLM), skipped, "cpu")  # the row skipped: no state I/O on its live slots 4, 5, 6
    with pytest.raises(failures.PoolCorruption, match="slot 4 changed"):
        check(OracleTarget(sem=VLLM, fault=lambda t: t.pool.view[4].fill_(3.0)), skipped, "cpu")
    for case in (VLLM_CASE, VLLM_CASE.replace(edge="slot-zero")):
        with pytest.raises(failures.RejectedValidInput, match="num_accepted_tokens"):
            check(OracleTarget(sem=VLLM, fault=refuse), case, "cpu")
