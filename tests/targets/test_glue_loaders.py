"""The serving-glue loaders (fuzz.targets.sglang_glue_loader, fuzz.targets.vllm_loader) on the CPU: each loads, each
glue entry and kernel runs once on tiny shapes (Triton under TRITON_INTERPRET=1, FlashInfer on its CPU stand-in) and
agrees with the float64 oracle (reference) or a plain torch computation. Where the glue does something a fuzzer must
know about (a padding row that lands on a live slot), the test says so in its name and pins it.

SGLang and vLLM are declared test dependencies (scripts/install.sh): if they cannot be loaded these tests fail."""

import importlib
import sys

import pytest
import torch

import reference
from reference import LogGates, PadContract, RawGates

STANDIN = "fuzz.standins.flashinfer_glue_cpu"
VLLM_PAD = PadContract(sentinel="zero")  # vLLM: slot <= 0 is the null block
FP32 = dict(rtol=1e-4, atol=1e-4)
BF16 = dict(rtol=2e-2, atol=2e-2)


@pytest.fixture(scope="module", autouse=True)
def interpreted():
    """TRITON_INTERPRET=1 before triton is imported: Triton decides at import (its own @jit helpers, tl.sum's among
    them) and at each decoration whether a function is interpreted. The CPU profiles set it for a whole run
    (fuzz.suite.plugin); this sets it for a run of this file alone, which imports no triton at collection."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRITON_INTERPRET", "1")
        import triton.language as tl

        assert type(tl.sigmoid).__name__ == "InterpretedFunction", (
            "triton was imported before TRITON_INTERPRET=1 was set: run with --hypothesis-profile=ci or this file alone"
        )
        yield


@pytest.fixture(scope="module")
def sglang_loader():
    return importlib.import_module("fuzz.targets.sglang_loader")


@pytest.fixture(scope="module")
def glue_loader():
    return importlib.import_module("fuzz.targets.sglang_glue_loader")


@pytest.fixture(scope="module")
def vllm_loader():
    return importlib.import_module("fuzz.targets.vllm_loader")


@pytest.fixture(scope="module")
def glue(glue_loader):
    return glue_loader.load_sglang_glue()


@pytest.fixture(scope="module")
def vllm(vllm_loader):
    return vllm_loader.load_vllm_kernels()


def inputs(B, T, H, HV, K, V, P, dtype=torch.float32, pool_dtype=torch.float32, seed=0):
    """q, k [B, T, H, K], v [B, T, HV, V], a, b [B, T, HV] in `dtype`; A_log fp32, dt_bias fp32 [HV]; a pool of P."""
    torch.manual_seed(seed)
    return dict(
        q=torch.randn(B, T, H, K).to(dtype),
        k=torch.randn(B, T, H, K).to(dtype),
        v=torch.randn(B, T, HV, V).to(dtype),
        a=torch.randn(B, T, HV).to(dtype),
        b=torch.randn(B, T, HV).to(dtype),
        A_log=torch.randn(HV) * 0.5,
        dt_bias=torch.randn(HV) * 0.5,
        pool=(torch.randn(P, HV, V, K) * 0.1).to(pool_dtype),
    )


def packed(x):
    """[B, T, ...] -> [1, B * T, ...]: SGLang's glue takes the batch's tokens packed along one axis."""
    return x.reshape(1, -1, *x.shape[2:])


def tokens(x):
    return x.reshape(-1, *x.shape[2:])


def oracle(x, slots, **kwargs):
    return reference.verify(
        x["q"], x["k"], x["v"], RawGates(x["A_log"], x["a"], x["dt_bias"], x["b"]), x["pool"], slots, **kwargs
    )


def changed(before, after):
    return {i for i in range(before.shape[0]) if not torch.equal(before[i], after[i])}


def close(actual, expected, tol):
    torch.testing.assert_close(actual.double(), expected.double(), **tol)


# ---- loading -------------------------------------------------------------------------------------------------------
def test_the_loaders_report_what_they_loaded(glue, vllm):
    assert glue.version == "0.5.23" and glue.source_dir.name == "sglang"
    assert glue.FlashInferGDNKernel.__name__ == "FlashInferGDNKernel"
    assert glue.TritonGDNKernel.__name__ == "TritonGDNKernel"
    assert glue.scatter.__name__ == "fused_mamba_state_scatter_with_mask"
    assert vllm.version == "0.34.0" and vllm.source_dir.name == "vllm"
    assert vllm.mtp_decode.__name__ == "fused_gdn_decode_post_conv_mtp_triton"
    assert not any(name == "vllm.config" or name == "sglang.srt.server_args" for name in sys.modules)


def test_without_the_engines_each_loader_says_what_to_install(monkeypatch, sglang_loader, glue_loader, vllm_loader):
    monkeypatch.setattr(sglang_loader, "find_installed", lambda package: None)
    monkeypatch.setattr(vllm_loader, "find_installed", lambda package: None)
    monkeypatch.setattr(glue_loader, "load_sglang_kernels", sglang_loader.load_sglang_kernels.__wrapped__)
    with pytest.raises(sglang_loader.SglangUnavailable, match=r"sglang not installed: pip install --no-deps sglang=="):
        glue_loader.load_sglang_glue.__wrapped__()
    with pytest.raises(vllm_loader.VllmUnavailable, match=r"vllm not installed: pip install --no-deps vllm==0.34.0"):
        vllm_loader.load_vllm_kernels.__wrapped__()


# ---- SGLang Triton glue (H2 HV4 K16 V32, fp32 pool of 7 slots, the middle row CUDA-graph padding) ------------------
TRITON_SHAPE = dict(H=2, HV=4, K=16, V=32, P=7)
TRITON_SLOTS = torch.tensor([5, -1, 2], dtype=torch.int32)
LIVE = [0, 2]


def glue_decode(kernel, x, slots):
    """kernel.decode, one token per request, on a copy of the pool: (output [1, B, HV, V], the pool after)."""
    pool = x["pool"].clone()
    out = kernel.decode(
        *(packed(x[n]) for n in "qkv"),
        tokens(x["a"]),
        tokens(x["b"]),
        A_log=x["A_log"],
        dt_bias=x["dt_bias"],
        ssm_states=pool,
        cache_indices=slots,
        query_start_loc=torch.arange(len(slots) + 1, dtype=torch.int32),
    )
    return out, pool


def glue_verify(kernel, x, slots, scratch):
    """kernel.target_verify (topk 1) with scratch rows by batch position, on a copy of the pool."""
    B, T = x["q"].shape[:2]
    pool = x["pool"].clone()
    out = kernel.target_verify(
        x["A_log"],
        x["dt_bias"],
        *(packed(x[n]) for n in "qkv"),
        tokens(x["a"]),
        tokens(x["b"]),
        ssm_states=pool,
        cache_indices=slots,
        query_start_loc=torch.arange(0, B * T + 1, T, dtype=torch.int32),
        intermediate_states_buffer=scratch,
        intermediate_state_indices=torch.arange(B, dtype=torch.int32),
        cache_steps=T,
        retrieve_parent_token=None,
    )
    return out, pool


def test_triton_glue_decode_updates_the_live_slots_and_skips_the_padding_row(glue):
    x = inputs(3, 1, **TRITON_SHAPE)
    out, pool = glue_decode(glue.TritonGDNKernel(), x, TRITON_SLOTS)
    want = oracle(x, TRITON_SLOTS)
    assert out.shape == (1, 3, 4, 32) and changed(x["pool"], pool) == {2, 5}
    close(out[0, LIVE], want.output[LIVE, 0], FP32)
    close(pool, want.pool, FP32)


def test_triton_glue_packed_decode_agrees_with_its_decode(glue):
    x = inputs(3, 1, **TRITON_SHAPE)
    out, pool = glue_decode(glue.TritonGDNKernel(), x, TRITON_SLOTS)
    packed_pool = x["pool"].clone()
    mixed = torch.cat([x[n].reshape(3, -1) for n in "qkv"], dim=1)
    packed_out = glue.TritonGDNKernel().packed_decode(
        mixed,
        x["a"][:, 0],
        x["b"][:, 0],
        A_log=x["A_log"],
        dt_bias=x["dt_bias"],
        scale=16**-0.5,
        ssm_states=packed_pool,
        cache_indices=TRITON_SLOTS,
        num_v_heads=4,
        head_v_dim=32,
    )
    assert packed_out.shape == (1, 3, 4, 32) and changed(x["pool"], packed_pool) == {2, 5}
    close(packed_out[0, LIVE], out[0, LIVE], FP32)
    close(packed_pool, pool, FP32)


def test_triton_glue_verify_keeps_the_pool_and_fills_batch_rows_of_the_scratch(glue):
    """The scratch is pool-scoped (spec_size + 1 rows), addressed by batch position; the padding row runs from a zero
    state and its scratch row is written (serving-glue.md §2.3)."""
    B, T, P = 3, 4, TRITON_SHAPE["P"]
    x = inputs(B, T, **TRITON_SHAPE)
    scratch = torch.zeros(P + 1, T, 4, 32, 16)
    out, pool = glue_verify(glue.TritonGDNKernel(), x, TRITON_SLOTS, scratch)
    rows = torch.arange(B)
    want = oracle(
        x,
        TRITON_SLOTS,
        pad=PadContract(read="zero_state"),
        disable_state_update=True,
        intermediate=torch.zeros_like(scratch),
        intermediate_rows=rows,
    )
    assert torch.equal(pool, x["pool"]) and changed(torch.zeros_like(scratch), scratch) == {0, 1, 2}
    close(out[0].reshape(B, T, 4, 32), want.output, FP32)
    close(scratch, want.intermediate, FP32)


# ---- SGLang FlashInfer glue on the stand-in (K = V = 128, 6 slots, the middle row padding) --------------------------
FI_SHAPE = dict(H=1, HV=2, K=128, V=128, P=6)
FI_SLOTS = torch.tensor([4, -1, 2], dtype=torch.int32)
POOL_DTYPE = {9: torch.float32, 10: torch.bfloat16}
# where the glue sends the padding row: SM90 decode indexes the pool with -1 in Python (the last slot), SM90 extend
# remaps -1 to the last slot, SM100 passes -1 to FlashInfer's bf16 kernels (slot 0) and clamps it to 0 in extend
PADDING_SLOT = {9: 5, 10: 0}


def fi_inputs(arch, B, T):
    """bf16 inputs as the model gives them (dt_bias in the model dtype, A_log fp32), the pool in the arch's dtype."""
    x = inputs(B, T, **FI_SHAPE, dtype=torch.bfloat16, pool_dtype=POOL_DTYPE[arch])
    return {**x, "dt_bias": x["dt_bias"].bfloat16()}


