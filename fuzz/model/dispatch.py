"""Dispatch thresholds as data: where a library picks another kernel or tile by a runtime quantity (B*HV, B, the
parallel work of a prefill), per kernel path and release, as read in the wheels and cited by file and line there
(docs/research/dispatch-and-bug-classes.md, Q1 and "Thresholds as data"; `dec` = flashinfer/gdn_decode.py, `bf16k` =
gdn_kernels/gdn_decode_bf16_state.py, `mtpk` = gdn_kernels/gdn_decode_mtp.py, `ntk` = the K-major kernel file,
`pf` = gdn_prefill.py).

Two uses:
  * a case's *variant* (`variant`): the side it falls on of each kernel-level threshold (ilp4 / wide_vec, inline /
    warp_specialized, small / big batch, cp / chunked). It is part of a failure's identity, so one bug in one kernel
    stays apart from another in the other kernel (fuzz.run.harness.failure_bucket).
  * the plan (fuzz.generate.strategies.straddle): a case's B is drawn now and then on either side of a threshold of
    its bucket (just below, at the first value above), so every threshold is crossed in the first minute of a test,
    not by luck of a uniform B.

Thresholds that depend on the device's SM count are written with `per_sm` (the value is per_sm x num_sms(): the
CUDA device's count where this process has a CUDA context, else the count of the GPU nvidia-smi names, else an
H200's). An override module (no release) gets the newest release's rows, as it gets the newest semantics row.
"""

from __future__ import annotations

import functools
import math
import subprocess
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.version import Version

BF16, MTP, KMAJOR, PREFILL = (
    "flashinfer.bf16",
    "flashinfer.mtp.fp32",
    "flashinfer.decode.kmajor",
    "flashinfer.prefill.chunk",
)


@dataclass(frozen=True)
class Threshold:
    """`quantity` (B*HV, B or B*maxH: requests times the larger head count) reaching `at` (or per_sm x num_sms)
    switches from `below` to `above`, for cases with T in [min_T, max_T] (and a buffer / state updates where given).
    `kernel`: a different kernel (part of the variant), else a different tile of one kernel (plan coverage only)."""

    path: str
    releases: str  # PEP 440 specifier
    quantity: str
    at: int = 0
    below: str = ""
    above: str = ""
    cite: str = ""
    min_T: int = 1
    max_T: int | None = None
    buffer: bool | None = None  # None: either
    update: bool | None = None
    kernel: bool = False
    per_sm: float = 0  # the first value above is ceil(per_sm x num_sms) instead of `at`

    def value(self, B: int, H: int, HV: int) -> int:
        return {"B*HV": B * HV, "B": B, "B*maxH": B * max(H, HV)}[self.quantity]

    def first_above(self, num_sms: int) -> int:
        return math.ceil(self.per_sm * num_sms) if self.per_sm else self.at

    def applies(self, T: int, buffer: bool, update: bool) -> bool:
        return (
            self.min_T <= T
            and (self.max_T is None or T <= self.max_T)
            and self.buffer in (None, buffer)
            and self.update in (None, update)
        )

    def side(self, B: int, H: int, HV: int, num_sms: int) -> str:
        return self.above if self.value(B, H, HV) >= self.first_above(num_sms) else self.below

    def batch(self, above: bool, H: int, HV: int, num_sms: int) -> int:
        """The batch size just past (above) or just short of the threshold, for these head counts (0: none)."""
        per = {"B*HV": HV, "B": 1, "B*maxH": max(H, HV)}[self.quantity]
        first = math.ceil(self.first_above(num_sms) / per)
        return first if above else first - 1


