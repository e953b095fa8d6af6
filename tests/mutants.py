"""Planted bugs for the fuzzer's self-test, each with ONE seam broken the way shipped code broke it; module-level
instances are override specs. Two kinds:
- kernel mutants: the correct FlashInfer CPU stand-in with one defect (`overridden({"flashinfer":
  "tests.mutants:unguarded_pad_slot"})`; tests/suite/test_mutants.py);
- serving-glue mutants: the installed engine code with one index defect in its Python, its Triton kernels the real
  ones (`--gdn-target sglang-glue=tests.mutants:glue_pad_wrapped_onto_last_slot`, `vllm=tests.mutants:...`;
  tests/suite/test_glue_mutants.py). They declare INSTALLED_TRITON, so the interpreter's semantics row still holds."""

from __future__ import annotations

import functools

import torch

from fuzz.standins.flashinfer_cpu import FlashInferCPU


class UnguardedPadSlot(FlashInferCPU):
    """The `idx >= 0` guard is gone: a padded row (-1) runs, reading and writing pool[-1] (PyTorch wraps to the
    last slot; a CUDA kernel touches the bytes before the pool). Incident class: a padding sentinel used as an
    index (SGLang's SM90 decode once remapped -1 to the last slot and wrote it back)."""

    def read_slot(self, path, idx):
        return idx, torch.ones_like(idx, dtype=torch.bool)


class InterRowBySlot(FlashInferCPU):
    """Intermediate states go to buffer row = pool slot instead of batch row. Incident class: SGLang's
    pool-scoped speculative buffer vs FlashInfer's batch-indexed contract (the `[:batch_size]` slicing fix)."""

    def inter_row(self, rows, slots):
        return slots


class GvaHeadModulo(FlashInferCPU):
    """GVA head map hv % H instead of hv // (HV // H): value heads read the wrong q/k head once HV > H > 1.
    Incident class: repeat vs repeat_interleave head grouping mismatch between kernel and model."""

    def head_map(self, H, HV):
        super().head_map(H, HV)  # keep the clean HV % H != 0 rejection: only the mapping is wrong
        return torch.arange(HV) % H


class WriteBackWhenDisabled(FlashInferCPU):
    """disable_state_update is ignored: the verify pass commits its final state before acceptance.
    Incident class: speculative verify corrupting the pool (gated_delta_rule_mtp's None default trap)."""

    def should_write_back(self, disable_state_update, scatter):
        return not scatter


class Fp16BitcastAsBf16(FlashInferCPU):
    """fp16 inputs are reinterpreted as bf16 bits (x.view(bfloat16)) instead of converted. Incident class:
    pre-0.7.4 kernels assumed bf16 inputs; fp16 q/k/v/a/b were read as bf16 garbage."""

    def to_bf16(self, x):
        return x.view(torch.bfloat16) if x.dtype == torch.float16 else super().to_bf16(x)


class OutputBeforeUpdate(FlashInferCPU):
    """o_t = g_t S_{t-1} q_t: the output reads the decayed state before the delta-rule update. Incident class:
    statement order in a fused recurrent kernel (output dot product hoisted above the rank-1 update)."""

    def step(self, S, q, k, v, g, beta):
        S_next, _ = super().step(S, q, k, v, g, beta)
        return S_next, torch.einsum("rhvk,rhk->rhv", S * g[..., None, None], q)


class SoftplusClampedAtThreshold(FlashInferCPU):
    """Above the threshold softplus returns the threshold (min(log1p(exp x), 20)) instead of x itself: exact up
    to a + dt_bias = 20, too little decay past it. Incident class: softplus threshold (softplus_beta=1,
    threshold=20 in the API) mis-applied in a hand-written kernel."""

    def softplus(self, x):
        return torch.where(x > self.SOFTPLUS_THRESHOLD, self.SOFTPLUS_THRESHOLD, torch.log1p(torch.exp(x)))


class StridedPoolLostWrite(FlashInferCPU):
    """Stores into pool.contiguous(): on a padded-stride pool that is a copy and the write-back is lost.
    Incident class: non-contiguous state pools (FlashInfer's stride-aware 4D pool indexing, PR #3268)."""

    def store_pool(self, pool, slots, S):
        super().store_pool(pool.contiguous(), slots, S)


class InterStepOffByOne(FlashInferCPU):
    """From step 4 on, the checkpoint lands one step early: step 4 overwrites 3 and step 4 stays unwritten.
    Incident class: the T > 4 path beyond the old 4-token bf16 MTP kernels."""

    def inter_step(self, t, T):
        return t - 1 if t >= 4 else t


