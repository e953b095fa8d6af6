"""The serving engines' index rules as data (`Engine`, `ENGINES`), and the contract edges a real engine produces or
nearly produces (`Edge`, `EDGES`).

A glue target (fuzz.model.support.Support.engine names its engine) is fuzzed with the slot maps its engine builds,
not with every map a kernel accepts: the strategies (fuzz.generate.strategies) read these rows. What an engine never
builds but nearly does (a padded batch past the verify scratch, an accepted count of 0, a request on the reserved
slot) is an edge: drawn on purpose now and then (Case.edge), and a failure on one is reported as a contract edge
with its row's text, apart from bugs (fuzz.run.failure_key, fuzz.suite.summary). Every rule cites the wheel line it
was read from (SGLang 0.5.23, vLLM 0.34.0; paths from the package root; shared/research/serving-glue.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Engine:
    """One engine's index rules for the GDN calls it makes (each field cites the wheel in `cite`).

    null:              the padding sentinel of a CUDA-graph padded row: -1 (SGLang's PAD_SLOT_ID) or 0 (vLLM's
                       NULL_BLOCK_ID).
    reserved:          the slot the engine never allocates to a request (both: 0); live slots are 1..pool-1.
    reserved_writable: a call may change the reserved slot (SGLang: slot 0 is the dummy write target of padded rows,
                       so its content is undefined after a call); False: it must stay bitwise unchanged (vLLM's null
                       block, which the kernels skip).
    scratch_rows:      verify writes a pool-scoped scratch of spec_size + 1 rows addressed by batch row (SGLang's
                       intermediate_ssm), spec_size >= the live requests; the extra row takes padded rows past it.
    accepted:          per-token slots (the block table's first T columns, Case.token_slots) and an accepted count
                       per request that selects the slot its starting state is read from (vLLM's
                       num_accepted_tokens); padded rows name the null slot in every column with accepted 1.
    tail_padding:      CUDA graphs pad at the tail: padded rows follow every live one; their query_start_loc rows are
                       zero-length while q/k/v keep B x T tokens.
    cite:              file:line in the wheel for each rule above.
    """

    name: str
    null: int
    reserved_writable: bool
    scratch_rows: bool
    accepted: bool
    cite: str
    reserved: int = 0
    tail_padding: bool = True


ENGINES: dict[str, Engine] = {
    "sglang": Engine(
        name="sglang",
        null=-1,
        reserved_writable=True,
        scratch_rows=True,
        accepted=False,
        cite="null: srt/layers/attention/hybrid_linear_attn_backend.py:626 (per-bs index buffers full of "
        "pad_slot_id = -1), :785 (replay writes mamba_indices[bs - num_padding:] = -1); reserved: "
        "srt/mem_cache/allocator/mamba.py:85-88 (clear() hands out 1..size: 'Slot 0 is reserved as a dummy write "
        "target for padded tokens'), hybrid_linear_attn_backend.py:187 (eager padded rows carry slot 0); "
        "scratch_rows: srt/mem_cache/memory_pool.py:866-890 (intermediate_ssm [layers, spec_size + 1, T, ...]), "
        "srt/layers/attention/linear/utils.py:125-157 (row = batch position, rows past the pool -> row pool_size); "
        "tail_padding: hybrid_linear_attn_backend.py:877-910 (padded query_start_loc rows repeat the last offset)",
    ),
    "vllm": Engine(
        name="vllm",
        null=0,
        reserved_writable=False,
        scratch_rows=False,
        accepted=True,
        cite="null: v1/attention/backends/utils.py:54-55 (PAD_SLOT_ID = -1, NULL_BLOCK_ID = 0); reserved: "
        "third_party/flash_linear_attention/ops/fused_recurrent.py:115, fused_sigmoid_gating.py:114 (state_idx <= 0 "
        "returns before any store); accepted: fused_recurrent.py:107-113 (i_t = num_accepted_tokens[n] - 1, an "
        "unmasked load of ssm_state_indices[n * stride + i_t]), :153-162 (token t stores to its own slot when > 0), "
        "v1/attention/backends/gdn_attn.py:463-465 (ssm_state_indices = block_table[:, :num_spec + 1]); "
        "tail_padding: gdn_attn.py:639, 671 (padded spec rows filled with NULL_BLOCK_ID), :680 "
        "(num_accepted_tokens of padded rows = 1)",
    ),
}


Expect = Literal["skip", "reject"]


@dataclass(frozen=True)
class Edge:
    """A contract edge: a call an engine produces or nearly produces that its contract does not plainly cover.

    id:       the Case.edge value (coordinate token `edge_<id>`, its '-' written as '_').
    engines:  the engines (ENGINES keys) whose targets draw it.
    ops:      the operations it applies to.
    contract: what the engine's contract says of it: the text a finding on it is reported with.
    why:      how a real engine produces it, or nearly does.
    expect:   what the oracle expects of the edge rows: "skip" (the row is skipped: no state I/O on a live slot, its
              output undefined, not judged) or "reject" (a clean error is the right answer).
    skip_ok:  with expect "reject": a skipped row is right as well (a kernel cannot raise; it can skip).
    cite:     file:line in the wheel.
    The oracle and the verdict need nothing of this row: a Case on an edge spells the expectation itself, its skipped
    rows naming the null slot as their read slot (the oracle's padding) or a slot whose content the engine leaves
    undefined (fuzz.targets.semantics.Semantics.scratch_slots: SGLang's slot 0), whose rows are not judged either.
    This row says why, for the report.
    """

    id: str
    engines: tuple[str, ...]
    ops: tuple[str, ...]
    contract: str
    why: str
    expect: Expect
    cite: str
    skip_ok: bool = False


def _accepted(id: str, contract: str, why: str) -> Edge:
    """An edge of vLLM's accepted counts: a clean rejection is right, a skipped row too (a kernel cannot raise); the
    bounded MTP port and the unmasked index load of the other kernels are where it is read."""
    cite = (
        "vllm third_party/flash_linear_attention/ops/fused_recurrent.py:107-113, fused_sigmoid_gating.py:106-112, "
        "fused_gdn_decode_post_conv_mtp.py:61-65"
    )
    return Edge(id, ("vllm",), ("decode", "verify"), contract, why, "reject", cite, skip_ok=True)


EDGES: dict[str, Edge] = {
    edge.id: edge
    for edge in (
        Edge(
            id="pad-past-scratch",
            engines=("sglang",),
            ops=("verify",),
            contract="the verify scratch has spec_size + 1 rows addressed by batch row; a CUDA-graph batch padded past "
            "them maps every row past the pool onto the extra row (a discard row): padded rows past the scratch "
            "write nothing outside it",
            why="warm-up and MLP-sync batches are padded past the pool capacity (DP attention ceil-aligns the eager "
            "warm-up batch), and the verify kernels index the scratch positionally up to that padded batch",
            expect="skip",
            cite="sglang srt/layers/attention/linear/utils.py:125-157 (build_verify_intermediate_state_indices)",
        ),
        _accepted(
            "accepted-zero",
            contract="num_accepted_tokens is 1..T for a live row and 1 for a padded one; 0 names no starting state "
            "(the kernel would read ssm_state_indices[n * stride - 1], the previous row's last slot)",
            why="a request whose draft was rejected outright, or a stale accepted count from a preempted request, "
            "is one subtraction away from 0; the MTP port bounds it (accepted > 0), the other kernels do not",
        ),
        _accepted(
            "accepted-past-T",
            contract="num_accepted_tokens is at most T (num_spec + 1, the block table columns passed); a larger count "
            "names no starting state (the kernel would read past the row: the next request's slot)",
            why="a count carried over from a step with more speculative tokens than this one (num_spec changed, or a "
            "decode after a verify) selects a column past the ones passed",
        ),
        Edge(
            id="slot-zero",
            engines=("sglang", "vllm"),
            ops=("decode", "verify", "prefill"),
            contract="slot 0 is never allocated: SGLang's dummy write target of padded rows (its content undefined), "
            "vLLM's null block (skipped); a request named on it gets no defined result: the row is skipped (vLLM: "
            "a request reading it is skipped, a token storing to it stores nothing)",
            why="eager padding maps req-pool row 0 to slot 0, and a slot map translated from a stale or unallocated "
            "entry lands on it",
            expect="skip",
            cite="sglang srt/mem_cache/allocator/mamba.py:85-88, srt/layers/attention/hybrid_linear_attn_backend.py:"
            "185-187; vllm v1/attention/backends/utils.py:55, fused_recurrent.py:115",
        ),
        Edge(
            id="empty-extend",
            engines=("sglang",),
            ops=("prefill",),
            contract="every live request of an extend carries at least one token (a prefix match stops one token short "
            "of the input; a decode row mixed into an extend carries one; an idle rank's dummy extend is one request "
            "of all the padded tokens): a live request of zero tokens is outside the contract; the glue may reject "
            "the call or leave the request's slot as it is (no tokens: no state change)",
            why="a request whose prompt is wholly cached is one off-by-one away from an empty extend, and the "
            "backend forwards query_start_loc unchecked; SGLang guards a zero-token extend only on HIP",
            expect="reject",
            cite="sglang srt/managers/schedule_batch.py:1766-1768 (max_prefix_len = input_len - 1), :3359 (mixed "
            "decode rows extend 1), srt/model_executor/forward_batch_info.py:1874-1890 (idle rank: one dummy "
            "request of num_tokens), srt/layers/attention/hybrid_linear_attn_backend.py:307-313 (query_start_loc "
            "from extend_start_loc and extend_seq_lens), srt/layers/attention/linear/gdn_backend.py:960-961 (the "
            "HIP-only zero-token guard)",
            skip_ok=True,
        ),
        Edge(
            id="flat-indices-multitoken",
            engines=("vllm",),
            ops=("verify",),
            contract="1-D ssm_state_indices ([N], block_table[:, 0]) come only with vLLM's non-spec decode, one token "
            "a request; the kernels read token t's slot at ssm_state_indices[n * stride + t] whatever the rank, so "
            "with T > 1 tokens each token's state lands in request n + t's slot (past the last request: past the "
            "tensor): such a call must be rejected",
            why="one query_lens == 1 classification (split_decodes_and_prefills, decode_threshold=1) stands between "
            "a multi-token row and the non-spec path, and the kernels take 1-D indices with any T unchecked "
            "(stride_indices_tok is passed and never read)",
            expect="reject",
            cite="vllm third_party/flash_linear_attention/ops/fused_recurrent.py:105-113, 153-162, 211-216; "
            "fused_sigmoid_gating.py:104-112, 157-166, 234-239; v1/attention/backends/gdn_attn.py:388-393, 406",
        ),
    )
}


def empty_extend(read_slots: tuple[int, ...], seqlens: tuple[int, ...], null: int) -> bool:
    """Whether a prefill names a live request (a slot other than the engine's null) with no tokens: the
    empty-extend edge, which strategies classify rather than draw."""
    return any(n == 0 and slot != null for slot, n in zip(read_slots, seqlens))


def edges_for(engine: str | None, op: str) -> tuple[Edge, ...]:
    """The edges a target of `engine` draws for `op` (none without an engine)."""
    return tuple(e for e in EDGES.values() if engine in e.engines and op in e.ops)
