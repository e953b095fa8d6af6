"""Every bad input raises ValueError, and the message starts with the argument it is about."""

import re
from dataclasses import replace

import pytest
import torch
from oracle_helpers import F64, Shape, make_case, tokens, verify

from reference import LogGates, RawGates, commit, decode, gate_values, prefill

CASE = make_case(0, Shape(B=2, T=3, H=2, G=2, K=4, V=5), extra_slots=2)  # K != V: a transposed pool is wrong
S = CASE.shape
INTER = torch.zeros(S.B, S.T, S.HV, S.V, S.K, dtype=F64)
G = CASE.gates


def raw(**kw):
    return RawGates(**{"A_log": G.A_log, "a": G.a, "dt_bias": G.dt_bias, "b": G.b, **kw})


VERIFY_ERRORS = {  # id: (argument named first in the message, keyword overrides of verify)
    "q_rank_3": ("q", dict(case=replace(CASE, q=CASE.q[0]))),
    "k_wrong_K": ("k", dict(case=replace(CASE, k=CASE.k[..., :-1]))),
    "v_rank_3": ("v", dict(case=replace(CASE, v=CASE.v[0]))),
    "v_wrong_T": ("v", dict(case=replace(CASE, v=CASE.v[:, :-1]))),
    "heads_HV_not_multiple_of_H": ("q/k heads", dict(case=replace(CASE, v=CASE.v[:, :, :3]))),
    "read_slots_float": ("read_slots", dict(case=replace(CASE, slots=CASE.slots.double()))),
    "read_slots_wrong_length": ("read_slots", dict(case=replace(CASE, slots=CASE.slots[:1]))),
    "write_slots_float": ("write_slots", dict(write_slots=CASE.slots.float())),
    "token_slots_float": ("token_slots", dict(token_slots=torch.ones(S.B, S.T))),
    "token_slots_with_disable_state_update": (
        "token_slots",
        dict(token_slots=torch.ones(S.B, S.T, dtype=torch.long), disable_state_update=True),
    ),
    "intermediate_steps_lt_T": ("intermediate", dict(intermediate=INTER[:, :-1])),
    "intermediate_rows_out_of_range": (
        "intermediate",
        dict(intermediate_rows=torch.tensor([0, S.B]), intermediate=INTER),
    ),
    "intermediate_rows_float": (
        "intermediate_rows",
        dict(intermediate_rows=torch.tensor([0.0, 1.0]), intermediate=INTER),
    ),
    "intermediate_transposed": ("intermediate", dict(intermediate=INTER.transpose(-1, -2))),
    "pool_transposed": ("pool", dict(case=replace(CASE, pool=CASE.pool.transpose(-1, -2)))),
    "pool_rank_3": ("pool", dict(case=replace(CASE, pool=CASE.pool[0]))),
    "pool_vk_with_layout_kv": ("pool", dict(layout="kv")),
    "layout_string": ("layout", dict(layout="xy")),
    "gates_tuple": ("gates", dict(case=replace(CASE, gates=gate_values(G)))),
    "gate_a_shape": ("a", dict(case=replace(CASE, gates=raw(a=G.a[:, :-1])))),
    "gate_b_shape": ("b", dict(case=replace(CASE, gates=raw(b=G.b[0])))),
    "gate_A_log_shape": ("A_log", dict(case=replace(CASE, gates=raw(A_log=G.A_log[:-1])))),
    "gate_dt_bias_shape": ("dt_bias", dict(case=replace(CASE, gates=raw(dt_bias=G.dt_bias[None])))),
    "log_gate_g_shape": ("g", dict(case=replace(CASE, gates=LogGates(G.a[..., :1], G.b)))),
    "log_gate_beta_shape": ("beta", dict(case=replace(CASE, gates=LogGates(G.a, G.b[None])))),
}


def raises_naming(arg):
    """The message starts with "arg:"; a head mismatch names both head counts."""
    pattern = r"q/k heads H=\d+ and v heads HV=\d+" if arg == "q/k heads" else re.escape(arg) + ":"
    return pytest.raises(ValueError, match="^" + pattern)


@pytest.mark.parametrize("arg,kw", VERIFY_ERRORS.values(), ids=VERIFY_ERRORS.keys())
def test_bad_verify_input_raises_value_error_naming_it(arg, kw):
    kw = dict(kw)
    with raises_naming(arg):
        verify(kw.pop("case", CASE), **kw)


def test_decode_rejects_more_than_one_token():
    with raises_naming("q"):
        decode(*tokens(CASE, slice(0, 2)), CASE.pool, CASE.slots)


def packed():
    """CASE's tokens packed for prefill: [B * T, ...]."""
    flat = lambda x: x.reshape(S.B * S.T, *x.shape[2:])
    return flat(CASE.q), flat(CASE.k), flat(CASE.v), RawGates(G.A_log, flat(G.a), G.dt_bias, flat(G.b))


N_TOK = S.B * S.T
PREFILL_ERRORS = {
    "cu_seqlens_not_from_0": ("cu_seqlens", dict(cu_seqlens=torch.tensor([1, 3, N_TOK]))),
    "cu_seqlens_not_to_N_tok": ("cu_seqlens", dict(cu_seqlens=torch.tensor([0, 3, N_TOK - 1]))),
    "cu_seqlens_decreasing": ("cu_seqlens", dict(cu_seqlens=torch.tensor([0, 4, 2, N_TOK]))),
    "cu_seqlens_float": ("cu_seqlens", dict(cu_seqlens=torch.tensor([0.0, 3.0, N_TOK]))),
    "cu_seqlens_rank_2": ("cu_seqlens", dict(cu_seqlens=torch.tensor([[0, 3, N_TOK]]))),
    "cu_seqlens_empty": ("cu_seqlens", dict(cu_seqlens=torch.tensor([], dtype=torch.long))),
    "read_slots_vs_cu_seqlens": ("read_slots", dict(read_slots=CASE.slots[:1])),
    "q_rank_4": ("q", dict(q=CASE.q)),
    "v_wrong_N_tok": ("v", dict(v=packed()[2][:-1])),
    "heads_HV_not_multiple_of_H": ("q/k heads", dict(v=packed()[2][:, :3])),
}


@pytest.mark.parametrize("arg,kw", PREFILL_ERRORS.values(), ids=PREFILL_ERRORS.keys())
def test_bad_prefill_input_raises_value_error_naming_it(arg, kw):
    q, k, v, gates = packed()
    call = {
        **dict(
            q=q, k=k, v=v, gates=gates, cu_seqlens=torch.tensor([0, 3, N_TOK]), pool=CASE.pool, read_slots=CASE.slots
        ),
        **kw,
    }
    with raises_naming(arg):
        prefill(**call)


COMMIT_ERRORS = {
    "slots_float": ("slots", dict(slots=torch.tensor([1.0, 2.0]))),
    "accepted_float": ("accepted", dict(accepted=torch.tensor([1.0, 2.0]))),
    "accepted_wrong_length": ("accepted", dict(accepted=torch.tensor([1, 2, 3]))),
    "rows_wrong_length": ("rows", dict(rows=torch.tensor([0]))),
    "intermediate_wrong_state_shape": ("intermediate", dict(intermediate=INTER.transpose(-1, -2))),
}


@pytest.mark.parametrize("arg,kw", COMMIT_ERRORS.values(), ids=COMMIT_ERRORS.keys())
def test_bad_commit_input_raises_value_error_naming_it(arg, kw):
    call = {**dict(pool=CASE.pool, intermediate=INTER, slots=CASE.slots, accepted=torch.tensor([1, 2])), **kw}
    with raises_naming(arg):
        commit(**call)
