"""The SGLang glue targets (fuzz.targets.sglang_glue) on the CPU: each adapter's call on a hand-written case gives
the oracle's answer under its semantics row; a padded row is discarded, slot 0 may change and no other slot; the SM90
FlashInfer glue's padding row lands on the pool's last slot (a known bug); the fallback pair runs Triton on a
misaligned pool and agrees with the aligned run; a pair beyond its bound disagrees; where each target runs.

FlashInfer runs on its CPU stand-in (K = V = 128), the Triton glue under TRITON_INTERPRET=1."""

import dataclasses

import pytest
import torch

from fuzz.judge.failures import Disagreement
from fuzz.judge.pair import Run, judge_pair
from fuzz.model.case import Case
from fuzz.model.known_bugs import BY_ID
from fuzz.run.harness import Check, check
from fuzz.targets import sglang_glue
from fuzz.targets.registry import TARGETS, overridden
from fuzz.targets.triage import explaining

BY_NAME = {t.name: t for t in TARGETS}
FI = "-H1-HV2-K128-V128-pool5-{}state-bf16in-i32-vk-decay_mild-seed7"
SM90, SM100 = FI.format("fp32"), FI.format("bf16")
SMALL = "-H1-HV2-K16-V8-pool6-fp32state-bf16in-i32-vk-decay_mild-seed3"


