"""Serving sequences (fuzz.generate.serving, fuzz.run.serving): the state machine, run through the `flashinfer` override
as a user would, finds each planted cross-call bug of tests/mutants.py, types it, and shrinks it to the two calls it
needs; it finds nothing in the correct stand-in; and its findings land in the run report of a pytest run."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import strategies as st

from fuzz.generate.materialize import materialize
from fuzz.generate.profiles import BUDGETS
from fuzz.generate.serving import COMPILE_ARGS, STEPS, Step, alternatives, variations
from fuzz.judge.failures import OutputAliased, StaleCompile, StateLeak
from fuzz.model.case import Case
from fuzz.run import serving
from fuzz.run.serving import Alone, ServingRun
from fuzz.suite.serving import ServingTest, run_serving
from fuzz.targets.registry import TARGETS

REPO = Path(__file__).resolve().parents[2]
BY_NAME = {t.name: t for t in TARGETS}
# Small draws shrink fast: two requests, a handful of slots, one head size.
BUDGET = dataclasses.replace(
    BUDGETS["ci"], max_B=2, max_pool=4, t_choices=(1, 2), head_dims=((4, 8),), scales=(None,), gaps=(0, 1)
)
# Generation stops at the first failure without a shrink phase; the calls it does not need are deleted after it
# (fuzz.run.serving.shortest). Hypothesis' own shrinking of the calls' contents is slow on a CPU (each attempt replays
# a sequence), so only test_shrinking_inside_the_time_box runs it.
QUIET = settings(
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
    verbosity=Verbosity.quiet,
    phases=[Phase.generate],
)
DECODE = "flashinfer-pretranspose-fp32"  # decode only: one failure bucket per bug
BF16, MTP = "flashinfer-bf16", "flashinfer-mtp-fp32"
# The ci profile's own budget (B up to 4, T up to 8, five head sizes) and sequences of STEPS calls, as
# fuzz/test_serving.py runs: two calls of one shape are rare among fresh draws, so the variations of a call
# (fuzz.generate.serving) bring them. A bug any two calls of one shape show is found within FEW sequences; one that
# needs a verify with an intermediate buffer (a quarter of the calls), or a variation that changes one argument alone,
# within MANY, which is what the correct stand-in gets too.
CI, FEW, MANY = BUDGETS["ci"], 12, 100
CACHE_KEYED = COMPILE_ARGS  # what a kernel's compile cache could key on, beside the shapes


def serve(target_name: str, examples: int, steps: int = 5, base=QUIET, budget=BUDGET, **box):
    """Seeded rounds (each a new seed, as in the ci profile): a round ends at its first new failure, the next one
    goes on drawing, so a bug with several symptoms shows each."""
    target = BY_NAME[target_name]
    test = ServingTest.start(f"test_serving[{target_name}]", target, **box)
    return run_serving(target, budget, (), "cpu", test, examples, steps=steps, base=base, seed_=0), test


def only(found, kind):
    [failure] = [f for f in found if f.record.failure.kind == kind.__name__]
    return failure


def test_cached_output_buffer_is_output_aliased(override):
    override("tests.mutants:cached_default_output")
    found, _ = serve(DECODE, 40)
    f = only(found, OutputAliased)
    assert [s.case.output_given for s in f.steps] == [False, False], f.steps  # two calls, both output=None
    assert f.record.failure.cause == "returned output shares memory with the output of call N"
    assert "the calls, one coordinate each" in f.record.failure.notes[-1]
    assert [Step.parse(repr(s)) for s in f.steps] == list(f.steps)  # the printed sequence is a reproduction


def test_compile_key_without_input_dtype_is_stale_compile(override):
    override("tests.mutants:input_dtype_left_out_of_key")
    found, _ = serve(DECODE, 40)
    assert found and {f.record.failure.kind for f in found} == {"StaleCompile"}, [f.record.failure for f in found]
    for f in found:
        assert len(f.steps) == 2 and {s.case.input_dtype for s in f.steps} == {"bf16", "fp16"}, f.steps
        assert "Mismatched Tensor" in f.record.failure.detail and f.record.reproduced_on_rerun is False


def test_pool_capacity_left_out_of_key_is_the_warm_case(override):
    override("tests.mutants:strided_pool_capacity_baked_in")
    found, _ = serve(DECODE, 150)
    stale = [f for f in found if f.record.failure.kind == StaleCompile.__name__]
    assert any(re.search(r"differed only in pool \d+ -> \d+", f.record.failure.detail) for f in stale), stale
    for f in stale:  # the capacity changed alone (a variation), or with other arguments (a fresh call)
        first, second = (s.case for s in f.steps)
        # two strided pools of one stride and two capacities (a view of fewer slots after a call on more:
        # Case.warm_pool as two calls; or a reallocation to more slots)
        assert first.pool != second.pool and min(first.pool, second.pool) >= 2, f.steps
        assert first.pool_gap == second.pool_gap > 0, f.steps
        assert "Mismatched h0_source.shape[0]" in f.record.failure.detail


def test_stale_rows_past_the_batch_are_a_state_leak(override):
    override("tests.mutants:stale_rows_past_the_batch")
    found, _ = serve(DECODE, 80)  # a batch that shrinks: a fresh call or a variation with fewer requests
    f = only(found, StateLeak)
    first, second = (s.case for s in f.steps)
    assert first.B > second.B, f.steps  # a larger batch, then a smaller one whose padding rows keep its slots
    assert "which no request of it reads or writes" in f.record.failure.detail
    assert f.record.reproduced_on_rerun is False


def calls_named(detail: str) -> set[int]:
    return {int(n) for n in re.findall(r"call (\d+)", detail)}


def test_ci_budget_finds_the_output_cached_per_shape(override):
    """The bf16-state path's default output cached per shape (FlashInfer 0.6.11 .. 0.6.17) at the ci budget: sequences
    of output=None calls only, and calls that keep the previous call's shapes, make two None calls of one shape."""
    override("tests.mutants:cached_default_output")
    found, _ = serve(BF16, FEW, STEPS, budget=CI)
    assert found and {f.record.failure.kind for f in found} == {"OutputAliased"}, [f.record.failure for f in found]
    for f in found:  # one per kernel bucket (decode, verify)
        assert len(f.steps) == 2 and not any(s.case.output_given for s in f.steps), f.steps
        assert calls_named(f.record.failure.detail) == {1, 2}, f.record.failure.detail  # the earlier and the later