@pytest.mark.parametrize("arch", [9, 10])
def test_flashinfer_glue_decode_sends_the_padding_row_to_a_pool_slot(glue, arch):
    """SM90: `ssm_states[cache_indices]` with -1 reads and writes the pool's last slot (a live slot in SGLang, whose
    allocator hands out 1..size of size + 1); SM100: FlashInfer's bf16 kernel reads and writes slot 0."""
    x = fi_inputs(arch, 3, 1)
    kernel = glue.flashinfer_kernel(arch, api=STANDIN)
    out, pool = glue_decode(kernel, x, FI_SLOTS)
    wrapped = torch.tensor([4, PADDING_SLOT[arch], 2])
    want = oracle(x, wrapped)
    assert kernel.use_state_pool == (arch == 10) and changed(x["pool"], pool) == {4, PADDING_SLOT[arch], 2}
    close(out[0], want.output[:, 0], BF16)
    close(pool, want.pool, BF16)


@pytest.mark.parametrize("arch", [9, 10])
def test_flashinfer_glue_verify_keeps_the_pool_and_fills_batch_rows(glue, arch):
    """SM90 passes the whole pool-scoped scratch and its fp32 MTP skips the padding row; SM100 passes scratch[:B] to
    the bf16 MTP, which runs the padding row from slot 0."""
    B, T, P = 3, 3, FI_SHAPE["P"]
    x = fi_inputs(arch, B, T)
    scratch = torch.zeros(P + 1, T, 2, 128, 128, dtype=POOL_DTYPE[arch])
    out, pool = glue_verify(glue.flashinfer_kernel(arch, api=STANDIN), x, FI_SLOTS, scratch)
    pad = PadContract(read="slot0") if arch == 10 else PadContract()
    want = oracle(
        x, FI_SLOTS, pad=pad, disable_state_update=True, intermediate=torch.zeros_like(scratch), intermediate_rows=None
    )
    rows = [0, 1, 2] if arch == 10 else LIVE
    assert torch.equal(pool, x["pool"]) and changed(torch.zeros_like(scratch), scratch) == set(rows)
    close(out[0].reshape(B, T, 2, 128)[rows], want.output[rows], BF16)
    close(scratch, want.intermediate, BF16)


