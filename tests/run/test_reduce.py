"""The case-level reducer (fuzz.run.reduce) on synthetic predicates: it keeps what the predicate needs and takes the
rest to its simplest, hands the predicate only valid cases, is deterministic, and stops when told."""

from __future__ import annotations

from fuzz.model.case import Case
from fuzz.run.reduce import candidates, reduce

DECODE = Case.parse(
    "decode-B4-T1-H2-HV4-K8-V16-pool12-pad1-fp32state-fp16in-i64-vk-decay_saturated-seed5-"
    "slots[9,7,-1,3]-gap2-scale0.5-nol2-warm3-noout"
)
VERIFY = Case.parse(
    "verify-B3-T6-H1-HV2-K8-V16-pool9-pad1-fp32state-bf16in-i32-vk-decay_mild-seed3-slots[5,-1,2]-"
    "wslots[6,-1,8]-tslots[5/6/7/8/5/6,-1/-1/-1/-1/-1/-1,2/3/4/1/2/3]-inter4x8+2-rows[3,-1,0]"
)
PREFILL = Case.parse(
    "prefill-B3-T7-H1-HV1-K8-V8-pool6-pad0-fp32state-bf16in-i32-vk-decay_mild-seed1-slots[4,2,5]-seqlens[3,7,2]"
)
ALWAYS = lambda case: True


def test_it_keeps_what_the_predicate_needs_and_takes_the_rest_to_its_plainest():
    smallest, checks = reduce(DECODE, lambda c: c.B >= 2 and any(s > 5 for s in c.read_slots), lambda: True)
    assert smallest.B == 2 and sorted(smallest.read_slots) == [1, 6], smallest  # slot 0 stays free: it was
    assert smallest.pool == 7 and checks > 0
    assert repr(smallest) == (
        "decode-B2-T1-H1-HV1-K8-V16-pool7-pad0-fp32state-bf16in-i32-vk-decay_mild-seed0-slots[6,1]"
    )


def test_every_per_request_field_shrinks_with_the_requests():
    smallest, _ = reduce(VERIFY, lambda c: any(row[0] < 0 for row in c.token_slots or ()), lambda: True)
    assert (smallest.B, smallest.T, smallest.read_slots, smallest.write_slots) == (1, 1, (-1,), (-1,)), smallest
    assert smallest.token_slots == ((-1,),) and smallest.inter_index == (-1,), smallest
    assert (smallest.inter_rows, smallest.inter_steps, smallest.inter_spare_steps) == (1, 1, 0), smallest
    shortest, _ = reduce(PREFILL, lambda c: 5 in c.read_slots, lambda: True)
    assert (shortest.seqlens, shortest.T, shortest.read_slots, shortest.pool) == ((1,), 1, (5,), 6), shortest


def test_a_slot_zero_a_request_names_stays_and_one_it_left_free_stays_free():
    named = Case.parse("decode-B2-T1-H1-HV1-K8-V8-pool9-pad0-fp32state-bf16in-i32-vk-decay_mild-seed0-slots[0,8]")
    assert reduce(named, lambda c: c.B == 2, lambda: True)[0].read_slots == (0, 1)
    free = named.replace(read_slots=(3, 8))
    assert reduce(free, lambda c: c.B == 2, lambda: True)[0].read_slots == (1, 2)
    null0 = named.replace(null=0, read_slots=(0, 8, 5))  # slot 0 is padding there: a real slot never becomes it
    assert reduce(null0, lambda c: c.padded == (True, False), lambda: True)[0].read_slots == (0, 1)


def test_the_predicate_sees_only_valid_cases_each_smaller_and_the_reduction_ends():
    for case in (DECODE, VERIFY, PREFILL):
        seen = []
        smallest, checks = reduce(case, lambda c: seen.append(c) or True, lambda: True)
        assert checks == len(seen) > 0
        for c in seen:
            assert Case.parse(repr(c)) == c  # a Case: constructing one refuses anything invalid
        assert smallest.B == 1 and smallest.T <= 1 and smallest.seed == 0 and smallest.H == smallest.HV == 1
        for before, after in zip([case, *seen], seen):
            assert after != before and after.B <= before.B and after.pool <= before.pool


def test_it_is_deterministic():
    def run():
        seen = []
        result = reduce(VERIFY, lambda c: seen.append(c) or c.T >= 2 and c.B >= 2, lambda: True)
        return result, seen

    assert run() == run()


def test_it_stops_when_go_on_says_so():
    assert reduce(DECODE, ALWAYS, lambda: False) == (DECODE, 0)
    asked = []
    smallest, checks = reduce(DECODE, ALWAYS, lambda: asked.append(1) or len(asked) <= 3)
    assert checks == 3 and smallest == next(candidates(next(candidates(next(candidates(DECODE))))))


def test_a_full_pass_without_a_success_ends_it():
    smallest, checks = reduce(DECODE, lambda c: False, lambda: True)
    assert smallest == DECODE and checks == len(list(candidates(DECODE)))