def test_ci_budget_finds_the_buffer_shape_left_out_of_key(override):
    """A stale kernel with the old intermediate buffer layout: found as a StaleCompile whose detail names the buffer
    argument that changed since the first call of the same shapes (and its cause too, where it alone changed)."""
    override("tests.mutants:inter_shape_left_out_of_key")
    found, _ = serve(MTP, MANY, STEPS, budget=CI)
    failures = [f.record.failure for f in found]
    assert found and {f.kind for f in failures} == {"StaleCompile"}, failures
    assert all(
        re.search(r"after a call that differed in (inter_\w+|several compile arguments),", f.cause) for f in failures
    ), failures
    assert all(re.search(r"differed (only )?in [^;]*inter_(spare_)?steps \d+ -> \d+", f.detail) for f in failures), (
        failures
    )
    assert all(f.record.reproduced_on_rerun is False for f in found)


def test_ci_budget_names_the_input_dtype_left_out_of_key(override):
    override("tests.mutants:input_dtype_left_out_of_key")
    found, _ = serve(DECODE, MANY, STEPS, budget=CI)
    failures = [f.record.failure for f in found]
    assert found and {f.kind for f in failures} == {"StaleCompile"}, failures
    for f in found:
        first, second = (s.case for s in f.steps)
        assert {first.input_dtype, second.input_dtype} == {"bf16", "fp16"}, f.steps
        assert re.search(
            r"after a call that differed in (input_dtype|several compile arguments),", f.record.failure.cause
        ), failures
    assert any(re.search(r"differed only in input_dtype (bf16 -> fp16|fp16 -> bf16)", f.detail) for f in failures)