@pytest.mark.parametrize("arch", [9, 10])
def test_flashinfer_glue_extend_writes_the_padding_row_back_to_a_pool_slot(glue, arch):
    """Every row is written back with index_copy_, the padding row to the last slot (SM90) or slot 0 (SM100)."""
    lengths = [2, 3, 1]
    cu = torch.tensor([0, 2, 5, 6], dtype=torch.int32)
    x = fi_inputs(arch, 1, sum(lengths))
    g, beta = -torch.rand(1, 6, 2), torch.rand(1, 6, 2)
    pool = x["pool"].clone()
    out, _, checkpoints = glue.flashinfer_kernel(arch, api=STANDIN).extend(
        *(x[n] for n in "qkv"), g, beta, ssm_states=pool, cache_indices=FI_SLOTS, query_start_loc=cu
    )
    slots = torch.tensor([4, PADDING_SLOT[arch], 2])
    want = reference.prefill(*(x[n][0] for n in "qkv"), LogGates(g[0], beta[0]), cu, x["pool"], slots)
    assert checkpoints is None and changed(x["pool"], pool) == set(slots.tolist())
    close(out[0], want.output, BF16)
    close(pool, want.pool, BF16)


def test_flashinfer_glue_construction_leaves_the_process_as_it_was(glue):
    """The stand-in fills gdn_flashinfer's lazy-import cache and the device answers SM100 only while constructing;
    nothing goes under flashinfer.* in sys.modules, where the project's FlashInfer family would find it."""
    module = glue.flashinfer_glue
    cache = {name: getattr(module, name) for name in dir(module) if name.startswith("_flashinfer_")}
    capability, flashinfer = torch.cuda.get_device_capability, flashinfer_modules()
    glue.flashinfer_kernel(10, api=STANDIN)
    assert torch.cuda.get_device_capability is capability
    assert {name: getattr(module, name) for name in cache} == cache
    assert flashinfer_modules() == flashinfer


