"""Float64 pure-PyTorch oracle for the gated delta rule (GDN). Knows nothing of targets or tolerances."""

from reference.batched import SparseResult, batched_decode, batched_prefill, batched_verify, to_pool_result
from reference.contracts import EXACT, PadContract, Precision
from reference.gates import LogGates, RawGates
from reference.ops import PoolResult, commit, decode, prefill, verify
from reference.recurrence import gate_values, l2normalize, run_sequence, softplus

__all__ = [
    "EXACT",
    "PadContract",
    "Precision",
    "PoolResult",
    "commit",
    "decode",
    "verify",
    "prefill",
    "LogGates",
    "RawGates",
    "gate_values",
    "l2normalize",
    "run_sequence",
    "softplus",
    "SparseResult",
    "batched_decode",
    "batched_prefill",
    "batched_verify",
    "to_pool_result",
]
