"""fuzz.export.script: an exported script rebuilds materialize()'s tensors bit for bit, calls the kernel as the adapter does,
agrees with the fuzzer's verdict on the FlashInfer CPU stand-in and its mutants, and reproduces corpus/ in a fresh
interpreter that cannot import gdn-fuzz.

fla / SGLang scripts run in child processes under TRITON_INTERPRET=1: the interpreter has to be chosen before triton
is imported, and this module must not choose it for the rest of the session."""
from __future__ import annotations

import contextlib
import importlib.metadata
import io
import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings

from fuzz.run import corpus
from fuzz.case import Case
from fuzz.export.script import export_script
from fuzz.export.script import main as export_main
from fuzz.run.harness import verify as check
from fuzz.generate.materialize import materialize
from fuzz.generate.profiles import BUDGETS
from fuzz.targets.semantics import semantics_for
from fuzz.generate.strategies import cases
from fuzz.targets import flashinfer
from fuzz.targets.registry import FAMILIES, TARGETS, set_overrides
from fuzz.judge.failures import GdnFailure, RejectedValidInput
from tests.mutants import MUTANTS

REPO = Path(__file__).resolve().parent.parent
BY_NAME = {t.name: t for t in TARGETS}
STANDIN = "fuzz.standins.flashinfer_cpu"
# What a script's "REPRODUCED: ..." line names for each expected failure class of a corpus entry.
REPRODUCES = {"OutputMismatch": ("output",), "StateMismatch": ("state",), "IntermediateMismatch": ("intermediate",),
              "UnwrittenOutput": ("output",), "GuardBreach": ("out of bounds",), "RejectedValidInput": ("crash",),
              "AcceptedInvalidInput": ("accepted invalid input",),
              # a changed untouched row, or NaN where a number is due, shows as a mismatch of the buffer holding it
              "PoolCorruption": ("output", "state", "intermediate"), "NonFinite": ("output", "state", "intermediate")}
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DIST = {"fla": "fla-core", "sglang": "sglang"}  # the Triton families, which also run on a CPU


def write(directory: Path, case: Case, target: str, module: str | None = None) -> Path:
    path = directory / f"repro_{target}_{abs(hash((repr(case), module)))}.py"
    path.write_text(export_script(case, target, library_module=module))
    return path


