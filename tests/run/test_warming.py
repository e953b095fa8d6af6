"""A warm-up beside the runs (fuzz.run.warming), with a fake kernel cache: it compiles the threshold plans first, then
a bucket of every target and operation in turn; it says what it compiled; a round draws its planned buckets among
those while it runs, and the whole plan once it is over or gone."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest
from hypothesis import given

from fuzz.generate.strategies import bucket_plan, cases, compiled_first
from fuzz.run import kernel_cache, warm, warming
from fuzz.suite.options import Options
from fuzz.suite.rounds import TestRun
from fuzz.suite.session import FuzzSession
from fuzz.targets.registry import TARGETS, overridden
from tests.draws import first_draws
from tests.run.test_warm import PLANNED, compile_fields

BY_NAME = {t.name: t for t in TARGETS}
NAMES = ("flashinfer-bf16", "flashinfer-mtp-fp32", "flashinfer-pretranspose-fp32")


@pytest.fixture(autouse=True, scope="module")
def cpu_flashinfer():
    with overridden({"flashinfer": "fuzz.standins.flashinfer_cpu"}):
        yield


def test_cold_order_compiles_every_threshold_plan_then_a_bucket_of_each_test_in_turn():
    units, _ = warm.units_for([BY_NAME[n] for n in NAMES], PLANNED, "release")
    order = warming.cold_order(units)
    assert sorted(map(id, order)) == sorted(map(id, units))  # every unit, once
    thresholds = [u for u in order if u.bucket is None]
    assert thresholds and order[: len(thresholds)] == thresholds
    pairs = {(u.target, u.op) for u in units}
    first_round = order[len(thresholds) : len(thresholds) + len(pairs)]
    assert {(u.target, u.op) for u in first_round} == pairs  # one bucket of every test before a second of any
    for target, op in pairs:  # each test's buckets in plan order, simplest first
        mine = [u.bucket for u in order if (u.target, u.op) == (target, op) and u.bucket is not None]
        assert mine == sorted(mine)


def test_a_round_draws_among_the_compiled_buckets_while_the_warm_up_runs(tmp_path):
    target = BY_NAME["flashinfer-bf16"]
    sup = target.declared(target.known_bugs())
    plan = bucket_plan(target.name, "verify", sup, PLANNED)
    cache = kernel_cache.KernelCache(tmp_path, {"FLASHINFER_WORKSPACE_BASE": str(tmp_path)})
    session = FuzzSession("h200", PLANNED, Options(kernel_cache=cache))
    assert warming.compiled([tmp_path], "h200", "release", target.name, "verify") is None  # no warm-up: whole plan
    tracker = warming.Tracker([tmp_path], "h200", "release")
    tracker.done(warm.Unit(target.name, "verify", plan[1], ()))
    ready = warming.compiled([tmp_path], "h200", "release", target.name, "verify")
    assert ready == {repr(plan[1])} and warming.compiled([tmp_path], "h200", "none", target.name, "verify") is None
    session._test = TestRun.start("t", target, "verify")
    assert session.draw_budget(target, "verify").compiled == ready
    tracker.done(warm.Unit(target.name, "verify", plan[2], ()))
    assert session.draw_budget(target, "verify").compiled == ready  # the round that began keeps its plan
    session._test.new_round()
    assert session.draw_budget(target, "verify").compiled == {repr(plan[1]), repr(plan[2])}  # the next one reads anew

    narrowed = dataclasses.replace(PLANNED, compiled=frozenset({repr(plan[1])}))
    assert compiled_first(plan, narrowed) == (plan[1],) and compiled_first(plan, PLANNED) == plan
    assert compiled_first(plan, dataclasses.replace(PLANNED, compiled=frozenset())) == plan  # nothing yet: all
    seen = []

    @first_draws(60)
    @given(case=cases(target, "verify", narrowed, target.known_bugs()))
    def drawn(case):
        seen.append(compile_fields(case)[:4])

    drawn()
    ours = ("verify", plan[1].T, plan[1].H, plan[1].HV)
    assert seen.count(ours) >= 0.8 * len(seen)  # all but an illegal head ratio now and then
    tracker.close()
    assert warming.compiled([tmp_path], "h200", "release", target.name, "verify") is None  # over: the whole plan


def test_a_warm_up_whose_process_is_gone_is_not_waited_for(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    tracker = warming.Tracker([tmp_path], "h200", "release")
    tracker.state["pid"] = int(dead.stdout)
    tracker.done(warm.Unit("flashinfer-bf16", "verify", None, ()))
    assert warming.compiled([tmp_path], "h200", "release", "flashinfer-bf16", "verify") is None
