"""The FlashInfer CPU stand-in (`fuzz.standins.flashinfer_cpu`), made to fail the way GPU kernels fail, for
the crash-isolation tests. Same API and results, except:

  * a padded (negative) state index with grouped value heads (HV > H): SIGSEGV (the GVA path of a kernel
    dereferencing the padding sentinel); on CUDA tensors, a real illegal memory access instead (a Triton
    store 1 TiB past the pool), which poisons the process's CUDA context;
  * T == 2: os._exit(139) (a process that dies without a Python stack);
  * T == 3: never returns (a kernel spinning on a barrier);
  * T == 4: raises CUDA's illegal-address error and stays "poisoned": every later call in this process
    raises it too, as a CUDA context does;
  * T == 5: returns an output off by 1 (a plain verdict failure, no crash);
  * T == 7: answers right but "corrupts" the process (a kernel scribbling on memory it does not own): the next
    call in this process, whatever its case, segfaults. That case crashes only after this one.

Only ever call it inside an isolated worker (`fuzz.run.worker`): in-process it kills the test run.
"""

from __future__ import annotations

import functools
import inspect
import os
import signal
import time

from fuzz.standins import flashinfer_cpu as _cpu

ILLEGAL_ADDRESS = "CUDA error: an illegal memory access was encountered"
_poisoned = False
_corrupted = False


def _crashing(fn):
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        global _poisoned, _corrupted
        arg = sig.bind(*args, **kwargs).arguments
        (T, H), HV, idx = arg["q"].shape[1:3], arg["v"].shape[2], arg.get("initial_state_indices")
        if _poisoned:
            raise RuntimeError(ILLEGAL_ADDRESS)
        if _corrupted:
            os.kill(os.getpid(), signal.SIGSEGV)
        _corrupted = T == 7
        if HV > H and idx is not None and bool((idx < 0).any()):
            if idx.is_cuda:
                _store_out_of_bounds(arg["q"])
            else:
                os.kill(os.getpid(), signal.SIGSEGV)
        if T == 2:
            os._exit(139)
        if T == 3:
            while True:
                time.sleep(60)
        if T == 4:
            _poisoned = True
            raise RuntimeError(ILLEGAL_ADDRESS)
        out, state = fn(*args, **kwargs)
        if T == 5:
            out.add_(1.0)
        return out, state

    return wrapper


@functools.cache
def _wild_store_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def wild_store(ptr):
        tl.store(ptr + (1 << 40), 1.0)

    return wild_store


def _store_out_of_bounds(x) -> None:
    _wild_store_kernel()[(1,)](x)


gated_delta_rule_decode_pretranspose = _crashing(_cpu.gated_delta_rule_decode_pretranspose)
gated_delta_rule_mtp = _crashing(_cpu.gated_delta_rule_mtp)
