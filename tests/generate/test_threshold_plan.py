"""The threshold plan (fuzz.generate.threshold_plan): cases on both sides of every dispatch threshold of a release, for
every setting of the flags that pick a kernel, inside what the target declares, bounded, the same in every process;
none for a target whose path has no thresholds."""

from __future__ import annotations

import dataclasses

import pytest

from fuzz.generate.profiles import BUDGETS
from fuzz.generate.strategies import bucket_plan
from fuzz.generate.threshold_plan import threshold_cases, widest_heads
from fuzz.model import dispatch
from fuzz.targets.registry import TARGETS, overridden
from tests.run.test_warm import PLANNED

CI = BUDGETS["ci"]
BY_NAME = {t.name: t for t in TARGETS}


@pytest.fixture(autouse=True, scope="module")
def cpu_flashinfer():
    with overridden({"flashinfer": "fuzz.standins.flashinfer_cpu"}):
        yield


def test_each_kernel_threshold_is_crossed_for_every_flag_setting_within_the_bound():
    target = BY_NAME["flashinfer-bf16"]
    sup = target.declared(target.known_bugs("none"))
    plan = threshold_cases(target, "verify", CI, target.known_bugs("none"))
    assert 0 < len(plan) <= CI.threshold_cases and len({repr(c) for c in plan}) == len(plan)
    assert all(sup.admits(c) and c.valid for c in plan)
    [kernel] = [t for t in dispatch.thresholds(target.path, target.release()) if t.kernel and t.applies(2, True, True)]
    sms = dispatch.num_sms()
    for buffer in (False, True):
        for update in (True, False):
            sides = {
                kernel.side(c.B, c.H, c.HV, sms)
                for c in plan
                if (bool(c.inter_rows), c.update, c.T) == (buffer, update, 2)
            }
            assert sides == {kernel.below, kernel.above}, (buffer, update)
    # the case a bf16 write-back that stops at B*HV >= 128 needs: a buffer, updates on, exactly at the threshold
    assert any(c.B * c.HV == 128 and c.inter_rows and c.update for c in plan)
    assert plan == threshold_cases(target, "verify", CI, target.known_bugs("none"))  # one list, every time


def test_masks_narrow_the_plan_as_they_narrow_the_draws():
    target = BY_NAME["flashinfer-bf16"]
    masked = threshold_cases(target, "verify", CI, target.known_bugs("all"))
    assert not any(c.inter_rows and c.update for c in masked)  # wide-vec-no-writeback's mask: no buffer with updates


def test_targets_without_thresholds_have_an_empty_plan():
    for name in ("flashinfer-pretranspose-fp32", "fla-recurrent", "sglang-sigmoid", "sglang-recurrent"):
        target = BY_NAME[name]
        for op in target.support.ops:
            assert threshold_cases(target, op, CI, target.known_bugs()) == (), (name, op)


def test_on_a_planned_budget_a_case_lies_in_the_planned_bucket_of_its_flags():
    target = BY_NAME["flashinfer-mtp-fp32"]
    budget = dataclasses.replace(PLANNED, threshold_cases=64)
    sup = target.declared(target.known_bugs())
    planned = bucket_plan(target.name, "verify", sup, budget)
    plan = threshold_cases(target, "verify", budget, target.known_bugs())
    assert len(plan) <= 64
    heads = {(b.H, b.HV) for b in planned} | {widest_heads(sup)}
    for case in plan:
        same = [
            b
            for b in planned
            if (b.T, b.buffer, b.update, b.state_dtype)
            == (case.T, bool(case.inter_rows), case.update, case.state_dtype)
        ]
        if same:  # the first planned bucket with its flags: compiled by gdn-fuzz warm
            assert (case.H, case.HV, case.input_dtype) == (same[0].H, same[0].HV, same[0].input_dtype), repr(case)
        assert (case.H, case.HV) in heads
