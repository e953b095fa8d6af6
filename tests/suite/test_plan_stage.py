"""The plan stage: a fuzz test first settles its threshold plan (fuzz.generate.threshold_plan) before its first round,
so a behaviour that switches at a dispatch threshold is found in the test's first examples, shrunk and reported like
any failure; the planned phase draws nothing, so the rounds after it draw what they drew without it."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from fuzz.generate.profiles import BUDGETS
from fuzz.generate.threshold_plan import threshold_cases
from fuzz.judge.failures import StateMismatch
from fuzz.model.case import Case
from fuzz.run.result import Failure
from fuzz.suite.rounds import Plan, TestRun, run_rounds
from fuzz.suite.session import FuzzSession, Options, fuzz_test, shard_share
from fuzz.targets.registry import TARGETS
from tests.mutants import MUTANTS

BF16 = "flashinfer-bf16"


def test_a_variant_that_switches_at_a_threshold_is_found_by_the_plan_in_the_first_examples(override):
    """The bf16 write-back that stops at B*HV >= 128 (a buffer, updates on, T >= 2): the ci profile's random draws
    reach it by luck (tests/suite/test_mutants.py gives them 300 examples); the plan checks that very case among its
    first, and it is shrunk (fuzz.run.reduce) to the threshold and reported, before the first round."""
    MUTANTS["wide_vec_skips_write_back"].kernels.clear()
    override("tests.mutants:wide_vec_skips_write_back")
    target = next(t for t in TARGETS if t.name == BF16)
    session = FuzzSession("ci", BUDGETS["ci"], Options(examples=10, masks="none"))
    plan = threshold_cases(target, "verify", session.budget, session.bugs(target))
    found = session.run_test(f"test_plan_stage::{BF16}:verify", target, "verify", fuzz_test("verify"))
    [record] = [r for r in found if r.failure.kind == StateMismatch.__name__]
    assert record.examples_before <= len(plan) <= BUDGETS["ci"].threshold_cases
    first = next(r for r in session.report.records if r.outcome == StateMismatch.__name__)
    assert first.stage == "plan", first
    stages = [r.stage for r in session.report.records]
    assert stages.count("plan") == len(plan) and "plan" not in stages[stages.index("generate") :]  # all of it, first
    shrunk = record.failure.case
    assert record.minimal and shrunk.B * shrunk.HV == 128 and shrunk.T == 2 and shrunk.inter_rows and shrunk.update
    assert "a case of the threshold plan" in record.failure.notes[-1]


def test_the_planned_phase_comes_first_and_draws_nothing():
    """fuzz.suite.rounds settles every planned case before the first round, as stage "plan" (TestRun.planning),
    reports what settling found, and the rounds then draw the very examples they draw without a plan."""
    case = Case.parse("decode-B1-T1-H1-HV1-K8-V16-pool1-pad0-fp32state-bf16in-i32-vk-decay_mild-seed0-slots[0]")
    base = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))

    def rounds(planned: tuple) -> tuple[list, list]:
        test, events = TestRun.start("test_plan[t]", SimpleNamespace(name="t"), "decode"), []

        def body(data) -> None:
            events.append(("draw", data.draw(st.integers(0, 1000)), test.planning))
            test.drawn += 1

        def settle(c) -> list:
            events.append(("plan", repr(c), test.planning))
            failure = Failure("StateMismatch", c, "detail", "planned", "t:decode")
            test.reported[failure.key] = failure
            return [failure.cause]

        plan = Plan(20, 5, lambda failures, ran: [], body=body, seed=7, base=base, planned=planned, settle=settle)
        return run_rounds(test, plan), events

    found, events = rounds((case, case.replace(seed=1)))
    assert found == ["planned", "planned"]
    assert [e[0] for e in events[:2]] == ["plan", "plan"] and all(e[2] for e in events[:2])
    assert not any(e[2] for e in events[2:])  # planning is over when the rounds draw
    assert [e for e in events if e[0] == "draw"] == rounds(())[1]  # the same draws as without a plan


def test_the_shards_of_a_test_split_its_plan():
    plan = tuple(range(7))
    node = "fuzz/test_verify.py::test_verify[flashinfer-bf16-shard{}]"
    parts = [shard_share(plan, node.format(k), 2) for k in (0, 1)]
    assert parts == [(0, 2, 4, 6), (1, 3, 5)]
    assert shard_share(plan, "fuzz/test_verify.py::test_verify[flashinfer-bf16]", 1) == plan
