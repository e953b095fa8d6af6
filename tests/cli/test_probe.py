"""`gdn-fuzz probe`: one verdict a line per coordinate and target, a grid of variants, exit 1 on a failed check. Each
runs as a user runs it, in a fresh interpreter (the Triton targets need TRITON_INTERPRET=1 before triton loads)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fuzz.cli.probe import variants
from fuzz.model.case import Case
from tests.targets.test_contract import CAKE_ON_SM90, UNSUPPORTED_MODULE

ROOT = Path(__file__).resolve().parents[2]


def coordinate(entry: str) -> str:
    return json.loads((ROOT / "corpus" / entry).read_text())["case"]


def probe(*args: str, path: str = "") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if path:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), path, env.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-m", "fuzz", "probe", *args, "--device", "cpu"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_known_failure_is_its_kind_and_coordinate_and_exit_1():
    failing = coordinate("sglang-recurrent-decode-StateMismatch-0.json")
    proc = probe(failing, "--target", "sglang-recurrent")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (line,) = proc.stdout.splitlines()
    assert line.startswith("sglang-recurrent: StateMismatch: ") and failing in line


def test_a_passing_grid_prints_each_combinations_error_to_bound_ratios_and_exit_0():
    base = Case.parse(coordinate("sglang-packed-decode-pass-0.json"))
    cases = list(variants(base, {"B": (1, 3), "G": (1, 2)}))
    assert [(c.B, c.HV // c.H, c.read_slots, c.pool) for c in cases] == [
        (1, 1, (1,), 2),
        (1, 2, (1,), 2),
        (3, 1, (1, 2, 3), 4),
        (3, 2, (1, 2, 3), 4),
    ]
    proc = probe(repr(base), "--target", "sglang-packed", "--grid", "B=1,3", "G=1,2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split(": ")[-1] for line in lines] == [repr(c) for c in cases]
    assert all(line.startswith("sglang-packed: pass (error/bound: output ") and "state " in line for line in lines)


def test_a_named_target_that_would_never_draw_the_case_is_listed_not_checked():
    kv = coordinate("sglang-packed-decode-pass-0.json").replace("-vk-", "-kv-")
    proc = probe(kv, "--target", "sglang-packed")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == [f"sglang-packed: outside its support (layout kv): {kv}"]


def test_a_case_outside_the_release_contract_is_listed_not_checked():
    """A module that reports a release is held to that release's contract: K = V = 8 is outside FlashInfer 0.7.4's
    MTP path (K = V = 128), so the probe lists it instead of calling the release's rejection a RejectedValidInput; the
    same coordinate on the stand-in that reports no release is checked."""
    case = "decode-B3-T1-H1-HV2-K8-V8-pool3-pad0-fp32state-bf16in-i32-vk-decay_saturated-seed0-slots[0,1,2]"
    proc = probe(
        case, "--target", "flashinfer-mtp-fp32", "--module", "flashinfer=fuzz.standins.flashinfer_cpu:release_0_7_4"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == [f"flashinfer-mtp-fp32: outside its support ((K, V) (8, 8)): {case}"]
    proc = probe(case, "--target", "flashinfer-mtp-fp32", "--module", "flashinfer=fuzz.standins.flashinfer_cpu")
    assert proc.returncode == 0 and proc.stdout.startswith("flashinfer-mtp-fp32: pass "), proc.stdout + proc.stderr


def test_a_check_the_library_says_this_device_cannot_run_is_unavailable_with_its_reason(tmp_path):
    """The library's own 'not supported on this device' (a module reporting no release: no contract stops the call)
    is printed as the target unavailable with the library's words, not as a pass with nothing compared."""
    (tmp_path / "gdn_unsupported_here.py").write_text(UNSUPPORTED_MODULE)
    case = coordinate("sglang-packed-decode-pass-0.json")
    proc = probe(
        case,
        "--target",
        "flashinfer-pretranspose-fp32",
        "--module",
        "flashinfer=gdn_unsupported_here",
        path=str(tmp_path),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == [
        f"flashinfer-pretranspose-fp32: unavailable (CakeGDNUnsupportedError: {CAKE_ON_SM90}): {case}"
    ]
