"""Mutation self-test: the fuzzer, run through the `flashinfer` override exactly as a user would (a fuzz test in
rounds, fuzz.suite.session), must find every planted bug in tests/mutants.py within a fixed budget and shrink each
distinct failure it reports to the bug's minimal case; and it must find nothing in the correct stand-in.

`pytest -s` prints a table (examples to the first failure, failure class, shrunk case); with
GDN_MUTANT_REPORT=path the same rows are written there as JSON.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from fuzz.generate.profiles import BUDGETS
from fuzz.judge.failures import (
    KINDS,
    IntermediateMismatch,
    NonFinite,
    OutputMismatch,
    PoolCorruption,
    RejectedValidInput,
    StateMismatch,
    UnwrittenOutput,
)
from fuzz.model.case import Case
from fuzz.suite.session import FuzzSession, Options, fuzz_test
from fuzz.targets import flashinfer
from fuzz.targets.registry import TARGETS
from tests.mutants import MUTANTS

BUDGET = BUDGETS["ci"]
MAX_EXAMPLES = 300  # per mutant: the budget the fuzzer gets to find the bug
FP_EXAMPLES = 200  # per (target, op) of the false-positive run: 6 pairs, 1200 examples
BY_NAME = {t.name: t for t in TARGETS}
PRETRANSPOSE, BF16, MTP = "flashinfer-pretranspose-fp32", "flashinfer-bf16", "flashinfer-mtp-fp32"
PREFILL = "flashinfer-prefill-chunk"


@dataclass(frozen=True)
class Expect:
    """Where the bug shows, which failure kinds may report it, and what its minimal case looks like."""

    target: str
    op: str
    failures: tuple[type, ...]
    minimal: Callable[[Case], bool]
    why: str  # the minimality rule in words, for the assertion message


def one_padded(c: Case) -> bool:
    return c.B == 1 and c.padded == (True,)


EXPECT = {
    # pretranspose pools reserve slot 0 (padded writes go there), so a lone padded row needs only pool=1.
    "unguarded_pad_slot": Expect(
        PRETRANSPOSE,
        "decode",
        (OutputMismatch, PoolCorruption, StateMismatch),
        lambda c: one_padded(c) and c.pool == 1,
        "B=1, one padded row, pool=1",
    ),
    # Needs a real row n in slot != n (an out-of-range slot raises: RejectedValidInput). B=1 (slot 1, a
    # 2-row buffer) and B=2 (slots [1,-1]) are equally small draws; the shrinker lands on the second.
    "inter_row_by_slot": Expect(
        MTP,
        "verify",
        (PoolCorruption, IntermediateMismatch, RejectedValidInput),
        lambda c: c.B <= 2 and c.T == 1 and c.inter_rows >= 1 and any(0 <= s != n for n, s in enumerate(c.read_slots)),
        "B<=2, T=1, a buffer, a real row n in slot != n",
    ),
    # hv % H == hv // (HV // H) unless H > 1 and HV > H: H=2 with the next GVA ratios (HV=4, 8) are the smallest.
    "gva_head_modulo": Expect(
        PRETRANSPOSE,
        "decode",
        (OutputMismatch, StateMismatch),
        lambda c: c.B == 1 and c.H == 2 and c.HV in (4, 8),
        "B=1, H=2, HV=4 or 8",
    ),
    "write_back_when_disabled": Expect(
        MTP, "verify", (PoolCorruption,), lambda c: c.B == 1 and c.T == 1 and not c.update, "B=1, T=1, noupdate"
    ),
    "fp16_bitcast_as_bf16": Expect(
        BF16,
        "decode",
        (OutputMismatch, StateMismatch, NonFinite),
        lambda c: c.B == 1 and c.input_dtype == "fp16",
        "B=1, fp16 inputs",
    ),
    "output_before_update": Expect(PRETRANSPOSE, "decode", (OutputMismatch,), lambda c: c.B == 1, "B=1"),
    # Only x = a + dt_bias > 20 differs, with a decay weak enough to see: the "threshold" regime (or "mixed").
    "softplus_clamped_at_threshold": Expect(
        PRETRANSPOSE,
        "decode",
        (OutputMismatch, StateMismatch),
        lambda c: c.B == 1 and c.decay in ("threshold", "mixed"),
        "B=1, decay regime threshold",
    ),
    # A 1-slot pool view is contiguous whatever its stride, so the copy needs pool >= 2 (slot 0 reserved).
    "strided_pool_lost_write": Expect(
        PRETRANSPOSE,
        "decode",
        (StateMismatch,),
        lambda c: c.B == 1 and c.pool == 2 and c.pool_gap == 1,
        "B=1, pool=2, gap=1",
    ),
    # Step 4 (0-based) is the first one moved: T=5 is the smallest T that has it.
    "inter_step_off_by_one": Expect(
        BF16,
        "verify",
        (IntermediateMismatch, PoolCorruption),
        lambda c: c.B == 1 and c.T == 5 and c.inter_rows == 1,
        "B=1, T=5, a buffer",
    ),
    "padded_output_not_zeroed": Expect(PRETRANSPOSE, "decode", (UnwrittenOutput,), one_padded, "B=1, one padded row"),
    "padded_output_rewritten": Expect(MTP, "verify", (PoolCorruption,), one_padded, "B=1, one padded row"),
    # Loose on purpose: whether a case fails depends on which earlier example compiled its shape first, so
    # the shrinker walks a stateful landscape; only "found, by a stale kernel" is a stable claim.
    "compile_key_shape_only": Expect(
        PRETRANSPOSE, "decode", (OutputMismatch, StateMismatch), lambda c: c.B <= BUDGET.max_B, "any B (stateful cache)"
    ),
    "split_write_ignored": Expect(
        PRETRANSPOSE,
        "decode",
        (PoolCorruption, StateMismatch),
        lambda c: c.B == 1 and c.write_slots is not None and c.write_slots != c.read_slots,
        "B=1, a write slot other than the read slot",
    ),
    # One token in all, in a row whose write id is -1 (a padded read: output_state_indices is the read map): its
    # zero-state run is stored into the last slot, slot 0 of a one-slot pool. Empty rows beside it store nothing,
    # so the shrinker may keep them (B is drawn before the seqlens list).
    # Only past the dispatch threshold B*HV = 128 (T >= 2, a buffer, updates on): the straddle draws land exactly on
    # it, and the shrinker keeps the crossing (anything below it passes), so the minimal case sits at the threshold.
    "wide_vec_skips_write_back": Expect(
        BF16,
        "verify",
        (StateMismatch,),
        lambda c: c.B * c.HV == 128 and c.T == 2 and c.inter_rows and c.update,
        "B*HV = 128 exactly, T=2, a buffer, updates on",
    ),
    "prefill_skipped_write_wraps": Expect(
        PREFILL,
        "prefill",
        (PoolCorruption, StateMismatch),
        lambda c: c.pool == 1 and sum(c.seqlens) == 1 and (c.write_slots or c.read_slots)[c.seqlens.index(1)] == -1,
        "pool=1, one token, in a row with write id -1",
    ),
}


@dataclass
class Run:
    """What one fuzz test saw: its distinct shrunk failures (fuzz.run.report.FailureRecord) and its examples."""

    examples: int
    found: list


def fuzz(
    target_name: str, op: str, max_examples: int, large: bool = False, box: tuple[float, float] | None = None
) -> Run:
    """The fuzz test of `op` on the target, in rounds, as `pytest fuzz/` runs it (fuzz.suite.session); `large`: the
    large-pool test of fuzz/test_large_pool.py; `box`: (--gdn-test-seconds, --gdn-shrink-seconds) of the run."""
    seconds, shrink = box or (None, 120.0)
    session = FuzzSession("ci", BUDGET, Options(examples=max_examples, test_seconds=seconds, shrink_seconds=shrink))
    found = session.run_test(f"test_mutants::{target_name}:{op}", BY_NAME[target_name], op, fuzz_test(op, large=large))
    return Run(sum(session.report.examples.values()), found)


@pytest.fixture(scope="module")
def report():
    """Rows filled in by the tests; printed and (GDN_MUTANT_REPORT) written once the module is done."""
    rows: dict[str, dict] = {"mutants": {}, "false_positive": {}}
    yield rows
    print(
        "\n"
        + "\n".join(
            f"{name:30s} {r['target']:29s} first@{r['first_failure']!s:>4s} {r['failure']:20s} {r['shrunk']}"
            for name, r in sorted(rows["mutants"].items())
        )
    )
    if path := os.environ.get("GDN_MUTANT_REPORT"):
        with open(path, "w") as f:
            json.dump(rows, f, indent=1)


@pytest.mark.parametrize("name", sorted(EXPECT), ids=str)
def test_fuzzer_finds_and_shrinks(name, override, report):
    exp, mutant = EXPECT[name], MUTANTS[name]
    mutant.kernels.clear()  # the compile cache persists across examples of this run, never across runs
    override(f"tests.mutants:{name}")
    run = fuzz(exp.target, exp.op, MAX_EXAMPLES)
    assert run.found, f"{name}: no failure in {run.examples} examples on {exp.target} {exp.op}"
    first = min(run.found, key=lambda r: r.examples_before)
    report["mutants"][name] = dict(
        target=exp.target,
        op=exp.op,
        first_failure=first.examples_before,
        examples=run.examples,
        failure=first.failure.kind,
        shrunk=repr(first.failure.case),
    )
    for record in run.found:  # every distinct failure is a symptom of the planted bug, shrunk on its own
        failure = record.failure
        assert issubclass(KINDS[failure.kind], exp.failures), f"{name}: {failure.kind}: {failure.message}"
        assert record.minimal and Case.parse(repr(failure.case)) == failure.case  # the report line reproduces
    # Each failure key shrinks within itself, so one symptom may stop at a case another symptom beats; the smallest
    # reported case is the reproduction a user attaches, and it must be the bug's minimal case.
    smallest = min((r.failure.case for r in run.found), key=lambda c: (c.B, c.T, c.pool, len(repr(c))))
    assert exp.minimal(smallest), (
        f"{name}: no reported case is minimal ({exp.why}): {[repr(r.failure.case) for r in run.found]}"
    )


def test_correct_standin_has_no_findings(override, report):
    override("fuzz.standins.flashinfer_cpu")
    pairs = [(t.name, op) for t in flashinfer.TARGETS for op in sorted(t.support.ops)]
    runs = {pair: fuzz(*pair, FP_EXAMPLES) for pair in pairs}
    total = sum(r.examples for r in runs.values())
    found = {f"{t} {op}": [r.failure.message for r in run.found] for (t, op), run in runs.items() if run.found}
    report["false_positive"] = dict(
        examples={f"{t} {op}": r.examples for (t, op), r in runs.items()}, total=total, failures=found
    )
    print(f"\nfalse-positive run: {total} examples over {len(pairs)} (target, op) pairs, {len(found)} failing")
    assert total >= 500
    assert not found, found


@pytest.mark.parametrize(
    ("target_name", "op"), [(PRETRANSPOSE, "decode"), (BF16, "verify"), (MTP, "verify"), (PREFILL, "prefill")], ids=str
)
def test_large_pool_test_finds_a_wrapped_offset(target_name, op, override):
    """The int32 offset class, modelled at 14 bits (tests.mutants.WrappedSlotOffset): the large-pool test on the ci
    profile draws pools past 2^13 and 2^14 elements with a 2^13-element guard below them; a wrapped write is a
    GuardBreach (below the pool) or a PoolCorruption (onto a low slot) that names the slot whose offset wrapped and
    where its data landed, never a crash."""
    override("tests.mutants:wrapped_slot_offset")
    run = fuzz(target_name, op, 60, large=True)
    landed = [r.failure for r in run.found if "landed 2^14 elements below its place" in r.failure.detail]
    kinds = {f.kind for f in landed}
    messages = [r.failure.message for r in run.found]
    assert "GuardBreach" in kinds, f"no GuardBreach in {run.examples} examples: {messages}"
    onto = [
        r.failure
        for r in run.found
        if "PoolCorruption" == r.failure.kind and r.failure in landed or "wraps onto slot" in r.failure.detail
    ]
    assert onto, f"no wrap past 2^14 onto the pool: {[r.failure.message for r in run.found]}"
    for failure in landed:  # below the pool (offsets past 2^13) or onto its low slots (past 2^14)
        case = failure.case
        slot = int(failure.detail.split("'s data landed", 1)[0].rsplit("slot ", 1)[1])
        assert slot in (*case.read_slots, *(case.write_slots or ())), failure.message
        assert slot * (case.HV + case.pool_gap) * case.K * case.V >= 2**13, failure.message
    for record in run.found:  # every other symptom is a wrapped read, and says where it read
        assert record.failure in landed or "an int14 offset there wraps" in record.failure.detail, (
            record.failure.message
        )


def test_large_pool_test_is_unavailable_where_it_cannot_fit(override):
    """A real offset width on the CPU profile: 2^31-element pools and guards do not fit the ci budget, and the
    reason gives the sizes (the targets table shows it), instead of an out-of-memory error read as a finding."""
    override("fuzz.standins.flashinfer_cpu")
    session = FuzzSession("ci", BUDGET, Options())
    reason = session.large_unavailable(BY_NAME[MTP], "verify")
    assert reason and "GiB" in reason and "2^32" in reason, reason