def varied(name: str) -> set[str]:
    """The arguments of CACHE_KEYED that a call of `name` may change from one call to the next (a verify with an
    intermediate buffer, where the target has one), as its declared support allows."""
    sup = BY_NAME[name].declared()
    buffer = {"inter_steps", "inter_spare_steps", "update"} | (set() if sup.exact_rows else {"inter_rows"})
    return {"input_dtype", "index_dtype", "pool", "pool_gap", "output_given"} | (buffer if sup.intermediate else set())


@pytest.mark.parametrize("name", [DECODE, BF16, MTP])
def test_ci_budget_correct_standin_has_no_finding(override, monkeypatch, name):
    """The correct stand-in in the same budget: no finding, although about half the calls repeat the call before them
    with at most one argument a compile cache could key on changed, and only arguments the target supports."""
    override("fuzz.standins.flashinfer_cpu")
    pairs, alike = [], []  # consecutive calls checked; the arguments changed where the op, T and B stayed
    execute = ServingRun.execute

    def spy(run, step):
        if run.test is not None and run.steps[:-1]:
            before, after = run.steps[-2].case, step.case
            pairs.append((before, after))
            if (before.op, before.T, before.B) == (after.op, after.T, after.B):
                alike.append({a for a in CACHE_KEYED if getattr(before, a) != getattr(after, a)})
        return execute(run, step)

    monkeypatch.setattr(ServingRun, "execute", spy)
    found, _ = serve(name, MANY, STEPS, budget=CI)
    assert not found, [f.record.failure.message for f in found]
    assert sum(len(changed) <= 1 for changed in alike) >= len(pairs) / 3, (len(pairs), alike)
    assert set().union(*(changed for changed in alike if len(changed) == 1)) <= varied(name), alike


# One call per target to vary: a verify with an intermediate buffer where the target has one.
VARIED = {
    DECODE: "decode-B2-T1-H1-HV2-K4-V8-pool4-pad1-fp32state-bf16in-i32-vk-decay_mild-seed3-slots[3,-1]-gap1",
    BF16: "verify-B2-T3-H1-HV2-K4-V8-pool4-pad0-bf16state-fp16in-i64-vk-decay_mild-seed3-slots[2,1]-inter2x4+1",
    MTP: "verify-B2-T3-H1-HV2-K4-V8-pool6-pad0-fp32state-bf16in-i32-vk-decay_mild-seed3-slots[2,1]-wslots[5,3]-"
    "inter3x3+0-noupdate-noout",
}


@pytest.mark.parametrize("name", sorted(VARIED))
def test_every_variation_of_a_call_passes_on_the_correct_standin(override, name):
    """Each variation a call may get (fuzz.generate.serving.alternatives: every argument the target supports, every
    value), run after the call it varies, passes on the correct stand-in: a variation is a valid call."""
    override("fuzz.standins.flashinfer_cpu")
    target, case = BY_NAME[name], Case.parse(VARIED[name])
    others = alternatives(target.declared(), case, CI)
    assert set(others) == varied(name), others
    for arg, values in others.items():
        for value in values:
            run = ServingRun(target, "cpu")
            for step in (Step(case), Step(case.replace(**{arg: value}))):
                run.step(step)
            assert run.failed is None, run.failed[0].message


KMAJOR = "flashinfer-decode-kmajor"  # no slot map (Support.pool False): request i reads and writes state row i