class PaddedOutputNotZeroed(FlashInferCPU):
    """fp32 T=1 decode leaves skipped rows of the caller's output buffer as they were, where 0.7.4 writes 0.
    Incident class: padded outputs left as garbage (FlashInfer RFC #2687 / PR #2793)."""

    def pad_output(self, out, rows):
        pass


class PaddedOutputRewritten(FlashInferCPU):
    """fp32 MTP writes NaN into the output rows of padded requests, which the contract leaves untouched (the NaN a
    state read from before the pool gives). Incident class: FlashInfer 0.7.4 gated_delta_rule_mtp rewriting padded
    output rows (corpus/flashinfer-mtp-fp32-verify-PoolCorruption-0.json): NaN stays NaN, only its bits change."""

    def _run(self, path, q, k, v, pool, read_idx, *args, **kwargs):
        out = super()._run(path, q, k, v, pool, read_idx, *args, **kwargs)
        if path == "mtp":
            out[read_idx < 0] = float("nan")
        return out


class CompileKeyShapeOnly(FlashInferCPU):
    """The compile-cache key is the shape only: dtypes and constexprs (dt_bias dtype, scale, l2norm) are left
    out, so a later call with another value reuses a stale kernel. Incident class: CuTe DSL compile caches
    keyed without every constexpr. Cases always carry an fp32 dt_bias, so the staleness shows via scale/l2norm;
    the cache lives on the instance and persists across calls, as a process-wide cache does."""

    def compile_key(self, spec):
        return tuple((k, spec[k]) for k in ("path", "T", "H", "HV", "K", "V"))


class SplitWriteIgnored(FlashInferCPU):
    """output_state_indices is ignored: the state is written back in place to the read slot. Incident class:
    split read/write pools (FlashInfer PR #2905) on a kernel that only knows one index array."""

    def write_slot(self, path, read, write):
        return super().write_slot(path, read, None)


class PrefillSkippedWriteWraps(FlashInferCPU):
    """Prefill stores the final state of a row whose write id is -1 instead of skipping it: PyTorch wraps to the last
    pool slot (a CUDA kernel writes the bytes before the pool). Incident class: a padding sentinel used as an index
    (output_state_indices -1 on the write side of a split prefill pool)."""

    def write_slot(self, path, read, write):
        if path != "prefill" or write is None:
            return super().write_slot(path, read, write)
        return write, torch.ones_like(write, dtype=torch.bool)


class StridedPoolCapacityBakedIn(FlashInferCPU):
    """A strided pool's layout is compiled in whole, its capacity included, but the compile key holds only its
    strides: a later call on a pool of another capacity gets that kernel, whose shape check rejects it. Incident
    class: FlashInfer 0.7.2.post1 gated_delta_rule_mtp (pool_strides_key without h0_source.shape[0]; 0.7.4 keys it).
    Only a case's warm call (Case.warm_pool, GPU budgets) makes it deterministic: tests/export/test_export.py proves
    it on a fixed case; the CPU fuzz self-test (tests/suite/test_mutants.py) leaves it out. Serving sequences find it
    as two calls (tests/run/test_serving.py)."""

    def _run(self, path, q, k, v, pool, *args, **kwargs):
        if not pool.is_contiguous():
            baked = self.kernels.setdefault(("strided pool", path, pool.stride()), pool.shape[0])
            if baked != pool.shape[0]:
                raise ValueError(f"Mismatched h0_source.shape[0]: compiled for {baked} slots, got {pool.shape[0]}")
        return super()._run(path, q, k, v, pool, *args, **kwargs)


class WrappedSlotOffset(FlashInferCPU):
    """A slot's element offset (slot x slot stride) is computed in a signed integer of OFFSET_BITS bits, so a slot
    whose offset passes 2^(OFFSET_BITS-1) is read and written 2^OFFSET_BITS elements below its place. Incident class:
    int32 pool offsets (FlashInfer's decode paths before 0.6.12; fp32 MTP with int32 indices before 0.7.4), modelled
    at 14 bits, so that a CPU can hold the pool and the guard below it (fuzz/test_large_pool.py on the ci profile)."""

    OFFSET_BITS = 14

    def _at(self, pool, slot: int):
        half = 2 ** (self.OFFSET_BITS - 1)
        offset = (slot * pool.stride(0) + half) % 2**self.OFFSET_BITS - half
        return torch.as_strided(pool, pool.shape[1:], pool.stride()[1:], pool.storage_offset() + offset)

    def load_pool(self, pool, slots):
        return torch.stack([self._at(pool, s).clone() for s in slots.tolist()]) if len(slots) else pool[slots]

    def store_pool(self, pool, slots, S):
        for s, state in zip(slots.tolist(), S):
            self._at(pool, s).copy_(state.to(pool.dtype))


