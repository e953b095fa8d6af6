"""gdn-fuzz warm (fuzz.run.warm) with the CPU stand-in of FlashInfer: the cases it compiles are the compile keys a
run's planned cases use, it runs them in parallel workers, and a run says whether its plan was warmed ahead."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given

from fuzz.generate.profiles import BUDGETS, CPU_DIMS, CPU_LARGE_BYTES
from fuzz.generate.strategies import bucket_plan, cases
from fuzz.run import warm
from fuzz.targets.registry import TARGETS, overridden
from tests.draws import first_draws

ROOT = Path(__file__).resolve().parents[2]
BY_NAME = {t.name: t for t in TARGETS}
# the h200 plan's shape on the CPU: a plan, warm calls and straddles, with the stand-in's small dims
PLANNED = dataclasses.replace(
    BUDGETS["h200"],
    device="cpu",
    head_dims=CPU_DIMS,
    max_B=6,
    max_T=6,
    max_pool=16,
    t_choices=(1, 2, 4, 6),
    large_bytes=CPU_LARGE_BYTES,
    plan_size=3,
    open_every=10**9,
)  # every case from the plan


@pytest.fixture(autouse=True, scope="module")
def cpu_flashinfer():
    with overridden({"flashinfer": "fuzz.standins.flashinfer_cpu"}):
        yield


def compile_fields(case) -> tuple:
    """What FlashInfer 0.7.4 keys its decode / MTP kernels by, B's tile band aside (see fuzz.generate.strategies
    Bucket): a warmed case and a drawn one with the same fields and band share a compiled kernel."""
    return (
        case.op,
        case.T,
        case.H,
        case.HV,
        case.K,
        case.V,
        case.state_dtype,
        case.input_dtype,
        case.index_dtype,
        case.layout,
        case.pool_gap,
        case.pool if case.pool_gap else None,
        bool(case.inter_rows),
        case.inter_steps - case.T if case.inter_rows else 0,
        case.inter_spare_steps,
        case.update,
        case.l2norm,
        case.output_given,
        case.write_slots is not None,
        case.token_slots is not None,
    )


@pytest.mark.parametrize(
    ("name", "op"),
    [("flashinfer-mtp-fp32", "verify"), ("flashinfer-bf16", "verify"), ("flashinfer-pretranspose-fp32", "decode")],
)
def test_every_planned_case_a_run_draws_has_its_compile_key_warmed(name, op):
    target = BY_NAME[name]
    units, _ = warm.units_for([target], PLANNED, "release")
    warmed = {compile_fields(c) for u in units if u.op == op for c in u.cases}
    planned = {_core(f) for f in warmed}  # a bucket opened off the plan (one case in open_every) is not warmed
    assert warmed

    @first_draws(300)
    @given(case=cases(target, op, PLANNED, target.known_bugs()))
    def drawn(case):
        if case.warm_pool or not case.valid or (case.pool_gap and case.pool > PLANNED.max_pool):
            return  # a warm-up call's larger pool, an illegal head ratio, a pool past the plan's capacity
        if _core(compile_fields(case)) in planned:
            seen.append(case)
            assert compile_fields(case) in warmed, repr(case)

    seen = []
    drawn()
    assert len(seen) > 100  # the property held for the planned cases, and there were plenty of them


def _core(fields: tuple) -> tuple:
    """The fields a bucket had before its flags: op, T, heads, dims, dtypes, layout, strided, buffer, update."""
    return (*fields[:10], bool(fields[10]), fields[12], fields[15])


def test_the_batch_ladder_reaches_both_sides_of_every_tile_band_and_threshold():
    target = BY_NAME["flashinfer-mtp-fp32"]
    sup = target.declared(target.known_bugs())
    bucket = bucket_plan(target.name, "verify", sup, PLANNED)[0]
    ladder = warm.plan_batches(target, bucket, dataclasses.replace(PLANNED, max_B=96), sup)
    for band in warm.WORK_BANDS:
        if band // bucket.HV + 1 <= 96:
            assert any(b * bucket.HV <= band for b in ladder) and any(b * bucket.HV > band for b in ladder), band
    assert ladder[0] == sup.least_B(bucket.H, bucket.T) and 96 in ladder


def test_warm_checks_every_case_in_parallel_workers_and_a_run_reads_its_manifest(tmp_path):
    target = BY_NAME["flashinfer-pretranspose-fp32"]
    units, skipped = warm.units_for([target], PLANNED, "release")
    assert not skipped and units
    progress = warm.run_units(units, "cpu", jobs=2, timeout=120)
    assert progress.done == progress.total == sum(len(u.cases) for u in units) and progress.failed == 0
    ran = {target.name: {"decode"}}
    assert "not compiled ahead for this plan: flashinfer-pretranspose-fp32 decode" in warm.status(
        ran, [tmp_path], "h200", PLANNED, "release"
    )
    warm.write_manifest(
        tmp_path,
        {f"h200/release/{target.name}/decode": warm.plan_digest(target, "decode", PLANNED, "release")},
        {"when": "now", "cases": progress.total, "seconds": 1.0},
    )
    assert "every bucket this run drew from was compiled ahead" in warm.status(
        ran, [tmp_path], "h200", PLANNED, "release"
    )
    assert "not compiled ahead" in warm.status(ran, [tmp_path], "h200", PLANNED, "none")  # another plan


def _warm(*args):
    return subprocess.run(
        [sys.executable, "-m", "fuzz", "warm", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "XDG_CACHE_HOME": os.environ.get("TMPDIR", "/tmp")},
    )


def test_the_command_says_what_it_cannot_do_in_one_line():
    free = _warm("--profile", "ci")
    assert free.returncode == 0 and "draws its buckets freely" in free.stdout
    for args, text in ((("--jobs", "0"), "--jobs 0"), (("--profile", "nope"), "invalid choice")):
        bad = _warm(*args)
        assert bad.returncode == 2 and text in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