def flashinfer_modules():
    return {name for name in sys.modules if name.split(".")[0] == "flashinfer"}


def test_flashinfer_glue_refuses_what_it_cannot_build(glue, sglang_loader, monkeypatch):
    with pytest.raises(sglang_loader.SglangUnavailable, match="arch below|not available"):
        glue.flashinfer_kernel(8, api=STANDIN)  # the glue's own rule: FlashInfer GDN needs SM90+
    with pytest.raises(sglang_loader.SglangUnavailable, match="lacks gated_delta_rule_mtp_bf16"):
        glue.flashinfer_kernel(10, api="fuzz.standins.flashinfer_cpu")
    if not torch.cuda.is_available():
        with pytest.raises(sglang_loader.SglangUnavailable, match="needs a CUDA GPU .* api='fuzz.standins"):
            glue.flashinfer_kernel(9)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    with pytest.raises(sglang_loader.SglangUnavailable, match="SM100 cannot be built on this SM90 GPU"):
        glue.flashinfer_kernel(10)


# ---- SGLang's commit after verify ----------------------------------------------------------------------------------
def test_the_commit_kernel_launched_on_the_cpu_scatters_the_accepted_steps(glue):
    """pool[:, dst[i]] = scratch[:, row[i], step[i]] for valid rows; step < 0, dst / row / step out of range skip."""
    torch.manual_seed(0)
    layers, P, R, T = 2, 7, 4, 3
    pool, scratch = torch.randn(layers, P, 2, 8, 4), torch.randn(layers, R, T, 2, 8, 4)
    dst = torch.tensor([2, 4, -1, 6, 5, 3, 1])
    step = torch.tensor([1, -1, 0, 3, 2, 0, 2])
    rows = torch.tensor([0, 1, 2, 2, 3, 4, 3])  # row 4 is out of range
    want = pool.clone()
    for i in (0, 4, 6):
        want[:, dst[i]] = scratch[:, rows[i], step[i]]
    committed = pool.clone()
    glue.launch_scatter(committed, scratch, dst, step, rows)
    assert torch.equal(committed, want)
    default_rows = pool.clone()  # source rows default to the request's position
    glue.launch_scatter(default_rows, scratch, dst[:4], step[:4])
    assert changed(pool[0], default_rows[0]) == {2} and torch.equal(default_rows[:, 2], scratch[:, 0, 1])
    with pytest.raises(ValueError, match="only supports CUDA/XPU"):
        glue.scatter(pool.clone(), scratch, dst, step, rows)  # why launch_scatter exists