class WideVecSkipsWriteBack(FlashInferCPU):
    """bf16-state verify with an intermediate buffer and state updates on leaves the pool unwritten once B*HV >= 128
    (T >= 2): past that dispatch threshold another kernel runs, which expects the caller to read the final state from
    buffer[:, T-1]. Incident class: FlashInfer's bf16 wide_vec kernel (0.6.11 .. 0.7.4, through the pretranspose API
    from 0.7.0), a behaviour that changes across a dispatch threshold (fuzz.model.dispatch)."""

    def _run(self, path, q, k, v, pool, *args, buf=None, write_back=True, **kwargs):
        B, T, HV = q.shape[0], q.shape[1], v.shape[2]
        if path == "bf16" and buf is not None and T >= 2 and B * HV >= 128:
            write_back = False
        return super()._run(path, q, k, v, pool, *args, buf=buf, write_back=write_back, **kwargs)


# ---- cross-call bugs (tests/run/test_serving.py: found by serving sequences, never by one call) ----------------------
class CachedDefaultOutput(FlashInferCPU):
    """With output=None the decode / MTP entry points hand out one cached buffer per shape instead of a new tensor, so
    the next call of that shape overwrites the output its caller still holds. Incident class: FlashInfer 0.6.11 ..
    0.6.17 (a default output buffer reused across calls)."""

    def _run(self, path, q, k, v, pool, read_idx, write_idx, A_log, a, dt_bias, b, scale, output, *args, **kwargs):
        if output is None:
            shape = (*q.shape[:2], *v.shape[2:])
            output = self.kernels.setdefault(
                ("default output", path, shape, q.dtype), torch.empty(shape, dtype=q.dtype)
            )
        return super()._run(
            path, q, k, v, pool, read_idx, write_idx, A_log, a, dt_bias, b, scale, output, *args, **kwargs
        )


class InputDtypeLeftOutOfKey(FlashInferCPU):
    """The compiled kernel's signature fixes q/k/v's dtype, but its cache key leaves the dtype out: an fp16 call after a
    bf16 call of the same shape gets the bf16 kernel, whose argument check rejects it. Incident class: CuTe DSL compile
    caches keyed without every dtype (TVM-FFI's "Mismatched Tensor ... expected dtype=" on the stale kernel)."""

    def _run(self, path, q, *args, **kwargs):
        compiled = self.kernels.setdefault(("inputs", path, *q.shape[1:]), q.dtype)  # B is dynamic
        if compiled != q.dtype:
            raise ValueError(
                f"Mismatched Tensor on argument #0 when calling: `q`, expected dtype="
                f"{str(compiled).removeprefix('torch.')}, got {str(q.dtype).removeprefix('torch.')}"
            )
        return super()._run(path, q, *args, **kwargs)


class StaleRowsPastTheBatch(FlashInferCPU):
    """The read slots go through a static index buffer sized for the largest batch seen, as a CUDA graph captured at
    that batch size keeps them, and every row of it runs: rows past this call's B still hold an earlier, larger
    batch's slots, so those requests' states take one more step (zero inputs there: the decay alone) although no
    request of this call names them. Incident class: padded CUDA-graph replays whose padding rows are not reset to
    the null slot."""

    def _run(self, path, q, k, v, pool, read_idx, write_idx, A_log, a, dt_bias, b, *args, **kwargs):
        out = super()._run(path, q, k, v, pool, read_idx, write_idx, A_log, a, dt_bias, b, *args, **kwargs)
        B, static = read_idx.shape[0], self.kernels.get(("static slots", path))
        if static is None or static.shape[0] < B:
            static = self.kernels[("static slots", path)] = read_idx.long().clone()
        static[:B] = read_idx
        stale = static[B:]
        stale = stale[(stale >= 0) & (stale < pool.shape[0])]  # (a CUDA kernel would also write past a smaller pool)
        decay = torch.exp(-torch.exp(A_log.float()) * self.softplus(dt_bias.float()))  # a = 0 in a padding row
        pool[stale] = (pool[stale].float() * decay[:, None, None]).to(pool.dtype)
        return out


