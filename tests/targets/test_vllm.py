"""The vLLM targets (fuzz.targets.vllm) on hand-written cases, under the Triton interpreter: each adapter's call gives
the oracle's answer as the fuzzer judges it (accepted counts 1, 2 and T; a CUDA-graph padded row on the null block,
whose output is not judged and whose slots stay untouched); the accepted count selects the read slot; what the
kernels do on the contract edges (an accepted count of 0 or past T reads another request's slot through the unmasked
index load, serving-glue.md §3.2; 1-D indices with several tokens a request write the next requests' slots), and
that the MTP port bounds the count; and the MTP pair's differential, reported after the standard verdict.

vLLM is a declared test dependency (scripts/install.sh): if it cannot be loaded these tests fail."""

from types import SimpleNamespace

import pytest
import torch

import reference
from fuzz.generate.materialize import materialize
from fuzz.model.case import Case
from fuzz.run.harness import check
from fuzz.targets.registry import TARGETS
from fuzz.targets.vllm import MTP, VLLM
from reference import RawGates
from tests.targets.test_glue_loaders import interpreted  # noqa: F401 (autouse: TRITON_INTERPRET=1 for this module)

BY_NAME = {t.name: t for t in TARGETS}
KERNELS = ("vllm-recurrent", "vllm-sigmoid")
VLLM_TARGETS = (*KERNELS, "vllm-mtp")
TOKEN_SLOTS = ((1, 2, 3), (4, 5, 6), (7, 8, 9))


def spec_case(accepted, T=3, V=16, padded=0, **fields) -> Case:
    """A verify as vLLM's spec decode builds it: request n on slots TOKEN_SLOTS[n][:T], its read slot the column of
    its accepted count; `padded` rows at the tail on the null block in every column, accepted 1."""
    rows = [row[:T] for row in TOKEN_SLOTS[: len(accepted)]]
    rows += [(0,) * T] * padded
    accepted = tuple(accepted) + (1,) * padded
    reads = tuple(row[a - 1] for row, a in zip(rows, accepted))
    base = dict(op="verify", H=1, HV=2, K=8, V=V, T=T, pool=12, seed=3, null=0)
    return Case(read_slots=reads, token_slots=tuple(rows), accepted=accepted, **{**base, **fields})


def mtp_case(accepted, **fields) -> Case:
    return spec_case(accepted, V=64, **fields)  # the MTP port takes V a power of 2 >= 64


def passed(target: str, case: Case):
    result = check(BY_NAME[target], case, "cpu")
    assert result.failure is None, result.failure.message
    return result


def called(target: str, case: Case):
    """(tensors as built, output, pool after) of the target's call on the case, outside the verdict."""
    t = materialize(case, "cpu")
    before = t.pool.view.clone()
    out = BY_NAME[target].call(case, t)
    return SimpleNamespace(t=t, before=before, out=out, pool=t.pool.view)


def changed(before, after) -> set[int]:
    return {i for i in range(before.shape[0]) if not torch.equal(before[i], after[i])}


def from_slot(run, n: int, slot: int, scatter: tuple[int, ...], pool=None):
    """The oracle's output [T, HV, V] and per-token states [T, ...] of request n started from `slot` of `pool` (the
    pool before the call by default; float64), its token states scattered to `scatter` in a copy of it."""
    t = run.t
    one = lambda x: x[n : n + 1]
    got = reference.verify(
        one(t.q), one(t.k), one(t.v), RawGates(t.A_log, one(t.a), t.dt_bias, one(t.b)),
        (run.before if pool is None else pool).double(),
        torch.tensor([slot]), token_slots=torch.tensor([scatter]),
    )  # fmt: skip
    return got.output[0], got.pool[list(scatter)]