@pytest.fixture(scope="module", autouse=True)
def interpreted():
    """TRITON_INTERPRET=1 before triton is imported (the CPU profiles set it for a whole run; this file alone)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRITON_INTERPRET", "1")
        import triton.language as tl

        assert type(tl.sigmoid).__name__ == "InterpretedFunction", "triton was imported before TRITON_INTERPRET=1"
        yield


def run(name: str, coordinate: str):
    """The check's stages on the target (the single-call driver's, without the pair): (failure, slots changed)."""
    target, case = BY_NAME[name], Case.parse(coordinate)
    stages = Check(target, case, "cpu")
    t = stages.tensors()
    with stages.judging():
        want = stages.expected(t)
        stages.verdict(t, stages.call(t), want)
    return stages.failure, set(t.pool.changed_rows(list(range(case.pool))))


# (target, coordinate, the pool slots the call changes): the live requests' (decode, prefill), slot 0 where a padded
# row is redirected there (SM100), none for verify (disable_state_update)
CALLS = [
    ("sglang-glue-fi-sm90", f"decode-B2-T1{SM90}-slots[2,4]", {2, 4}),
    ("sglang-glue-fi-sm90", f"verify-B3-T2{SM90}-slots[4,1,-1]-inter4x2+0-noupdate", set()),
    ("sglang-glue-fi-sm90", f"prefill-B2-T3{SM90}-slots[4,2]-seqlens[3,2]", {2, 4}),
    ("sglang-glue-fi-sm100", f"decode-B3-T1{SM100}-slots[4,2,-1]", {0, 2, 4}),
    ("sglang-glue-fi-sm100", f"verify-B3-T2{SM100}-slots[4,2,-1]-inter4x2+0-noupdate", set()),
    ("sglang-glue-fi-sm100", f"prefill-B2-T3{SM100}-slots[4,-1]-seqlens[2,3]", {0, 4}),
    ("sglang-glue-triton", f"decode-B3-T1{SMALL}-slots[5,2,-1]", {2, 5}),
    ("sglang-glue-triton", f"verify-B3-T3{SMALL}-slots[5,2,-1]-inter4x3+0-noupdate", set()),
    ("sglang-glue-triton-packed", f"decode-B3-T1{SMALL}-slots[5,2,-1]", {2, 5}),
]


@pytest.mark.parametrize(("name", "coordinate", "changes"), CALLS, ids=[f"{n}-{c[:6]}" for n, c, _ in CALLS])
def test_each_glue_call_gives_the_oracles_answer_and_discards_padding(name, coordinate, changes):
    failure, changed = run(name, coordinate)
    assert failure is None, failure.message
    assert changed == changes


@pytest.mark.parametrize("op", ["decode", "prefill"])
def test_the_sm90_flashinfer_glue_writes_a_padded_row_onto_the_last_slot(op):
    """gdn_flashinfer.py: decode's ssm_states[cache_indices] gather / scatter wraps -1 onto the last slot (l.461,
    475); extend remaps -1 to pool - 1 and writes every row back (l.546-552, 585). The last slot is live in SGLang."""
    shape = "decode-B2-T1" if op == "decode" else "prefill-B2-T3"
    failure, changed = run("sglang-glue-fi-sm90", f"{shape}{SM90}-slots[1,-1]" + ("-seqlens[2,3]" * (op == "prefill")))
    assert failure.kind == "PoolCorruption" and "pool slot 4 changed" in failure.detail
    assert changed == {1, 4}
    bug = explaining(failure.kind, failure.cause, (failure.case,), "sglang.glue.flashinfer.sm90", "0.5.23")
    assert bug == (BY_ID["sglang-sm90-pad-last-slot"],)


def test_the_fallback_pair_runs_triton_on_the_misaligned_pool_and_agrees():
    coordinate = f"verify-B3-T2{SM90}-slots[4,1,-1]-inter4x2+0-noupdate"
    result = check(BY_NAME["sglang-glue-fallback"], Case.parse(coordinate), "cpu")
    assert result.failure is None, result.failure.message
    kinds = {c.kind for c in result.comparisons}
    assert {"output pair", "intermediate pair", "sglang-glue-fallback[misaligned] output"} <= kinds
    # the misaligned run is the Triton glue's call: the same values, bit for bit
    case, twin, triton = Case.parse(coordinate), BY_NAME["sglang-glue-fallback"].paired(), BY_NAME["sglang-glue-triton"]
    outputs = []
    for target in (twin, triton):
        stages = Check(target, case, "cpu")
        outputs.append(stages.call(stages.tensors()))
    live = outputs[0].reshape(3, 2, -1)[:2]
    assert torch.equal(live, outputs[1].reshape(3, 2, -1)[:2])


def test_a_pair_apart_beyond_its_bound_disagrees():
    target, case = BY_NAME["sglang-glue-triton"], Case.parse(f"decode-B2-T1{SMALL}-slots[5,2]")
    stages = Check(target, case, "cpu")
    t = stages.tensors()
    want = stages.expected(t)
    first = Run(t, stages.call(t), want)
    judge_pair(case, stages.sem, first, first, [])  # a run agrees with itself
    apart = first.output.clone()
    apart_by = ((0.25, "output paths disagree above the pair's bound"), (torch.nan, "output finite on one path only"))
    for gap, cause in apart_by:
        apart[1, 0, 1, 3] = first.output[1, 0, 1, 3] + gap
        with pytest.raises(Disagreement) as raised:
            judge_pair(case, stages.sem, first, dataclasses.replace(first, output=apart), [])
        assert raised.value.cause == cause and "output[1, 1, 3]" in str(raised.value)


def test_where_each_glue_target_runs(monkeypatch):
    where = {t.name: t.where("cpu") for t in sglang_glue.TARGETS}
    assert where["sglang-glue-fi-sm100"] == "CPU stand-in, arch 10 faked"
    assert where["sglang-glue-triton"] == "Triton interpreter"
    assert "misaligned pool: its fallback, Triton interpreter" in where["sglang-glue-fallback"]
    assert "wrong numbers under the Triton" in BY_NAME["sglang-glue-triton"].op_unavailable("prefill", "cpu")
    assert BY_NAME["sglang-glue-fi-sm90"].op_unavailable("prefill", "cpu") is None
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    reason = BY_NAME["sglang-glue-fi-sm100"].unavailable_reason("cuda")
    assert reason == "SM100 path: fuzzed on the CPU stand-in only (no SM100 GPU here)"


def test_an_override_module_stands_in_for_the_glue_classes():
    """SGLang's own gdn_triton module as the override: it has TritonGDNKernel and no FlashInferGDNKernel."""
    BY_NAME["sglang-glue-triton"].api()  # the loader registers SGLang's packages
    with overridden({"sglang-glue": "sglang.srt.layers.attention.linear.kernels.gdn_triton"}):
        assert "lacks FlashInferGDNKernel" in BY_NAME["sglang-glue-fi-sm90"].unavailable_reason("cpu")
        assert BY_NAME["sglang-glue-triton"].release() is None
        failure, changed = run("sglang-glue-triton", f"decode-B3-T1{SMALL}-slots[5,2,-1]")
    assert failure is None and changed == {2, 5}