class InterShapeLeftOutOfKey(FlashInferCPU):
    """The kernel that stores the intermediate states is compiled for the buffer's layout (a static CuTe layout: its
    row and step strides), but its cache key leaves the buffer's shape out: a later call of the same shapes with a
    buffer of other steps (more spare steps, or a sliced view of another width) gets the stale kernel, which stores
    each request's states at the old row stride, so they land in other rows and steps of the new buffer (where the
    old layout reaches past the allocation: an illegal address). Rows alone change no stride, and pass. Incident
    class: CuTe DSL compile caches keyed without the intermediate buffer's shape (rows, steps)."""

    def _run(self, path, q, *args, buf=None, **kwargs):
        if buf is not None:
            compiled = self.kernels.setdefault(("inter layout", path, *q.shape[1:]), buf.stride())  # B is dynamic
            try:
                buf = buf.as_strided(buf.shape, compiled)
            except RuntimeError as e:  # the old layout reaches past the new buffer's allocation
                raise RuntimeError("CUDA error: an illegal memory access was encountered") from e
        return super()._run(path, q, *args, buf=buf, **kwargs)


unguarded_pad_slot = UnguardedPadSlot()
inter_row_by_slot = InterRowBySlot()
gva_head_modulo = GvaHeadModulo()
write_back_when_disabled = WriteBackWhenDisabled()
fp16_bitcast_as_bf16 = Fp16BitcastAsBf16()
output_before_update = OutputBeforeUpdate()
softplus_clamped_at_threshold = SoftplusClampedAtThreshold()
strided_pool_lost_write = StridedPoolLostWrite()
inter_step_off_by_one = InterStepOffByOne()
padded_output_not_zeroed = PaddedOutputNotZeroed()
padded_output_rewritten = PaddedOutputRewritten()
compile_key_shape_only = CompileKeyShapeOnly()
split_write_ignored = SplitWriteIgnored()
prefill_skipped_write_wraps = PrefillSkippedWriteWraps()
strided_pool_capacity_baked_in = StridedPoolCapacityBakedIn()
cached_default_output = CachedDefaultOutput()
input_dtype_left_out_of_key = InputDtypeLeftOutOfKey()
stale_rows_past_the_batch = StaleRowsPastTheBatch()
wrapped_slot_offset = WrappedSlotOffset()
wide_vec_skips_write_back = WideVecSkipsWriteBack()
inter_shape_left_out_of_key = InterShapeLeftOutOfKey()

MUTANTS = {name: obj for name, obj in globals().items() if isinstance(obj, FlashInferCPU)}


# ---- serving-glue index mutants --------------------------------------------------------------------------------------
# Each is an `sglang-glue` override (`--gdn-target sglang-glue=tests.mutants:NAME`, fuzz/targets/sglang_glue.py's
# override contract): SGLang's real TritonGDNKernel with ONE defect mixed in, found by the fuzz tests of the
# sglang-glue-triton target (tests/suite/test_glue_mutants.py). The Triton glue's real calls have none of these
# defects, so what is found is the mutant (the SM90 FlashInfer glue's real sentinel wrap is a known bug of its own).
class GlueMutant:
    """An sglang-glue override object: `TritonGDNKernel` is the installed glue class with `defect` (a class whose
    methods wrap the real ones through super()) mixed in. Built on first use: the real class comes from the wheel
    (fuzz.targets.sglang_glue_loader imports triton, which the CPU profile must configure first)."""

    INSTALLED_TRITON = (
        True  # the real glue's Triton kernels run beneath the defect (TritonTarget.runs_installed_triton)
    )

    def __init__(self, defect: type):
        self.defect = defect

    @functools.cached_property
    def TritonGDNKernel(self) -> type:  # the glue's class name, as the override contract reads it
        from fuzz.targets.sglang_glue_loader import load_sglang_glue

        return type(self.defect.__name__, (self.defect, load_sglang_glue().TritonGDNKernel), {})


class GatheredDecode:
    """Decode through a gather and a scatter in Python, as SGLang's SM90 FlashInfer decode does (state_batch =
    ssm_states[cache_indices], then ssm_states[cache_indices] = new_state: gdn_flashinfer.py:461, 475): the kernel
    runs on the batch's own states, row n on row n. Where each row's slot is looked up is the defect's
    (`table_slots`); the scatter goes row by row, so of two rows on one slot the later one's state lands, as a
    sequential write order would have it. A padded row (empty in query_start_loc) gives back the state it gathered."""

    def table_slots(self, ssm_states: torch.Tensor, cache_indices: torch.Tensor) -> tuple[torch.Tensor, list[int]]:
        raise NotImplementedError

    def decode(self, q, k, v, a, b, *, ssm_states, cache_indices, **kwargs):
        table, slots = self.table_slots(ssm_states, cache_indices)
        batch = torch.stack([table[s] for s in slots])
        rows = torch.arange(len(slots), dtype=cache_indices.dtype, device=cache_indices.device)
        out = super().decode(q, k, v, a, b, ssm_states=batch, cache_indices=rows, **kwargs)
        for s, state in zip(slots, batch):
            table[s] = state
        return out