# ---- agreement with the oracle ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("target", VLLM_TARGETS)
@pytest.mark.parametrize("accepted", [(1, 1), (2, 2), (3, 3), (1, 3)], ids=lambda a: f"acc{list(a)}")
def test_each_adapter_gives_the_oracles_answer(target, accepted):
    case = (mtp_case if target == "vllm-mtp" else spec_case)(accepted)
    passed(target, case)
    run = called(target, case)
    assert changed(run.before, run.pool) == {s for row in case.token_slots for s in row}  # each token its own slot


@pytest.mark.parametrize("target", VLLM_TARGETS)
def test_a_padded_null_block_row_is_not_judged_and_leaves_every_slot(target):
    """The padded row's query_start_loc row is zero-length: no state I/O; its output rows are undefined (new_empty
    memory for the kernels, left as the caller had them by the MTP port), so the verdict skips them."""
    case = (mtp_case if target == "vllm-mtp" else spec_case)((2, 3), padded=1)
    result = passed(target, case)
    assert "padded rows yes" in " ".join(result.events)
    run = called(target, case)
    assert 0 not in changed(run.before, run.pool) and changed(run.before, run.pool) == set(range(1, 7))


@pytest.mark.parametrize("target", KERNELS)
def test_the_non_spec_decode_passes_flat_indices_without_accepted_counts(target, monkeypatch):
    seen = []
    monkeypatch.setattr(VLLM, "tap", lambda api: SimpleNamespace(**{n: recorder(api, n, seen) for n in vars(api)}))
    case = Case(op="decode", H=1, HV=2, K=8, V=16, T=1, pool=8, read_slots=(3, 5, 0), seed=1, null=0)
    passed(target, case)
    kwargs = seen[0]
    assert kwargs["ssm_state_indices"].tolist() == [3, 5, 0] and kwargs["num_accepted_tokens"] is None
    assert kwargs["cu_seqlens"].tolist() == [0, 1, 2, 2]  # the padded tail row zero-length


def recorder(api, name, seen):
    function = getattr(api, name)
    if not callable(function):
        return function

    def record(*args, **kwargs):
        seen.append(kwargs)
        return function(*args, **kwargs)

    return record


@pytest.mark.parametrize("target", KERNELS)
def test_the_accepted_count_selects_the_read_slot(target):
    """Request 0's output follows the slot in the column of its accepted count, and no other column's."""
    for accepted in (1, 2, 3):
        case = spec_case((accepted, 1))
        run = called(target, case)
        for column, slot in enumerate(case.token_slots[0]):
            want, _ = from_slot(run, 0, slot, case.token_slots[0])
            close = torch.allclose(run.out[0].double(), want, rtol=2e-2, atol=2e-2)
            assert close == (column == accepted - 1), (accepted, column)


# ---- contract edges --------------------------------------------------------------------------------------------------
# request 1 on the edge: (accepted counts, the slot the unmasked load reads, whether its request has written it
# then: under the interpreter the requests run in turn; on a GPU the two race)
EDGE_CASES = {
    "accepted-zero": ((3, 0, 2), TOKEN_SLOTS[0][2], True),  # ssm_state_indices[1 * T - 1]: request 0's last column
    "accepted-past-T": ((3, 5, 2), TOKEN_SLOTS[2][1], False),  # ssm_state_indices[1 * T + 4]: request 2's column 1
}


def edge_case(edge: str) -> Case:
    accepted = EDGE_CASES[edge][0]
    case = spec_case((1, 1, 1))
    reads = tuple(row[a - 1] if 1 <= a <= case.T else 0 for row, a in zip(case.token_slots, accepted))
    return case.replace(accepted=accepted, read_slots=reads, edge=edge)