# ---- vLLM 0.34.0 spec-decode kernels (H1 HV2 K16 V32, 3 requests x 4 tokens, pool 16, slot 0 the null block) ------
VLLM_SHAPE = dict(H=1, HV=2, K=16, V=32, P=16)
TOKEN_SLOTS = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]], dtype=torch.int32)
ACCEPTED = torch.tensor([1, 2, 4], dtype=torch.int32)


def vllm_expected(x, token_slots, accepted, gates):
    """Each request starts from the slot of its last accepted token and stores every token's state in its own slot."""
    reads = token_slots[torch.arange(3), accepted.long() - 1]
    return reference.verify(*(x[n] for n in "qkv"), gates, x["pool"], reads, token_slots=token_slots, pad=VLLM_PAD)


def vllm_sigmoid(vllm, x, slots, accepted):
    """fused_sigmoid_gating_delta_rule_update as the Qwen GDN layer calls it for spec decode, on a copy of the pool:
    (output [1, tokens, HV, V], the pool after)."""
    B, T = x["q"].shape[:2]
    pool = x["pool"].clone()
    out, final = vllm.sigmoid_gating_update(
        A_log=x["A_log"],
        a=tokens(x["a"]),
        b=tokens(x["b"]),
        dt_bias=x["dt_bias"],
        q=packed(x["q"]),
        k=packed(x["k"]),
        v=packed(x["v"]),
        initial_state=pool,
        inplace_final_state=True,
        cu_seqlens=torch.arange(0, B * T + 1, T, dtype=torch.int32),
        ssm_state_indices=slots,
        num_accepted_tokens=accepted,
        use_qk_l2norm_in_kernel=True,
    )
    assert final is pool
    return out, pool


