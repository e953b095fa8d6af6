"""Triage agrees with the strategies: what a known bug's mask keeps from being drawn is exactly what triage calls
masked, and findings of the H200 campaign (2026-12-02) are explained by the records written for them."""

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from fuzz.generate.profiles import BUDGETS
from fuzz.generate.strategies import cases
from fuzz.model.case import Case
from fuzz.model.known_bugs import BY_ID, KNOWN_BUGS
from fuzz.model.support import Support
from fuzz.targets import triage
from fuzz.targets.registry import TARGETS, overridden
from tests.draws import first_draws

BY_PATH = {t.path: t for t in TARGETS}
MASKED = [b for b in KNOWN_BUGS if b.mask and any(p in BY_PATH for p in b.paths)]


@pytest.fixture(autouse=True, scope="module")
def cpu_flashinfer():
    with overridden({"flashinfer": "fuzz.standins.flashinfer_cpu"}):
        yield


def test_every_mask_field_is_a_support_field_triage_can_read():
    fields = {f.name for f in dataclasses.fields(Support)}
    for bug in KNOWN_BUGS:
        assert set(bug.mask) <= fields, (bug.id, set(bug.mask) - fields)
        assert set(bug.mask) <= set(triage._OUTSIDE), (bug.id, set(bug.mask) - set(triage._OUTSIDE))
        assert bug.shows, f"{bug.id}: no 'shows' pattern, so triage can never attribute a finding to it"