class PadWrappedOntoLastSlot(GatheredDecode):
    """The padding sentinel -1 indexes the pool as Python does: pool[-1] is the last slot, which a live request may
    hold (the allocator hands out 1..size of size + 1), so the padded row reads it and writes its old state back
    over the request's update. Incident class: a sentinel used as an index (SGLang 0.5.23's SM90 FlashInfer decode,
    known bug sglang-sm90-pad-last-slot; the Triton glue's kernel skips -1)."""

    def table_slots(self, ssm_states, cache_indices):
        return ssm_states, cache_indices.tolist()


class PadClampedOntoLiveSlot(GatheredDecode):
    """The glue addresses the pool without its reserved row (ssm_states[1:], slot s at s - 1: the numbering of an
    engine that allocates slot 0) and clamps the sentinel onto slot 0 of that table (clamp(min=0), as SGLang's SM100
    extend clamps -1, right only where slot 0 is the dummy): that slot 0 is live, SGLang's slot 1, the first slot its
    allocator hands out, and the padded row writes its old state back over the request's update. Neither engine
    makes its own slot 0 live (both reserve it), so the class is reached through the renumbering. Incident class:
    slot 0 reserved in one engine and allocatable in another."""

    def table_slots(self, ssm_states, cache_indices):
        return ssm_states[1:], (cache_indices - 1).clamp(min=0).tolist()


class ScratchRowBySlot:
    """Verify addresses its scratch by the request's pool slot instead of its batch row: intermediate_state_indices
    = cache_indices, so the states land in another request's row, or past the scratch's spec_size + 1 rows (an
    illegal address on a GPU; raised here rather than written outside the buffer). Incident class: SGLang's
    pool-scoped verify scratch, addressed by batch position (linear/utils.py:125-157), vs a glue or kernel that
    indexes it by slot (the `[:batch_size]` slicing fix)."""

    def target_verify(self, *args, cache_indices, intermediate_states_buffer, **kwargs):
        if int(cache_indices.max()) >= intermediate_states_buffer.shape[0]:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        kwargs["intermediate_state_indices"] = cache_indices
        return super().target_verify(
            *args, cache_indices=cache_indices, intermediate_states_buffer=intermediate_states_buffer, **kwargs
        )


glue_pad_wrapped_onto_last_slot = GlueMutant(PadWrappedOntoLastSlot)
glue_pad_clamped_onto_live_slot = GlueMutant(PadClampedOntoLiveSlot)
glue_scratch_row_by_slot = GlueMutant(ScratchRowBySlot)


class VllmMutant:
    """A `vllm` override (`--gdn-target vllm=tests.mutants:NAME`, fuzz/targets/vllm.py): the installed kernels and
    their release (so its known bugs' masks hold), with the kernel named `function` wrapped by `defect(real)`. Loaded
    on first use, as GlueMutant is."""

    INSTALLED_TRITON = True  # it wraps the installed kernels (TritonTarget.runs_installed_triton)

    def __init__(self, function: str, defect):
        self.function, self.defect = function, defect

    @functools.cached_property
    def real(self):
        from fuzz.targets.vllm import VLLM

        return VLLM.load_real()

    def __getattr__(self, name: str):
        from fuzz.targets.vllm import VLLM

        if name not in (*VLLM.functions, "__version__"):
            raise AttributeError(name)
        attr = getattr(self.real, name)
        return self.defect(attr) if name == self.function else attr


def accepted_with_bonus(real):
    """The accepted count handed over with the bonus token counted (num_accepted_tokens + 1, the tokens the previous
    step emitted), and nothing bounds it: the kernel reads column accepted (its unmasked load,
    fused_sigmoid_gating.py:106-112), so a request whose drafts were all accepted reads past its row of the block
    table: the next request's first slot (the guard entry after the last row). Incident class: accepted-token counts
    outside their range selecting another request's state."""

    def call(*args, num_accepted_tokens=None, **kwargs):
        if num_accepted_tokens is not None:
            num_accepted_tokens = num_accepted_tokens + 1
        return real(*args, num_accepted_tokens=num_accepted_tokens, **kwargs)

    return call


vllm_accepted_unbounded = VllmMutant("fused_sigmoid_gating_delta_rule_update", accepted_with_bonus)

GLUE_MUTANTS = {name: obj for name, obj in globals().items() if isinstance(obj, GlueMutant | VllmMutant)}


class NoDefect:
    """The control: the real glue class behind the same override object (tests/suite/test_glue_mutants.py)."""


glue_real = GlueMutant(NoDefect)