def run_fresh(script: Path, *, repo_on_path: bool = False) -> subprocess.CompletedProcess:
    """`python script` in a new interpreter, run next to the script (on a CPU under TRITON_INTERPRET=1). PYTHONPATH
    starts with the repository (override modules are gdn-fuzz's) or a folder whose fuzz/, reference/, tests/ refuse
    to import; the caller's other PYTHONPATH entries (where a GPU host keeps its libraries) follow."""
    blocker = script.parent / "no_gdn_fuzz"
    for package in ("fuzz", "reference", "tests"):
        (blocker / package).mkdir(parents=True, exist_ok=True)
        (blocker / package / "__init__.py").write_text(f"raise ImportError('gdn-fuzz imported: {package}')\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    libraries = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != REPO]
    env["PYTHONPATH"] = os.pathsep.join([str(REPO if repo_on_path else blocker), *libraries])
    if DEVICE == "cpu":
        env["TRITON_INTERPRET"] = "1"
    return subprocess.run([sys.executable, str(script)], env=env, cwd=script.parent, capture_output=True, text=True,
                          timeout=600)


def run_here(script: Path) -> tuple[int, str]:
    """The script's main() in this process (override modules only: nothing here imports triton)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        rc = runpy.run_path(str(script), run_name="repro")["main"]()
    return rc, out.getvalue()


def verdict(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if "REPRODUCED" in line)


def same(x, y) -> bool:
    """Same dtype, shape, strides and bits (None only matches None)."""
    if x is None or y is None:
        return x is None and y is None
    return ((x.dtype, x.shape, x.stride(), x.storage_offset()) == (y.dtype, y.shape, y.stride(), y.storage_offset())
            and torch.equal(x.contiguous().view(torch.uint8), y.contiguous().view(torch.uint8)))


@pytest.fixture
def flashinfer_override():
    """Point the flashinfer family at a module for one test; put back whatever was set before."""
    before = {name: f.override for name, f in FAMILIES.items() if f.override}
    yield lambda spec: set_overrides({**before, "flashinfer": spec})
    set_overrides(before)


PREFILL = "flashinfer-prefill-chunk"
BUILD_CASES = [  # every generation path: each gate regime and "mixed", prefill, both layouts, strides, dtypes
    ("flashinfer-bf16", "verify-B3-T6-H1-HV2-K8-V16-pool7-pad1-bf16state-fp16in-i32-vk-gate_mixed-seed3-"
                        "slots[5,-1,2]-wslots[4,-1,6]-inter3x8+0-noupdate"),
    ("flashinfer-mtp-fp32", "verify-B2-T3-H1-HV2-K8-V16-pool9-pad1-fp32state-bf16in-i64-vk-gate_saturated-seed11-"
                            "slots[5,-1]-tslots[1/2/3,4/6/7]"),
    ("sglang-sigmoid", "verify-B3-T6-H1-HV2-K8-V16-pool7-pad1-fp32state-fp32in-i32-vk-gate_threshold-seed5-"
                       "slots[5,-1,2]-gap3-inter4x8+1-rows[2,0,-1]-scale0.25"),
    ("sglang-recurrent", "verify-B2-T2-H1-HV4-K4-V8-pool3-pad0-fp32state-bf16in-i32-vk-gate_negsat-seed7-slots[2,0]-"
                         "inter2x3+0"),
    ("fla-recurrent-loggates", "prefill-B3-T4-H2-HV4-K16-V8-pool3-pad0-bf16state-bf16in-i64-kv-gate_forget-seed2-"
                               "slots[0,1,2]-seqlens[4,0,2]-nol2"),
    ("fla-recurrent", "decode-B1-T1-H1-HV1-K8-V16-pool1-pad0-fp32state-fp16in-i32-kv-gate_nodecay-seed9-slots[0]"),
    ("sglang-packed", "decode-B2-T1-H1-HV1-K8-V16-pool1-pad1-fp32state-bf16in-i32-vk-gate_mild-seed0-slots[-1,0]-nol2"),
    (PREFILL, "prefill-B3-T4-H1-HV2-K8-V16-pool5-pad1-fp32state-fp16in-i32-vk-gate_nodecay-seed4-slots[3,-1,1]-"
              "seqlens[4,2,0]-wslots[2,4,0]-gap1"),
]


@pytest.mark.parametrize(("target", "coordinate"), BUILD_CASES)
def test_script_builds_the_fuzzers_tensors_bit_for_bit(tmp_path, target, coordinate):
    case = Case.parse(coordinate)
    got = runpy.run_path(str(write(tmp_path, case, target)), run_name="repro")["build"]("cpu")
    want = materialize(case, "cpu")
    names = ["q", "k", "v", "A_log", "dt_bias", "a", "b", "read_slots", "write_slots", "token_slots", "inter_index",
             "cu_seqlens"]
    if semantics_for(BY_NAME[target].path, None).gates == "log":  # built only where the kernel takes them
        names += ["g", "beta"]
    for name in names:
        assert same(getattr(got, name), getattr(want, name)), name
    for view, full, theirs in ((got.pool, got.pool_full, want.pool), (got.out, got.out_full, want.output),
                               (got.inter, got.inter_full, want.inter)):
        if theirs is None:
            assert view is None and full is None
        else:  # the view the kernel gets, and the whole allocation around it: guard and poison bits included
            assert same(view, theirs.view) and same(full, theirs.full)


CALL_CASES = [  # (target, coordinate): cases the fuzzer passes, across padding contracts and buffer options
    ("fla-recurrent", "decode-B2-T1-H2-HV4-K8-V16-pool2-pad0-fp32state-bf16in-i32-kv-gate_mild-seed1-slots[0,1]-nol2"),
    ("fla-recurrent-loggates", "prefill-B3-T3-H1-HV2-K8-V16-pool3-pad0-bf16state-fp16in-i64-vk-gate_forget-seed2-"
                               "slots[0,1,2]-seqlens[3,0,2]-scale0.25"),
    ("sglang-packed", "decode-B3-T1-H1-HV2-K8-V16-pool4-pad1-fp32state-bf16in-i64-vk-gate_saturated-seed3-"
                      "slots[2,-1,1]-gap1-scale0.25"),
    ("sglang-sigmoid", "verify-B3-T3-H1-HV2-K8-V16-pool5-pad1-fp32state-bf16in-i32-vk-gate_mixed-seed5-"
                       "slots[4,-1,1]-gap1-inter4x4+1-rows[2,0,-1]-nol2-noupdate"),
    ("sglang-recurrent", "verify-B2-T2-H2-HV4-K4-V8-pool3-pad1-bf16state-bf16in-i32-vk-gate_mild-seed6-slots[-1,2]-"
                         "inter2x2+0-scale1.0"),
    ("flashinfer-pretranspose-fp32", "decode-B3-T1-H1-HV2-K8-V16-pool6-pad1-fp32state-fp16in-i32-vk-"
                                     "gate_threshold-seed7-slots[1,-1,3]-wslots[4,-1,5]-gap1-nol2"),
    ("flashinfer-bf16", "verify-B2-T4-H1-HV2-K8-V16-pool4-pad1-bf16state-bf16in-i32-vk-gate_mild-seed8-slots[-1,2]-"
                        "wslots[3,-1]-inter2x5+0-scale1.0-noupdate"),
    ("flashinfer-mtp-fp32", "verify-B2-T3-H1-HV2-K8-V16-pool9-pad1-fp32state-bf16in-i64-vk-gate_nodecay-seed9-"
                            "slots[5,-1]-tslots[1/2/3,4/6/7]-nol2"),
    # padded read with a real write slot (zero state, stored), an empty sequence (stores nothing), strided pool
    (PREFILL, "prefill-B3-T4-H1-HV2-K8-V16-pool5-pad1-fp32state-fp16in-i32-vk-gate_nodecay-seed4-slots[3,-1,1]-"
              "seqlens[4,2,0]-wslots[2,4,0]-gap1"),
    (PREFILL, "prefill-B2-T3-H2-HV4-K8-V16-pool3-pad1-fp32state-bf16in-i64-vk-gate_mixed-seed5-slots[-1,2]-"
              "seqlens[3,1]-scale0.25"),  # one pool: the padded row's write id is -1 too
]


def compare_with_adapter(specs: str) -> None:
    """Child process (TRITON_INTERPRET=1): for each [target, coordinate, module, script], call the kernel through the
    script and through the adapter on fresh tensors and compare every buffer; also the fuzzer's and the script's
    verdicts. Prints one JSON line per spec."""
    for target_name, coordinate, module, script in json.loads(specs):
        set_overrides({"flashinfer": module} if module else {})
        target, case = BY_NAME[target_name], Case.parse(coordinate)
        theirs = materialize(case, "cpu")
        want = target.call(case, theirs)  # first: fuzz's SGLang loader wants the real sglang spec, not the stubs
        ns = runpy.run_path(script, run_name="repro")
        mine = ns["build"]("cpu")
        got = ns["call"](ns["load"]()[0], mine)
        buffers = [(got, want), (mine.pool_full, theirs.pool.full), (mine.out_full, theirs.output.full),
                   (mine.inter_full, None if theirs.inter is None else theirs.inter.full)]
        try:
            check(target, case, "cpu")
            fuzzer = "pass"
        except GdnFailure as e:
            fuzzer = f"{type(e).__name__}: {e}"
        with contextlib.redirect_stdout(io.StringIO()) as out:
            rc = ns["main"]()
        print(json.dumps(dict(target=target_name, same=[same(a, b) for a, b in buffers], fuzzer=fuzzer, rc=rc,
                              out=out.getvalue())))


def test_script_calls_the_kernel_as_the_adapter_does(tmp_path):
    specs = [(t, c, STANDIN if BY_NAME[t].family.name == "flashinfer" else None) for t, c in CALL_CASES]
    specs = [(t, c, m, str(write(tmp_path, Case.parse(c), t, m))) for t, c, m in specs]
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    code = f"from tests.test_export import compare_with_adapter; compare_with_adapter({json.dumps(specs)!r})"
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(specs)
    for r in results:
        assert r["same"] == [True] * 4, r  # output, pool, output buffer, intermediate buffer: bit-identical
        assert r["fuzzer"] == "pass" and r["rc"] == 0 and "NOT REPRODUCED" in r["out"], r


def _runs_here(target) -> tuple[str | None, str | None]:
    """(why the target cannot run here, else None; its installed version). On a CPU only the Triton families run,
    and their library is not imported here: the script's own process chooses the Triton interpreter."""
    family = target.family.name
    if DEVICE == "cuda":
        reason = target.unavailable_reason(DEVICE)
        return reason, None if reason else target.family.version()
    if family not in DIST:
        return f"{family} does not run on a CPU", None
    try:
        return None, importlib.metadata.version(DIST[family])
    except importlib.metadata.PackageNotFoundError:
        return f"{DIST[family]} is not installed", None


def _corpus_params():
    """Every entry whose target runs here and whose version range holds the installed release; entries for another
    release are dropped, and entries whose target cannot run here skip with the reason."""
    for entry in corpus.load_all():
        reason, version = _runs_here(BY_NAME[entry.target])
        if version and entry.versions and version not in entry.versions:
            continue  # the entry is about another release: nothing to reproduce here
        yield pytest.param(entry, id=entry.id, marks=[pytest.mark.skip(reason=f"target unavailable: {reason}")]
                           if reason else [])


@pytest.mark.parametrize("entry", list(_corpus_params()))
def test_corpus_entry_reproduces_standalone(tmp_path, entry):
    script = tmp_path / "repro.py"
    assert export_main([str(entry.path), "-o", str(script)]) == 0
    text = script.read_text()
    assert entry.description in text and len(text.splitlines()) < 200
    proc = run_fresh(script)
    assert "gdn-fuzz imported" not in proc.stdout + proc.stderr
    assert repr(entry.case) in proc.stdout
    if entry.expect == "pass":
        assert proc.returncode == 0 and verdict(proc.stdout) == "NOT REPRODUCED", proc.stdout + proc.stderr
    else:
        assert proc.returncode == 1, proc.stdout + proc.stderr
        line = verdict(proc.stdout)
        assert line.startswith("REPRODUCED: ") and any(w in line for w in REPRODUCES[entry.expect]), proc.stdout


PADDED = Case.parse("decode-B1-T1-H1-HV1-K8-V16-pool1-pad1-fp32state-bf16in-i32-vk-gate_mild-seed0-slots[-1]")


def test_flashinfer_standin_passes_and_mutant_reproduces_in_a_fresh_process(tmp_path):
    good = run_fresh(write(tmp_path, PADDED, "flashinfer-pretranspose-fp32", STANDIN), repo_on_path=True)
    assert good.returncode == 0 and verdict(good.stdout) == "NOT REPRODUCED", good.stdout + good.stderr
    bad = run_fresh(write(tmp_path, PADDED, "flashinfer-pretranspose-fp32", "tests.mutants:padded_output_not_zeroed"),
                    repo_on_path=True)
    assert bad.returncode == 1 and verdict(bad.stdout) == "REPRODUCED: output", bad.stdout + bad.stderr
    assert "max |err| inf" in bad.stdout  # the padded row still holds the NaN poison where 0 is due


MUTANT_CASES = {  # mutant: (target, its minimal case, what the script names); tests/test_mutants.py finds these
    "padded_output_not_zeroed": ("flashinfer-pretranspose-fp32", repr(PADDED), "output"),
    "unguarded_pad_slot": ("flashinfer-pretranspose-fp32", repr(PADDED), "state"),
    "padded_output_rewritten": ("flashinfer-mtp-fp32", "verify-B1-T2-H1-HV1-K8-V16-pool1-pad1-fp32state-bf16in-i32-"
                                "vk-gate_mild-seed0-slots[-1]", "output rows left untouched by contract rewritten"),
    "gva_head_modulo": ("flashinfer-pretranspose-fp32",
                        "decode-B1-T1-H2-HV4-K8-V16-pool1-pad0-fp32state-bf16in-i32-vk-gate_mild-seed0-slots[0]",
                        "output"),
    "split_write_ignored": ("flashinfer-pretranspose-fp32", "decode-B1-T1-H1-HV1-K8-V16-pool2-pad0-fp32state-bf16in-"
                            "i32-vk-gate_mild-seed0-slots[0]-wslots[1]", "state"),
    "strided_pool_lost_write": ("flashinfer-pretranspose-fp32", "decode-B1-T1-H1-HV1-K8-V16-pool2-pad0-fp32state-"
                                "bf16in-i32-vk-gate_mild-seed0-slots[1]-gap1", "state"),
    "write_back_when_disabled": ("flashinfer-mtp-fp32", "verify-B1-T1-H1-HV1-K8-V16-pool1-pad0-fp32state-bf16in-i32-"
                                 "vk-gate_mild-seed0-slots[0]-noupdate", "state"),
    "inter_row_by_slot": ("flashinfer-mtp-fp32", "verify-B1-T1-H1-HV1-K8-V16-pool2-pad0-fp32state-bf16in-i32-vk-"
                          "gate_mild-seed0-slots[1]-inter2x1+0", "intermediate"),
    "prefill_skipped_write_wraps": (PREFILL, "prefill-B1-T1-H1-HV1-K8-V16-pool1-pad1-fp32state-bf16in-i32-vk-"
                                    "gate_mild-seed0-slots[-1]-seqlens[1]", "state"),
    "inter_step_off_by_one": ("flashinfer-bf16", "verify-B1-T5-H1-HV1-K8-V16-pool1-pad0-bf16state-bf16in-i32-vk-"
                              "gate_mild-seed0-slots[0]-inter1x5+0", "intermediate"),
    "strided_pool_capacity_baked_in": ("flashinfer-mtp-fp32", "verify-B1-T2-H1-HV1-K8-V16-pool2-pad0-fp32state-bf16in-"
                                       "i32-vk-gate_mild-seed0-slots[1]-gap1-warm3", "crash"),
}


def test_only_the_warm_call_trips_a_compile_cache_keyed_without_the_pool_capacity(flashinfer_override):
    target, coordinate, _ = MUTANT_CASES["strided_pool_capacity_baked_in"]
    case, mutant = Case.parse(coordinate), MUTANTS["strided_pool_capacity_baked_in"]
    flashinfer_override("tests.mutants:strided_pool_capacity_baked_in")
    mutant.kernels.clear()
    check(BY_NAME[target], case.replace(warm_pool=0), "cpu")  # one capacity per process: nothing to see
    mutant.kernels.clear()
    with pytest.raises(RejectedValidInput, match="Mismatched h0_source.shape"):
        check(BY_NAME[target], case, "cpu")


@pytest.mark.parametrize("name", sorted(MUTANT_CASES))
def test_mutant_reproduces_where_the_standin_does_not(tmp_path, flashinfer_override, name):
    target, coordinate, kind = MUTANT_CASES[name]
    case = Case.parse(coordinate)
    flashinfer_override(f"tests.mutants:{name}")
    with pytest.raises(GdnFailure):  # the fuzzer's own verdict on this case
        check(BY_NAME[target], case, "cpu")
    MUTANTS[name].kernels.clear()
    rc, out = run_here(write(tmp_path, case, target, f"tests.mutants:{name}"))
    assert rc == 1 and kind in verdict(out).removeprefix("REPRODUCED: ").split(", "), out
    rc, out = run_here(write(tmp_path, case, target, STANDIN))
    assert rc == 0 and verdict(out) == "NOT REPRODUCED", out


@pytest.mark.parametrize(("target", "op"), [(t.name, op) for t in flashinfer.TARGETS
                                            for op in sorted(t.support.ops)])
def test_script_passes_what_the_fuzzer_passes_on_the_standin(tmp_path, flashinfer_override, target, op):
    """Drawn cases (padding, split and per-token slots, buffers, noupdate, invalid GVA...): the stand-in is correct,
    so each script must print NOT REPRODUCED; its inline reference and contracts agree with the oracle's."""
    flashinfer_override(STANDIN)

    @settings(max_examples=40, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(cases(BY_NAME[target], op, BUDGETS["ci"]))
    def agree(case):
        check(BY_NAME[target], case, "cpu")
        rc, out = run_here(write(tmp_path, case, target, STANDIN))
        assert rc == 0 and verdict(out) == "NOT REPRODUCED", out

    agree()


def test_cli(tmp_path, capsys):
    assert export_main([repr(PADDED), "--target", "flashinfer-bf16", "--module", STANDIN]) == 0
    assert capsys.readouterr().out.startswith('"""Reproduction of a gdn-fuzz case on flashinfer-bf16')
    with pytest.raises(SystemExit):
        export_main([repr(PADDED)])  # a coordinate needs --target
    with pytest.raises(ValueError, match="unknown target"):
        export_script(PADDED, "flashinfer")
