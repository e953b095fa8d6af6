"""Mutation self-test of the serving-glue targets: the fuzzer, run through the `sglang-glue` or `vllm` override as a
user would (`--gdn-target sglang-glue=tests.mutants:NAME`; a fuzz test in rounds, fuzz.suite.session, on the ci
profile), must find each serving-glue index mutant of tests/mutants.py (one per index class of the engines' glue)
within a fixed budget, report it as a bug (never as a contract edge) with a coordinate that reproduces it, and shrink
it to the class's minimal case; and the real glue through the same override must give no finding. Each run is time
boxed as `--gdn-test-seconds BOX --gdn-shrink-seconds BOX` would box it, so the file's time stays bounded in CI.

`pytest -s` prints a row per mutant: examples checked, the test's seconds, examples and seconds to the first
failure, every finding (kind, edge or not, examples and seconds to its first hit, shrunk case), the smallest plain bug.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from fuzz.judge import failures as kinds
from fuzz.model.case import Case
from fuzz.targets.registry import current_overrides, overridden
from tests.mutants import GLUE_MUTANTS
from tests.suite.test_mutants import BY_NAME, fuzz
from tests.targets.test_sglang_glue import interpreted  # noqa: F401  (TRITON_INTERPRET=1 before triton is imported)

TRITON, SIGMOID = "sglang-glue-triton", "vllm-sigmoid"
MAX_EXAMPLES = 200  # per mutant: the budget the fuzzer gets to find the bug
FP_EXAMPLES = 60  # per op of the run on the real glue through the override
BOX = (40.0, 40.0)  # per fuzz test: seconds to check new cases, then to shrink what the last round found


@dataclass(frozen=True)
class Expect:
    """Where the bug shows, which failure kinds may report it, and what its minimal case looks like."""

    op: str
    failures: tuple[type, ...]
    minimal: Callable[[Case], bool]
    why: str  # the minimality rule in words, for the assertion message
    target: str = TRITON
    family: str = "sglang-glue"


def one_live_then_padded(c: Case) -> bool:
    return c.B == 2 and c.padded == (False, True)


EXPECT = {
    # The padded row writes the last slot's old state back: seen only where a live request holds the last slot
    # (a lost update); the smallest such pool holds slot 1 alone.
    "glue_pad_wrapped_onto_last_slot": Expect(
        "decode",
        (kinds.StateMismatch,),
        lambda c: one_live_then_padded(c) and c.read_slots[0] == c.pool - 1,
        "B=2, a live request on the last slot, then a padded row",
    ),
    # The same lost update on slot 1 (slot 0 of the renumbered table), wherever slot 1 is live; on the slot-zero
    # edge the request named on slot 0 is renumbered onto slot 1 too (an edge finding: PoolCorruption there).
    "glue_pad_clamped_onto_live_slot": Expect(
        "decode",
        (kinds.StateMismatch, kinds.PoolCorruption),
        lambda c: one_live_then_padded(c) and c.read_slots[0] == 1,
        "B=2, a live request on slot 1, then a padded row",
    ),
    # One request on slot 1 (slot 0 is reserved) writes scratch row 1, not its batch row 0; a slot past the scratch
    # is an illegal address (RejectedValidInput).
    "glue_scratch_row_by_slot": Expect(
        "verify",
        (kinds.IntermediateMismatch, kinds.PoolCorruption, kinds.RejectedValidInput),
        lambda c: c.B == 1 and c.T == 1 and c.read_slots == (1,),
        "B=1, T=1, the request on slot 1",
    ),
    # The count one past: a request reads its next token's slot (T=2, acc[1]: column 1, not 0), or at acc = T the
    # entry past its row (the next request's first slot; past the last row the pool's guard slot, NaN). A bug of live
    # in-range counts, never an edge.
    "vllm_accepted_unbounded": Expect(
        "verify",
        (kinds.OutputMismatch, kinds.StateMismatch, kinds.NonFinite),
        lambda c: c.B == 1 and c.T <= 2 and c.accepted == (1,),
        "B=1, one accepted token, T <= 2",
        SIGMOID,
        "vllm",
    ),
}


@pytest.fixture(scope="module")
def report():
    """Rows filled in by the tests; printed once the module is done."""
    rows: dict[str, dict] = {}
    yield rows
    print("\n" + "\n".join(f"{name:32s} {row}" for name, row in sorted(rows.items())))


@pytest.mark.parametrize("name", sorted(EXPECT), ids=str)
def test_fuzzer_finds_and_shrinks_glue_mutant(name, report):
    exp = EXPECT[name]
    started = time.monotonic()
    with overridden({**current_overrides(), exp.family: f"tests.mutants:{name}"}):
        run = fuzz(exp.target, exp.op, MAX_EXAMPLES, box=BOX)
    assert run.found, f"{name}: no failure in {run.examples} examples on {exp.target} {exp.op}"
    bugs = [r for r in run.found if not r.failure.key.edge]
    smallest = min((r.failure.case for r in bugs), key=lambda c: (c.B, c.T, c.pool, len(repr(c))), default=None)
    report[name] = dict(
        target=exp.target,
        op=exp.op,
        examples=run.examples,
        seconds=round(time.monotonic() - started, 1),
        first_failure=min(r.examples_before for r in run.found),
        first_seconds=round(min(r.first_hit_seconds for r in run.found), 1),
        found=[
            f"{r.failure.kind}{' (edge)' if r.failure.key.edge else ''} @{r.examples_before}, "
            f"{r.first_hit_seconds:.1f}s: {r.failure.case!r}"
            for r in run.found
        ],
        smallest_bug=repr(smallest),
    )
    assert bugs, f"{name}: found only as contract edges: {[r.failure.key.to_json() for r in run.found]}"
    for record in run.found:  # every distinct failure is a symptom of the planted bug, shrunk on its own
        failure = record.failure
        assert issubclass(kinds.KINDS[failure.kind], exp.failures), f"{name}: {failure.kind}: {failure.message}"
        assert record.minimal and Case.parse(repr(failure.case)) == failure.case  # the report line reproduces
        assert failure.message.startswith(f"{failure.case!r}: ")  # the message leads with the coordinate
        assert bool(failure.key.edge) == (failure.case.edge is not None)  # an edge only where the case needs one
    assert smallest.edge is None and exp.minimal(smallest), (
        f"{name}: no reported bug is minimal ({exp.why}): {[repr(r.failure.case) for r in bugs]}"
    )


def test_every_glue_mutant_is_expected():
    assert set(EXPECT) == set(GLUE_MUTANTS)


def test_real_glue_through_the_override_has_no_findings():
    """The control: the installed glue class behind the same override object, no defect mixed in."""
    with overridden({**current_overrides(), "sglang-glue": "tests.mutants:glue_real"}):
        runs = {op: fuzz(TRITON, op, FP_EXAMPLES, box=BOX) for op in ("decode", "verify")}
    found = {op: [r.failure.message for r in run.found] for op, run in runs.items() if run.found}
    assert all(run.examples >= FP_EXAMPLES // 2 for run in runs.values()), {op: r.examples for op, r in runs.items()}
    assert not found, found


def test_a_mutant_of_the_installed_triton_keeps_the_interpreters_semantics():
    """A serving-glue mutant runs the installed Triton kernels under the interpreter (INSTALLED_TRITON): it is judged
    by the interpreter's row (fp32 -> bf16 casts truncate), as the real glue is; an override module that does not say
    so (here SGLang's own gdn_triton module, its class the real one) is held to the GPU's rounding."""
    runs = [(exp.family, name, exp.target) for name, exp in EXPECT.items()] + [("sglang-glue", "glue_real", TRITON)]
    for family, name, target in runs:
        with overridden({**current_overrides(), family: f"tests.mutants:{name}"}):
            assert BY_NAME[target].semantics().bf16_truncates, name
    with overridden({**current_overrides(), "sglang-glue": "sglang.srt.layers.attention.linear.kernels.gdn_triton"}):
        assert BY_NAME[TRITON].api() and not BY_NAME[TRITON].semantics().bf16_truncates
