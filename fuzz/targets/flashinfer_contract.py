"""FlashInfer's release contracts (fuzz.targets.contract): what each GDN path of 0.6.5 .. 0.7.4 accepts.

Read in the wheels (shared/research/flashinfer_gdn.md §3, docs/research/dispatch-and-bug-classes.md):
  * every decode / MTP path is CuTe DSL built for SM90+ (the docstrings: "Requires SM90+"); the fp32 paths assert
    K >= 128, V >= 128 (V % 8 == 0; K-major V % 32 == 0), and the bf16-state kernels are entered only at
    K = V = 128 (`state.dtype == bf16 and K == 128 and V == 128`, every release; otherwise the call falls to the
    fp32 asserts and fails): the shipped paths take K = V = 128;
  * before 0.6.8 the bf16-state kernels exist for T in 1..4 only (a longer T falls to the fp32 T = 1 path);
  * the SM90 chunked prefill has one head size, D = K = V = 128; gdn_prefill.py dispatches majors 9, 10, 12;
  * Cake compiles for compute capability 10.x only (CakeGDNUnsupportedError elsewhere); ReplaySSM runs on SM100 /
    SM103 / SM120 (both as read in 0.7.4, the release their semantics rows are written for).
Only K = V = 128 is written as the head dims: the fuzzer keeps to the shipped paths (other sizes >= 128 the fp32
asserts let through are not drawn on real GPUs either).
"""

from __future__ import annotations

from fuzz.targets.contract import Contract

HEAD_128 = ((128, 128),)
SM90_PLUS = (9, 10, 11, 12)
PREFILL_ARCH = (9, 10, 12)
CAKE_ARCH = (10,)
REPLAYSSM_ARCH = (10, 12)

CONTRACTS: tuple[Contract, ...] = (
    Contract(
        "flashinfer.pretranspose.fp32",
        ">=0.6.5",
        HEAD_128,
        ("fp32",),
        arch=SM90_PLUS,
        why="fp32 asserts K >= 128, V >= 128; CuTe DSL for SM90+",
    ),
    Contract(
        "flashinfer.bf16",
        ">=0.6.8",
        HEAD_128,
        ("bf16",),
        arch=SM90_PLUS,
        why="bf16-state kernels only at K = V = 128 (elsewhere the fp32 asserts reject the bf16 state)",
    ),
    Contract(
        "flashinfer.bf16",
        ">=0.6.5,<0.6.8",
        HEAD_128,
        ("bf16",),
        max_T=4,
        arch=SM90_PLUS,
        why="bf16-state kernels only at K = V = 128 and for T in 1..4",
    ),
    Contract(
        "flashinfer.decode.kmajor",
        ">=0.6.5",
        HEAD_128,
        ("fp32",),
        arch=SM90_PLUS,
        why="K-major fp32: K, V >= 128, V % 32 == 0, T = 1",
    ),
    Contract(
        "flashinfer.mtp.fp32", ">=0.6.5", HEAD_128, ("fp32",), arch=SM90_PLUS, why="fp32 MTP: K = V = 128 kernels"
    ),
    Contract(
        "flashinfer.prefill.chunk",
        ">=0.6.5",
        HEAD_128,
        ("fp32",),
        arch=PREFILL_ARCH,
        why="chunked prefill: one head size D = K = V = 128; majors 9, 10, 12",
    ),
    Contract(
        "flashinfer.cake.bf16",
        ">=0.7.4",
        HEAD_128,
        ("bf16",),
        arch=CAKE_ARCH,
        why="Cake manifest rows: K = V = 128, compute capability 10.x",
    ),
    Contract(
        "flashinfer.cake.fp32",
        ">=0.7.4",
        HEAD_128,
        ("fp32",),
        arch=CAKE_ARCH,
        why="Cake manifest rows: K = V = 128, compute capability 10.x",
    ),
    Contract(
        "flashinfer.cake.kmajor",
        ">=0.7.4",
        HEAD_128,
        ("fp32",),
        arch=CAKE_ARCH,
        why="Cake manifest rows: K = V = 128, compute capability 10.x",
    ),
    Contract(
        "flashinfer.replayssm",
        ">=0.7.4",
        HEAD_128,
        ("fp32",),
        arch=REPLAYSSM_ARCH,
        why="ReplaySSM: K = V = 128, SM100 / SM103 / SM120",
    ),
)