@settings(max_examples=300, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_a_case_drawn_under_a_mask_is_never_called_masked(data):
    bug = data.draw(st.sampled_from(MASKED), label="bug")
    target = BY_PATH[data.draw(st.sampled_from([p for p in bug.paths if p in BY_PATH]), label="path")]
    op = data.draw(st.sampled_from(sorted(target.support.ops - set(bug.masked_ops))), label="op")
    case = data.draw(cases(target, op, BUDGETS["ci"], bugs=(bug,)), label="case")
    assert not triage.masks(bug, case), (bug.id, case)


# a search through the first 2,000 cases a strategy draws, the same ones every run
SEARCH = first_draws(2000)


def test_the_size1_mask_keeps_lone_single_head_requests_out_and_nothing_else():
    target = BY_PATH["flashinfer.pretranspose.fp32"]
    lone = find(cases(target, "decode", BUDGETS["ci"]), lambda c: c.B == 1 and c.H == 1, settings=SEARCH)
    assert triage.masks(BY_ID["size1-layout"], lone)
    bugs = (BY_ID["size1-layout"],)
    with pytest.raises(Exception, match="No examples"):
        find(cases(target, "decode", BUDGETS["ci"], bugs=bugs), lambda c: c.B == 1 and c.H == 1, settings=SEARCH)
    find(cases(target, "decode", BUDGETS["ci"], bugs=bugs), lambda c: c.B == 1 and c.H == 2, settings=SEARCH)


# Every distinct failure of the H200 campaign of 2026-12-02 (five releases, masks off; docs/h200-results-2026-12-02.md)
# with the records that explained it when they were written from it.
# And the smallest of each release x target x kind x records of the reach campaigns of 2026-12-03
# (docs/h200-results-2026-12-02-reach.md), with the earlier calls of a serving sequence ("before").
FINDINGS = [
    f
    for name in ("h200-2026-12-02-findings.json", "h200-2026-12-03-findings.json")
    for f in json.loads((Path(__file__).resolve().parents[1] / "data" / name).read_text())
]


@pytest.mark.parametrize(
    "finding", FINDINGS, ids=[f"{f['release']}-{f['target']}-{f['kind']}-{i}" for i, f in enumerate(FINDINGS)]
)
def test_every_campaign_finding_is_explained_by_its_records(finding):
    """A record edited so that it no longer explains what it was written from (a narrower range, a mask that no longer
    covers the case, a pattern that misses the cause) fails here, naming the finding."""
    path = {t.name: t.path for t in TARGETS}[finding["target"]]
    calls = (*map(Case.parse, finding.get("before", ())), Case.parse(finding["case"]))
    bugs = triage.explaining(finding["kind"], finding["cause"], calls, path, finding["release"])
    assert [b.id for b in bugs] == finding["explained_by"] and bugs, finding


def test_the_one_token_mask_keeps_lone_decode_requests_out_and_nothing_else():
    """mtp-one-token-dummy-indices: B = 1 at T = 1 is not drawn while it holds; B = 1 at T = 2 still is."""
    target = BY_PATH["flashinfer.mtp.fp32"]
    bug = BY_ID["mtp-one-token-dummy-indices"]
    lone = find(cases(target, "decode", BUDGETS["ci"]), lambda c: c.B == 1, settings=SEARCH)
    assert triage.masks(bug, lone)
    with pytest.raises(Exception, match="No examples"):
        find(cases(target, "verify", BUDGETS["ci"], bugs=(bug,)), lambda c: c.B == 1 and c.T == 1, settings=SEARCH)
    find(cases(target, "verify", BUDGETS["ci"], bugs=(bug,)), lambda c: c.B == 1 and c.T == 2, settings=SEARCH)


def test_a_finding_no_record_masks_is_new():
    # the same size-1 layout error on a release before mark_layout_dynamic, or with B = 2, is nothing known
    coordinate = "decode-B1-T1-H1-HV1-K128-V128-pool1-pad0-fp32state-bf16in-i32-kv-decay_mild-seed0-slots[0]"
    cause = "RuntimeError: Can't deduce the leading dimension"
    path = "flashinfer.decode.kmajor"
    assert not triage.explaining("RejectedValidInput", cause, (Case.parse(coordinate),), path, "0.6.11")
    two = Case.parse(coordinate.replace("B1", "B2").replace("pool1", "pool2").replace("slots[0]", "slots[0,1]"))
    assert not triage.explaining("RejectedValidInput", cause, (two,), path, "0.7.4")
    # a wrong value on fp16 inputs at 0.7.4 is no bit-cast (fixed in 0.7.2) and no known bug
    fp16 = "decode-B2-T1-H1-HV2-K128-V128-pool3-pad0-fp32state-fp16in-i32-vk-decay_mild-seed0-slots[1,2]"
    bugs = triage.explaining(
        "OutputMismatch", "output error above the bound", (Case.parse(fp16),), "flashinfer.pretranspose.fp32", "0.7.4"
    )
    assert triage.verdict(bugs).startswith("NEW") and triage.verdict((BY_ID["size1-layout"],)) == "known: size1-layout"


def test_a_bug_that_breaks_a_whole_operation_takes_that_operation_out(monkeypatch):
    """KnownBug.masked_ops (no record needs it today): its operation's tests are reported unavailable with the bug as
    the reason, and triage calls every case of that operation masked."""
    from fuzz.model.known_bugs import KnownBug, masked_reason

    bug = KnownBug("breaks-decode", "decode never compiles", ("flashinfer.mtp.fp32",), "0.6.5", masked_ops=("decode",))
    assert masked_reason((bug,), "decode") == (
        "known bug breaks-decode (>=0.6.5): decode never compiles (corpus/ replays it)"
    )
    assert masked_reason((bug,), "verify") is None
    decode = "decode-B2-T1-H1-HV2-K128-V128-pool3-pad0-fp32state-bf16in-i32-vk-decay_mild-seed0-slots[1,2]"
    assert triage.masks(bug, Case.parse(decode))
    verify = "verify-B2-T2-H1-HV2-K128-V128-pool3-pad0-fp32state-bf16in-i32-vk-decay_mild-seed0-slots[1,2]"
    bug = dataclasses.replace(bug, shows="^RejectedValidInput")
    monkeypatch.setattr(triage, "KNOWN_BUGS", (bug,))
    assert triage.explaining("RejectedValidInput", "x", (Case.parse(decode),), "flashinfer.mtp.fp32", "0.7.4") == (bug,)
    assert not triage.explaining("RejectedValidInput", "x", (Case.parse(verify),), "flashinfer.mtp.fp32", "0.7.4")


def test_serving_masks_the_single_call_bugs_of_the_release_under_every_policy():
    """A serving sequence would end at the first call a single-call known bug breaks and replay it, never reaching
    the bugs that need two calls: those stay unmasked under --gdn-masks none, the single-call ones never are."""
    from fuzz.model.known_bugs import serving_bugs

    for policy in ("none", "release", "all"):
        ids = {b.id for b in serving_bugs("flashinfer.bf16", "0.6.11", policy)}
        assert {"bf16-strided-pool-copied", "fp16-bitcast-mtp-bf16", "saturated-softplus-nan"} <= ids, policy
        assert ("bf16-cached-output" in ids) == (policy != "none"), policy  # a two-call bug: the policy decides
        assert ("dtype-compile-keys" in ids) == (policy != "none"), policy  # a compile key left short: two calls
    assert not serving_bugs("flashinfer.bf16", None, "none")  # an override module has no release
