"""PadContract: every read behaviour, write behaviour and sentinel has its documented effect on output rows,
pool slots and intermediate rows."""

from dataclasses import replace

import pytest
import torch
from oracle_helpers import F64, Shape, assert_untouched, make_case, tokens, verify

import reference
from reference import PadContract

# (sentinel, a padded index under it); real slots are >= 1 so they are real under both sentinels.
PADS = [("negative", -1), ("negative", -3), ("zero", 0), ("zero", -1)]
PAD_IDS = [f"{s}[{i}]" for s, i in PADS]
READS = ["skip_zero", "skip_untouched", "slot0", "zero_state", "discard"]
WRITES = ["skip", "slot0"]
MARK = 7.0


@pytest.mark.parametrize(
    "sentinel,index,is_pad",
    [
        ("negative", -1, True),
        ("negative", -2, True),
        ("negative", 0, False),
        ("negative", 3, False),
        ("zero", 0, True),
        ("zero", -1, True),
        ("zero", 1, False),
    ],
    ids=lambda x: str(x).lower(),
)
def test_sentinel_classifies_indices(sentinel, index, is_pad):
    pad = PadContract(sentinel=sentinel)
    assert pad.is_pad(index) is is_pad
    assert pad.is_pad(pad.null_index)
    assert pad.null_index == {"negative": -1, "zero": 0}[sentinel]


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("sentinel", ["negative", "zero"])
def test_sentinel_classifies_an_index_tensor_as_each_of_its_ints(sentinel, dtype):
    """The one predicate the oracles use on index tensors (reference.batched) and on host ints (reference.ops)."""
    pad = PadContract(sentinel=sentinel)
    indices = [-3, -1, 0, 1, 5]
    got = pad.is_pad(torch.tensor(indices, dtype=dtype))
    assert got.dtype == torch.bool and got.tolist() == [pad.is_pad(i) for i in indices]


def padded_batch(pad_index):
    """Three requests, T = 2; the middle one reads a padded slot; real slots 2 and 4 of a 5-slot pool."""
    case = make_case(11, Shape(B=3, T=2, H=1, G=2, K=3, V=5), extra_slots=2)
    return replace(case, slots=torch.tensor([2, pad_index, 4]))


def run_row(case, row, pool, slot):
    """Row `row` alone, from pool[slot] under the default (negative) sentinel, where slot 0 is real."""
    B, T, HV, V, K = 1, case.shape.T, case.shape.HV, case.shape.V, case.shape.K
    return reference.verify(
        *tokens(case, slice(None), slice(row, row + 1)),
        pool,
        torch.tensor([slot]),
        intermediate=torch.zeros(B, T, HV, V, K, dtype=F64),
    )


@pytest.mark.parametrize("write", WRITES)
@pytest.mark.parametrize("sentinel,pad_index", PADS, ids=PAD_IDS)
@pytest.mark.parametrize("read", READS)
def test_padded_read_slot(read, sentinel, pad_index, write):
    case = padded_batch(pad_index)
    s = case.shape
    res = verify(
        case,
        pad=PadContract(sentinel=sentinel, read=read, write=write),
        intermediate=torch.full((3, s.T, s.HV, s.V, s.K), MARK, dtype=F64),
        output=torch.full((3, s.T, s.HV, s.V), MARK, dtype=F64),
    )
    q, k, v, gates = tokens(case, slice(None), [0, 2])
    real = verify(replace(case, q=q, k=k, v=v, gates=gates, slots=case.slots[[0, 2]]))
    assert torch.equal(res.output[[0, 2]], real.output)  # real rows are unaffected by the padded one
    assert torch.equal(res.pool[[2, 4]], real.pool[[2, 4]])
    if read in ("skip_zero", "skip_untouched", "discard"):  # no state read or write, no scratch write
        assert bool((res.output[1] == (0.0 if read == "skip_zero" else MARK)).all())  # discard: undefined, kept
        assert bool((res.intermediate[1] == MARK).all())
        written, rows = {2, 4}, {0, 2}
    else:  # computed from slot 0 or from a zero state; only slot0 writes back, and to slot 0
        alone = run_row(case, 1, case.pool if read == "slot0" else torch.zeros_like(case.pool[:1]), 0)
        assert torch.equal(res.output[1], alone.output[0])
        assert torch.equal(res.intermediate[1], alone.intermediate[0])
        if read == "slot0":
            assert torch.equal(res.pool[0], alone.pool[0])
        written, rows = ({0, 2, 4} if read == "slot0" else {2, 4}), {0, 1, 2}
    assert res.written_slots == written and res.written_rows == rows
    assert_untouched(case.pool, res.pool, written)


@pytest.mark.parametrize("sentinel,pad_index", PADS, ids=PAD_IDS)
@pytest.mark.parametrize("write", WRITES)
def test_padded_write_slot(write, sentinel, pad_index):
    """Split pools: reads [2, 3, 4], writes [pad, 1, 4]. The padded write never stops the read or the output."""
    case = replace(padded_batch(pad_index), slots=torch.tensor([2, 3, 4]))
    plain = verify(case)  # final states of the three rows land in slots 2, 3, 4
    res = verify(case, write_slots=torch.tensor([pad_index, 1, 4]), pad=PadContract(sentinel=sentinel, write=write))
    assert torch.equal(res.output, plain.output)
    assert torch.equal(res.pool[1], plain.pool[3]) and torch.equal(res.pool[4], plain.pool[4])
    written = {1, 4} if write == "skip" else {0, 1, 4}
    if write == "slot0":
        assert torch.equal(res.pool[0], plain.pool[2])
    assert res.written_slots == written
    assert_untouched(case.pool, res.pool, written)


@pytest.mark.parametrize("read", ["slot0", "zero_state"])
@pytest.mark.parametrize("write", WRITES)
@pytest.mark.parametrize("sentinel,pad_index", PADS, ids=PAD_IDS)
def test_padded_read_with_split_pools_follows_the_write_slot(sentinel, pad_index, write, read):
    """Split pools (FlashInfer bf16 h0_out_indices, prefill output_state_indices): a padded read still reads slot 0
    or starts from a zero state, but the final state goes to the row's own write slot; a padded write slot there
    falls under the write behaviour."""
    case = padded_batch(pad_index)  # reads [2, pad, 4]
    pad = PadContract(sentinel=sentinel, read=read, write=write)
    alone = run_row(case, 1, case.pool if read == "slot0" else torch.zeros_like(case.pool[:1]), 0)
    res = verify(case, write_slots=torch.tensor([1, 3, 4]), pad=pad)
    assert torch.equal(res.output[1], alone.output[0])
    assert torch.equal(res.pool[3], alone.pool[0])
    assert res.written_slots == {1, 3, 4}
    padded_write = verify(case, write_slots=torch.tensor([1, pad_index, 4]), pad=pad)
    assert padded_write.written_slots == ({1, 4} if write == "skip" else {0, 1, 4})
    if write == "slot0":
        assert torch.equal(padded_write.pool[0], alone.pool[0])
    assert_untouched(case.pool, padded_write.pool, padded_write.written_slots)
