"""Agreement with fla-core's naive PyTorch references (fp32, K x V state, no GVA, no l2norm).

fla-core is a declared test dependency: if it cannot be imported these tests fail, they do not skip."""

import warnings

import pytest
import torch
from hypothesis import given
from oracle_helpers import PROPERTY, expand_heads, make_case, seeds, shapes, spec_gates, unit, verify

FP32_TOL = dict(rtol=1e-5, atol=1e-5)


def fla_naive():
    with warnings.catch_warnings():  # "Triton is not supported on current platform" on a CPU-only machine
        warnings.simplefilter("ignore")
        from fla.ops.gated_delta_rule import naive
    return naive


def fla_inputs(case):
    """Pre-normalised q/k expanded to HV heads, spec gates, and the initial states in K x V layout."""
    G = case.shape.G
    g, beta = spec_gates(case.gates)
    h0 = case.pool[case.slots].transpose(-1, -2)  # [B, HV, K, V]
    return expand_heads(unit(case.q), G), expand_heads(unit(case.k), G), case.v, g, beta, h0


def agrees(case, o: torch.Tensor, ht: torch.Tensor) -> None:
    """fla's output and final state (fp32, [B, HV, K, V]) are the oracle's within the fp32 tolerance."""
    res = verify(case)
    torch.testing.assert_close(o.double(), res.output, **FP32_TOL)
    torch.testing.assert_close(ht.double().transpose(-1, -2), res.pool[case.slots], **FP32_TOL)


def recurrent(q, k, v, g, beta, scale, h0):
    o, ht = fla_naive().naive_recurrent_gated_delta_rule(
        q, k, v, beta, g, scale=scale, initial_state=h0, output_final_state=True
    )
    assert o.dtype == torch.float32
    return o, ht


def chunk(q, k, v, g, beta, scale, h0):
    """The chunked (WY) reference, with a chunk size that splits T and pads its tail."""
    return fla_naive().naive_chunk_gated_delta_rule(
        q, k, v, g, beta, chunk_size=4, scale=scale, initial_state=h0, output_final_state=True
    )


@pytest.mark.parametrize("naive", [recurrent, chunk], ids=["recurrent", "chunk"])
@PROPERTY
@given(shape=shapes(), seed=seeds)
def test_matches_fla_naive(naive, shape, seed):
    case = make_case(seed, shape, extra_slots=1)
    q, k, v, g, beta, h0 = fla_inputs(case)
    o, ht = naive(q, k, v, g, beta, shape.K**-0.5, h0)
    agrees(case, o, ht)