@pytest.mark.parametrize("target", KERNELS)
@pytest.mark.parametrize("edge", EDGE_CASES)
def test_an_accepted_count_out_of_range_reads_another_requests_slot(target, edge):
    """The kernels load ssm_state_indices[n * stride + accepted - 1] unmasked: request 1 starts from a slot of
    request 0 or 2 (as that request left it, or before) and writes its own token slots from there, where the contract
    has it skipped. The fuzzer reports the untouched slots written, on the edge the case probes."""
    case, (_, neighbour, written) = edge_case(edge), EDGE_CASES[edge]
    run = called(target, case)
    _, states = from_slot(run, 1, neighbour, case.token_slots[1], run.pool if written else None)
    torch.testing.assert_close(run.pool[list(case.token_slots[1])].double(), states, rtol=1e-4, atol=1e-4)
    result = check(BY_NAME[target], case, "cpu")
    assert result.failure.kind == "PoolCorruption" and result.failure.key.edge == edge  # a contract edge, not a bug
    assert "pool slot 4 changed but the contract leaves it untouched" in result.failure.message


@pytest.mark.parametrize("edge", EDGE_CASES)
def test_the_mtp_port_bounds_the_accepted_count(edge):
    """has_src = 0 < accepted <= columns: the row reads the null slot instead, writes zeros and no state."""
    case = edge_case(edge).replace(V=64)
    passed("vllm-mtp", case)
    run = called("vllm-mtp", case)
    assert changed(run.before, run.pool) == {1, 2, 3, 7, 8, 9} and not run.t.output.view[1].any()  # request 1: none


@pytest.mark.parametrize("target", KERNELS)
def test_flat_indices_with_several_tokens_write_the_next_requests_slots(target):
    """The non-spec path (1-D ssm_state_indices) with T > 1: token t of request n stores its state at entry n + t,
    the slot of request n + t, past the last request past the tensor (the adapter puts the pool's first guard slot
    there). vLLM never builds the call: the flat-indices-multitoken edge, reported as the write outside the pool."""
    case = Case(op="verify", H=1, HV=2, K=8, V=16, T=3, pool=8, read_slots=(2,), seed=1, null=0)
    case = case.replace(edge="flat-indices-multitoken")
    run = called(target, case)
    _, states = from_slot(run, 0, 2, (2, 3, 4))  # the states after tokens 0, 1, 2
    guard = run.t.pool.full[run.t.pool.lead + case.pool]
    torch.testing.assert_close(run.pool[2].double(), states[0], rtol=1e-4, atol=1e-4)  # not the final state
    torch.testing.assert_close(guard.double(), states[2], rtol=1e-4, atol=1e-4)  # entries 1, 2 name the guard
    result = check(BY_NAME[target], case, "cpu")
    assert result.failure.kind == "GuardBreach" and result.failure.key.edge == "flat-indices-multitoken"


# ---- the MTP pair ----------------------------------------------------------------------------------------------------
def with_port(monkeypatch, port):
    """The family's API with the MTP port replaced by port(real_port, **kwargs) (a mutant)."""
    monkeypatch.setattr(
        VLLM, "tap", lambda api: SimpleNamespace(**{**vars(api), MTP: lambda **kw: port(getattr(api, MTP), **kw)})
    )


def test_the_mtp_pair_reports_a_disagreement_of_the_norm(monkeypatch):
    with_port(monkeypatch, lambda real, **kw: real(**{**kw, "norm_eps": 1.0}))
    result = check(BY_NAME["vllm-mtp"], mtp_case((2, 3)), "cpu")
    assert result.failure.kind == "Disagreement", result.failure and result.failure.message
    assert "MTP port vs sigmoid gating + RMSNorm: error above the pair's bound" in result.failure.cause


def test_the_mtp_pair_reports_a_wrong_state_before_the_disagreement(monkeypatch):
    """A port that ignores the accepted counts (reads column 0) gets the states and the output wrong: the verdict's
    StateMismatch is the finding, the disagreement it also causes comes after it."""
    with_port(monkeypatch, lambda real, **kw: real(**{**kw, "num_accepted_tokens": kw["num_accepted_tokens"] * 0 + 1}))
    result = check(BY_NAME["vllm-mtp"], mtp_case((2, 3)), "cpu")
    assert result.failure.kind == "StateMismatch", result.failure and result.failure.message