def test_vllm_sigmoid_gating_update_reads_the_accepted_slot_and_writes_one_slot_per_token(vllm):
    x = inputs(3, 4, **VLLM_SHAPE)
    out, pool = vllm_sigmoid(vllm, x, TOKEN_SLOTS, ACCEPTED)
    want = vllm_expected(x, TOKEN_SLOTS, ACCEPTED, RawGates(x["A_log"], x["a"], x["dt_bias"], x["b"]))
    assert changed(x["pool"], pool) == set(range(1, 13))
    close(out[0], tokens(want.output), FP32)
    close(pool, want.pool, FP32)


def test_vllm_fused_recurrent_skips_a_null_block_row_and_leaves_its_slots(vllm):
    x = inputs(3, 4, **VLLM_SHAPE)
    g, beta = -torch.rand(3, 4, 2), torch.rand(3, 4, 2)
    slots = TOKEN_SLOTS.clone()
    slots[2] = 0  # CUDA-graph padding: the null block, one accepted token
    accepted = torch.tensor([1, 2, 1], dtype=torch.int32)
    pool = x["pool"].clone()
    out, _ = vllm.fused_recurrent(
        q=packed(x["q"]),
        k=packed(x["k"]),
        v=packed(x["v"]),
        g=packed(g),
        beta=packed(beta),
        initial_state=pool,
        inplace_final_state=True,
        cu_seqlens=torch.arange(0, 13, 4, dtype=torch.int32),
        ssm_state_indices=slots,
        num_accepted_tokens=accepted,
        use_qk_l2norm_in_kernel=True,
    )
    want = vllm_expected(x, slots, accepted, LogGates(g, beta))
    assert changed(x["pool"], pool) == set(range(1, 9))
    close(out[0, :8], tokens(want.output)[:8], FP32)  # the padding row's output is new_empty: undefined
    close(pool, want.pool, FP32)


def test_vllm_mtp_port_equals_sigmoid_gating_then_the_gated_rmsnorm(vllm):
    """The Triton MTP port (ROCm's route) runs under the interpreter; V must be a power of 2 >= 64. Its null-block row
    (the last) gets a zero output, where fused_sigmoid_gating leaves new_empty memory."""
    H, HV, K, V, T = 1, 2, 16, 64, 3
    x = inputs(3, T, H, HV, K, V, P=16)
    slots, accepted = TOKEN_SLOTS[:, :T].contiguous(), torch.tensor([3, 2, 1], dtype=torch.int32)
    slots[2] = 0
    cu = torch.arange(0, 3 * T + 1, T, dtype=torch.int32)
    z, weight = torch.randn(3 * T, HV, V), torch.rand(V) + 0.5
    port_pool, out = x["pool"].clone(), torch.empty(3 * T, HV, V)
    mixed = torch.cat([tokens(x[n]).reshape(3 * T, -1) for n in "qkv"], dim=1)
    vllm.mtp_decode(
        mixed, tokens(x["a"]), tokens(x["b"]), x["A_log"], x["dt_bias"], slots, cu, accepted, port_pool, z, weight,
        out, K**-0.5, 1e-6, "silu",
    )  # fmt: skip
    core, pool = vllm_sigmoid(vllm, x, slots, accepted)
    normed = vllm.gated_rmsnorm(core[0], weight, None, z=z, eps=1e-6, norm_before_gate=True, activation="silu")
    assert changed(x["pool"], port_pool) == {1, 2, 3, 5, 6, 7}
    close(port_pool, pool, FP32)
    close(out[: 2 * T], normed[: 2 * T], FP32)
    assert not out[2 * T :].any()


def test_vllm_gated_rmsnorm_is_rmsnorm_times_the_silu_gate(vllm):
    torch.manual_seed(0)
    x, z, weight = torch.randn(6, 2, 64), torch.randn(6, 2, 64), torch.rand(64) + 0.5
    out = vllm.gated_rmsnorm(x, weight, None, z=z, eps=1e-6, norm_before_gate=True, activation="silu")
    close(out, x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight * torch.nn.functional.silu(z), FP32)