TABLE: tuple[Threshold, ...] = (
    # bf16-state kernels through gated_delta_rule_decode_pretranspose, K = V = 128 (research Q1 (b)).
    Threshold(
        BF16,
        ">=0.6.11",
        "B*HV",
        128,
        "ilp4",
        "wide_vec",
        min_T=2,
        kernel=True,
        cite="bf16k:1926 (0.6.11), 3694 (0.6.16.post4), 3768 (0.7.2.post1), 3758 (0.7.4); with a buffer and "
        "updates on, wide_vec skips the pool write-back (bf16k:3077, 0.7.4)",
    ),
    Threshold(
        BF16,
        ">=0.6.11",
        "B*HV",
        512,
        "wide_vec/tile32",
        "wide_vec/tile64",
        min_T=2,
        cite="bf16k:1600 / 2916 / 2952 / 2956",
    ),
    Threshold(
        BF16,
        ">=0.6.11",
        "B*HV",
        1024,
        "wide_vec/tile64",
        "wide_vec/tile128",
        min_T=2,
        cite="bf16k:1598 / 2914 / 2950 / 2954",
    ),
    Threshold(
        BF16,
        ">=0.6.11",
        "B*HV",
        512,
        "ilp4",
        "wide_vec",
        max_T=1,
        kernel=True,
        cite="bf16k:1475-1479 (0.6.11), 2787-2795 (0.6.16.post4), 2790-2798 (0.7.2.post1), 2794-2802 (0.7.4)",
    ),
    Threshold(
        BF16,
        ">=0.6.11",
        "B*HV",
        1024,
        "wide_vec/tile64",
        "wide_vec/tile128",
        max_T=1,
        cite="_select_wide_vec_tile_v, beside bf16k:2794-2802 (0.7.4)",
    ),
    Threshold(
        BF16,
        ">=0.6.11",
        "B*HV",
        129,
        "ilp4/tile16",
        "ilp4/tile32",
        max_T=1,
        cite="bf16k:1564-1566 / 2880-2882 / 2911-2913 / 2915-2917",
    ),
    Threshold(
        BF16,
        ">=0.6.11",
        "B*HV",
        0,
        "ilp4/tile32",
        "ilp4/tile64",
        max_T=1,
        per_sm=2,
        cite="bf16k:1541 / 2857 / 2888 / 2892 (num_sms rule)",
    ),
    Threshold(
        BF16, ">=0.6.8,<0.6.11", "B*HV", 0, "mtp/tile32", "mtp/tile64", per_sm=2, cite="bf16k:2473-2488, 2584 (0.6.10)"
    ),
    Threshold(BF16, ">=0.6.8,<0.6.11", "B*HV", 0, "mtp/tile64", "mtp/tile128", per_sm=4, cite="bf16k:2486 (0.6.10)"),
    # fp32 gated_delta_rule_mtp: get_mtp_config, byte-identical in the five releases read (research Q1 (c)).
    Threshold(
        MTP,
        ">=0.6.5",
        "B*HV",
        129,
        "inline",
        "warp_specialized",
        kernel=True,
        cite="use_inline_kernel = B*HV <= 128: mtpk:2311 (0.6.10, 0.6.11), 2610 (0.6.16.post4), 2958 "
        "(0.7.2.post1), 3071 (0.7.4)",
    ),
    Threshold(MTP, ">=0.6.5", "B*HV", 65, "inline/tile8", "inline/tile16", cite="mtpk:92-95 (0.6.10), 109-111 (0.7.4)"),
    Threshold(MTP, ">=0.6.5", "B*HV", 449, "warp/tile16", "warp/tile32", max_T=2, cite="mtpk:101-102 (0.6.10)"),
    Threshold(MTP, ">=0.6.5", "B*HV", 1025, "warp/tile32", "warp/tile64", cite="mtpk:103-111 (0.6.10)"),
    # K-major gated_delta_rule_decode (research Q1 (d)).
    Threshold(
        KMAJOR,
        ">=0.6.5",
        "B",
        32,
        "small_batch",
        "big_batch",
        kernel=True,
        cite="SMALL_BATCH_THRESHOLD_NT: ntk:48, 741-746 (0.6.10, 0.6.11); ntk:52, 760, 803-806 (0.7.x)",
    ),
    # SM90 prefill: context-parallel while 2 * num_seqs * max(H, HV) < num_sms (research Q1 (e)); 0.7.4 forces the
    # chunked kernel whenever output_state_indices is passed (the adapter passes it for padded or split maps).
    Threshold(
        PREFILL,
        ">=0.7.2",
        "B*maxH",
        0,
        "cp",
        "chunked",
        kernel=True,
        per_sm=0.5,
        cite="should_use_cp_host: pf:953-961 (0.7.2.post1), pf:1913-1924, 2009-2015 (0.7.4); vh:110-124",
    ),
)


def thresholds(path: str, version: str | None) -> tuple[Threshold, ...]:
    """The rows for a path at a release (None: an override module, which gets the newest release's rows)."""
    rows = [t for t in TABLE if t.path == path]
    if version is None:
        newest = max((Version(s.split(",")[0].lstrip(">=")) for s in {t.releases for t in rows}), default=None)
        version = str(newest) if newest else None
    if version is None:
        return ()
    return tuple(t for t in rows if Version(version) in SpecifierSet(t.releases))


def variant(
    path: str, version: str | None, B: int, H: int, HV: int, T: int, buffer: bool, update: bool, num_sms: int
) -> str | None:
    """The kernel a case runs on, by the kernel-level thresholds that apply to it (None: the path has one)."""
    sides = [t.side(B, H, HV, num_sms) for t in thresholds(path, version) if t.kernel and t.applies(T, buffer, update)]
    return "+".join(sides) or None


SMS = {"H100": 132, "H200": 132, "H20": 78, "B200": 148, "B300": 148, "GB200": 152, "GB300": 152}
DEFAULT_SMS = 132  # an H200: the CPU stand-ins imitate the kernels of the GPU this project ran on


def num_sms() -> int:
    """The SM count of the GPU the kernels run on (see the module docstring), without creating a CUDA context."""
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    return _named_sms()


@functools.cache
def _named_sms() -> int:
    name = nvidia_smi("--query-gpu=name", "--format=csv,noheader", "-i", "0")
    if name is None:
        return DEFAULT_SMS
    return next((n for key, n in sorted(SMS.items(), key=lambda kv: -len(kv[0])) if key in name.upper()), DEFAULT_SMS)


def nvidia_smi(*args: str, timeout: float = 30) -> str | None:
    """nvidia-smi's output for these arguments (no CUDA context); None where it is missing, fails or times out."""
    try:
        return subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=timeout, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