@settings(QUIET, max_examples=60)
@given(data=st.data())
def test_a_target_without_a_slot_map_keeps_the_identity_map(data):
    """Every variation of a call on a target without a slot map (fewer requests, another order, a compile argument)
    keeps the pool at exactly B rows and request i on row i, which is all such a target can be given: a permuted map
    there would judge the kernel against a contract it never had."""
    target = BY_NAME[KMAJOR]
    sup = target.declared()
    assert not sup.pool
    case = Case.parse("decode-B3-T1-H1-HV2-K4-V8-pool3-pad0-fp32state-bf16in-i32-kv-decay_mild-seed3-slots[0,1,2]")
    varied = data.draw(variations(sup, case, CI))
    assert varied.pool == varied.B and varied.read_slots == tuple(range(varied.B)), repr(varied)


GLUE = "sglang-glue-triton-packed"  # an engine target (Support.engine): CUDA graphs pad at the tail


@settings(QUIET, max_examples=60)
@given(data=st.data())
def test_an_engine_target_keeps_its_padding_at_the_tail(data):
    """Every variation of a call on an engine target keeps its padded rows after every live one (fewer requests,
    another order): the engine pads only at the tail, and its glue refuses padding before a live row."""
    sup = BY_NAME[GLUE].declared()
    assert sup.engine
    case = Case.parse(
        "decode-B5-T1-H1-HV1-K128-V128-pool5-pad2-fp32state-bf16in-i32-vk-decay_mild-seed3-slots[1,4,2,-1,-1]"
    )
    varied = data.draw(variations(sup, case, CI))
    assert not any(p and not later for p, later in zip(varied.padded, varied.padded[1:])), repr(varied)


def test_shrinking_inside_the_time_box(override, monkeypatch):
    """With Hypothesis shrinking on, the box ends the test: no call is checked after it but to shrink a failure found
    in it, for shrink_seconds, and to replay the shrunk failures; the calls they do not need are deleted after that."""
    override("tests.mutants:input_dtype_left_out_of_key")
    checked = []  # (when, final replay) of every call the machine checked
    execute = ServingRun.execute

    def spy(run, step):
        if run.test is not None:
            checked.append((time.monotonic(), serving.final_replay()))
        return execute(run, step)

    monkeypatch.setattr(ServingRun, "execute", spy)
    began = time.monotonic()
    found, test = serve(
        DECODE, 10_000, base=settings(QUIET, phases=[Phase.generate, Phase.shrink]), box=4.0, shrink_seconds=2.0
    )
    assert found and test.boxed and test.drawn < 10_000
    assert all(len(f.steps) == 2 and f.record.failure.kind == "StaleCompile" for f in found), found
    assert all(final for when, final in checked if when >= test.deadline + test.shrink_seconds)
    assert time.monotonic() - began < 60  # past the window Hypothesis' last shrink attempts only draw


@pytest.mark.parametrize("name", ["flashinfer-bf16", "flashinfer-mtp-fp32", "flashinfer-prefill-chunk", KMAJOR])
def test_correct_standin_passes_the_machine(override, name):
    override("fuzz.standins.flashinfer_cpu")
    found, test = serve(name, 25, steps=6)
    assert not found, [f.record.failure.message for f in found]
    assert test.calls >= 100, test.calls


def test_the_first_call_is_the_case_alone(override):
    """A one-call sequence builds its pool exactly as the single-case check does, so its coordinate reproduces it."""
    override("fuzz.standins.flashinfer_cpu")
    target = BY_NAME["flashinfer-bf16"]
    case = Case.parse("decode-B2-T1-H1-HV2-K4-V8-pool4-pad0-bf16state-bf16in-i32-vk-decay_mild-seed3-slots[2,1]")
    run = ServingRun(target, "cpu")
    run.step(Step(case))
    alone = materialize(case, "cpu")
    target.call(case, alone)
    assert run.pool.view.equal(alone.pool.view)


def test_a_slot_changed_between_calls_is_a_state_leak(override):
    override("fuzz.standins.flashinfer_cpu")
    run = ServingRun(BY_NAME["flashinfer-bf16"], "cpu")
    case = Case.parse("decode-B1-T1-H1-HV2-K4-V8-pool4-pad0-bf16state-bf16in-i32-vk-decay_mild-seed3-slots[1]")
    run.step(Step(case))
    run.pool.view[3] += 1  # nothing runs between calls: a change here is state carried wrong
    run.step(Step(case.replace(seed=4)))
    with pytest.raises(StateLeak) as raised:
        run.close()
    assert "between calls" in raised.value.cause


def test_the_installed_library_runs_alone_in_a_fresh_process(monkeypatch):
    """No override to reload: the call's coordinate goes to a new worker process whose compile caches are empty. The
    library is loaded in the worker only (this process must not import Triton under a TRITON_INTERPRET it drops)."""
    if importlib.util.find_spec("sglang") is None:
        pytest.skip("sglang-packed unavailable: sglang is not installed (pip install --no-deps sglang==0.5.23)")
    target = BY_NAME["sglang-packed"]
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # the worker inherits it: the Triton kernels run on the CPU
    started = []

    class Spy(serving.Worker):
        def start(self):
            started.append(dict(self.env))
            super().start()

    monkeypatch.setattr(serving, "Worker", Spy)
    alone = Alone(target, "cpu")
    step = Step(Case.parse("decode-B1-T1-H1-HV1-K4-V8-pool2-pad0-fp32state-bf16in-i32-vk-decay_mild-seed3-slots[1]"))
    assert (
        alone(step, None)
        == alone(step, None)
        == (True, "alone (its coordinate in a fresh process, empty compile caches)")
    )
    [env] = started  # one process per coordinate
    assert {
        Path(env[k]).parent.name.startswith("gdn-alone-") for k in ("FLASHINFER_WORKSPACE_BASE", "TRITON_CACHE_DIR")
    } == {True}


def test_findings_land_in_the_run_report(tmp_path):
    report = tmp_path / "run.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "fuzz/test_serving.py",
            "-q",
            "-p",
            "no:warnings",
            "-k",
            DECODE,
            "--hypothesis-profile=ci",
            "--gdn-test-seconds=4",
            "--gdn-shrink-seconds=3",
            "--gdn-target",
            "flashinfer=tests.mutants:input_dtype_left_out_of_key",
            f"--gdn-report={report}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 1, proc.stdout[-3000:]
    data = json.loads(report.read_text())
    assert data["failures"] and {f["kind"] for f in data["failures"]} == {"StaleCompile"}, data["failures"]
    for failure in data["failures"]:
        assert failure["reproduced_on_rerun"] is False and "the calls, one coordinate each" in failure["notes"][-1]
        assert failure["notes"][-1].count("\n  ") == 2, failure["notes"][-1]  # two calls
    records = [r for r in data["records"] if r["op"] == "serving"]
    assert records and data["targets"][DECODE]["examples"]["serving"] == len(records)
    [test] = data["tests"].values()
    assert test["op"] == "serving" and test["boxed"], test
    assert "stopped by its 4 s time box" in proc.stdout and "StaleCompile" in proc.stdout


def test_the_profiles_bound_stops_a_serving_test_too(override):
    """Without --gdn-test-seconds a fuzz test is bounded by its profile (Profile.time_box); the serving test, whose
    rounds are their own engine, once ran past it. Past the bound no call is checked and no round starts."""
    from fuzz.run.report import RunReport

    override("fuzz.standins.flashinfer_cpu")
    target, report = BY_NAME[DECODE], RunReport("ci", "cpu")
    test = ServingTest.start("test_serving[bounded]", target, report, bound=2.0)
    began = time.monotonic()
    # 1,000 sequences: minutes of checks unbounded; past the bound the round finishes on draws alone (seconds)
    run_serving(target, BUDGET, (), "cpu", test, 1_000, steps=5, base=QUIET, seed_=0)
    info = report.tests["test_serving[bounded]"]
    assert info.boxed and info.bound == 2.0 and info.box is None, info
    assert time.monotonic() - began < 2.0 + 60 and info.checked < 1_000, info
