"""Trust: every bad input is one clear line and a non-zero exit (no traceback, no INTERNALERROR), nothing a run finds
is lost, and a green run means something ran. CLI cases run pytest / gdn-fuzz in a subprocess; the Case and the
corpus loader are tested directly (tests/run/test_corpus_io.py holds the corpus round trip)."""

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz.generate.profiles import BUDGETS, GPU_RESERVE
from fuzz.generate.strategies import cases
from fuzz.model.case import Case, CaseError
from fuzz.model.known_bugs import MASK_POLICIES
from fuzz.targets.registry import TARGETS, overridden
from tests.child_pytest import QUIET, python_run

ROOT = Path(__file__).resolve().parents[2]
BASE = "decode-B2-T1-H1-HV2-K8-V16-pool4-pad1-fp32state-bf16in-i32-vk-decay_mild-seed7-slots[3,-1]"
VERIFY = "verify-B2-T2-H1-HV1-K8-V8-pool9-pad0-fp32state-bf16in-i32-vk-decay_mild-seed0-slots[0,1]"
VLLM = VERIFY.replace("slots[0,1]", "slots[2,4]-tslots[2/3,4/5]-null0")
VLLM_PADDED = VLLM.replace("pad0", "pad1").replace("slots[2,4]", "slots[3,0]").replace("4/5", "0/0")
VLLM_SKIPPED = VLLM_PADDED.replace("pad1", "pad2").replace("slots[3,0]", "slots[0,0]")  # row 0 too: an edge row
PREFILL = "prefill-B2-T2-H1-HV1-K8-V8-pool3-pad0-fp32state-bf16in-i32-vk-decay_mild-seed0-slots[0,1]"
MUTANT = "flashinfer=tests.mutants:padded_output_not_zeroed"


def run(*args, env=None, timeout=300) -> subprocess.CompletedProcess:
    """`python ARGS` in the checkout, with `env` added to this environment."""
    return python_run(*args, env={**os.environ, **(env or {})}, timeout=timeout)


def pytest_run(*args, env=None) -> subprocess.CompletedProcess:
    return run("-m", "pytest", *QUIET, *args, env=env)


def one_line(proc: subprocess.CompletedProcess) -> str:
    """The only non-blank line the process wrote, once stray library import warnings are set aside."""
    lines = [
        ln
        for ln in (proc.stdout + proc.stderr).splitlines()
        if ln.strip()
        and not ("Warning:" in ln or ln.startswith("  _cpu_device_warning") or ln.strip() == "warnings.warn(")
    ]
    assert len(lines) == 1, "\n".join(lines[:40])
    assert "Traceback" not in lines[0] and "INTERNALERROR" not in lines[0]
    return lines[0]


# --- pytest options: refused at configure, exit 4, one line -------------------------------------------------------
@pytest.fixture
def malformed_corpus(tmp_path):
    def make(**changes):
        entry = json.loads(next((ROOT / "corpus").glob("*.json")).read_text())
        (tmp_path / "entry.json").write_text(json.dumps({**entry, **changes}))
        return str(tmp_path)

    return make


# the gate profile was ci's twin: "gate" now names the command alone
GATE_IS_CI = "not a gdn-fuzz profile; expected one of ci, dev, h200, b200 (the gate profile is now ci)"
USAGE_ERRORS = {
    "override that does not import": (["--gdn-target", "flashinfer=no.such.module"], "no.such.module"),
    "override of an unknown family": (["--gdn-target", "nosuch=json"], "unknown family"),
    "override without a module": (["--gdn-target", "flashinfer"], "expected FAMILY=module"),
    "one family overridden twice": (["--gdn-target", "sglang=a", "--gdn-target", "sglang=b"], "already sglang=a"),
    "required family that does not exist": (["--gdn-require=nosuch"], "--gdn-require: unknown family nosuch"),
    "unknown profile": (["--hypothesis-profile=nosuch"], "not a gdn-fuzz profile"),
    "the gate profile, now ci": (["--hypothesis-profile=gate"], f"--hypothesis-profile=gate: {GATE_IS_CI}"),
    "seed that is no integer": (["--hypothesis-seed=abc"], "expected an integer"),
    "no examples": (["--gdn-examples=0"], "--gdn-examples=0: expected a number >= 1"),
    "no shards": (["--gdn-shards=0"], "--gdn-shards=0"),
    "empty time box": (["--gdn-test-seconds=0"], "--gdn-test-seconds=0: expected a number > 0"),
    "zero timeout": (["--gdn-timeout=0"], "--gdn-timeout=0"),
    "report in a missing directory": (["--gdn-report=/nonexistent/r.json"], "no directory /nonexistent"),
    "corpus that does not exist": (["--gdn-corpus=/nonexistent"], "/nonexistent: no such corpus directory"),
    # paths checked before the first test: each used to fail at its first write, as a traceback
    "report that is a directory": ([f"--gdn-report={ROOT}"], f"--gdn-report={ROOT}: a directory; give a file name"),
    "live log that is a directory": ([f"--gdn-live-log={ROOT}"], f"--gdn-live-log={ROOT}: a directory"),
    "events file that is a directory": ([f"--gdn-events={ROOT}"], f"--gdn-events={ROOT}: a directory"),
    "report under a file": ([f"--gdn-report={ROOT}/README.md/r.json"], f"no directory {ROOT}/README.md to write"),
    "corpus out that is a file": (  # after 146 s of fuzzing, a FileExistsError hid the failure it found
        [f"--gdn-corpus-out={ROOT}/README.md"],
        f"--gdn-corpus-out={ROOT}/README.md: a file, not a directory",
    ),
    "corpus out under a file": (
        [f"--gdn-corpus-out={ROOT}/README.md/new"],
        f"cannot be made: {ROOT}/README.md is a file, not a directory",
    ),
    "example database that is a file": ([f"--gdn-db={ROOT}/README.md"], f"--gdn-db={ROOT}/README.md: a file"),
}


@pytest.mark.parametrize("case", USAGE_ERRORS, ids=lambda s: s.replace(" ", "_"))
def test_bad_option_is_one_line_and_exit_4(case):
    args, message = USAGE_ERRORS[case]
    proc = pytest_run("fuzz/", "--hypothesis-profile=ci", *args)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert message in one_line(proc)


def test_gpu_profile_without_cuda_is_one_line():
    """Before: 60k lines of 'Torch not compiled with CUDA enabled'."""
    proc = pytest_run("fuzz/", "--hypothesis-profile=h200", env={"CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 4
    assert "runs on a CUDA GPU" in one_line(proc)


def test_warm_on_a_gpu_profile_without_cuda_is_one_line():
    """It used to be a traceback, after 34 s of loading the targets."""
    proc = run("-m", "fuzz", "warm", "--profile", "h200", env={"CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert one_line(proc).startswith("gdn-fuzz warm: error: --profile=h200 runs on a CUDA GPU, and torch")


def test_sanitize_without_compute_sanitizer_stops_the_run_before_the_first_test():
    """It used to pass unnoticed until the first crash, whose replay then raised FileNotFoundError."""
    proc = pytest_run("fuzz/", "--hypothesis-profile=ci", "--gdn-sanitize", env={"PATH": "/nonexistent"})
    assert proc.returncode == 4, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "--gdn-sanitize: needs compute-sanitizer (the CUDA toolkit's) on PATH" in one_line(proc)


def test_sanitize_command_without_compute_sanitizer_is_one_line():
    """It used to be a FileNotFoundError traceback, after drawing the cases."""
    proc = run("-m", "fuzz", "sanitize", "fla-recurrent", BASE, env={"PATH": "/nonexistent"})
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert one_line(proc) == "gdn-fuzz sanitize: error: needs compute-sanitizer (the CUDA toolkit's) on PATH"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"library": "nosuch"}, "field 'library' is 'nosuch'"),
        ({"case": BASE.replace("T1", "T4")}, "field 'case'"),
    ],
)
def test_bad_corpus_stops_the_run_in_one_line(malformed_corpus, changes, message):
    proc = pytest_run("fuzz/test_corpus.py", "--hypothesis-profile=ci", f"--gdn-corpus={malformed_corpus(**changes)}")
    assert proc.returncode == 4
    assert message in one_line(proc)


def test_empty_corpus_is_an_error(tmp_path):
    proc = pytest_run("fuzz/test_corpus.py", "--hypothesis-profile=ci", f"--gdn-corpus={tmp_path}")
    assert proc.returncode == 4
    assert "no corpus entries" in one_line(proc)


# --- a green run means something ran -------------------------------------------------------------------------------
UNAVAILABLE = ["fuzz/test_decode.py", "--hypothesis-profile=ci", "-k", "flashinfer-cake", "--gdn-target", MUTANT]


@pytest.mark.parametrize("xdist", [[], ["-n", "1"]], ids=["serial", "xdist"])
def test_selected_fuzz_tests_that_ran_nothing_exit_5_with_the_reason(xdist):
    """Every selected target is unavailable (the mutant models no Cake backend): exit 5, also under pytest-xdist,
    whose controller collects nothing itself."""
    proc = pytest_run(*UNAVAILABLE, *xdist)
    assert proc.returncode == 5, proc.stdout[-3000:]
    [line] = [ln for ln in proc.stdout.splitlines() if ln.startswith("gdn-fuzz: ")]
    assert "no example ran (every selected target is unavailable or masked" in line


def test_collect_only_is_not_a_run_that_ran_nothing():
    """HypoFuzz collects with --collect-only."""
    assert pytest_run(*UNAVAILABLE, "--collect-only").returncode == 0


@pytest.mark.parametrize("ci", ["", "1"])
def test_without_a_profile_the_run_is_dev_and_says_its_budget(ci):
    """No --hypothesis-profile: the dev profile, its shapes and its settings (not Hypothesis's default, nor the "ci"
    profile Hypothesis loads itself where $CI is set), and the summary says how many examples a test gets."""
    proc = run(
        "-m",
        "pytest",
        "fuzz/test_decode.py",
        "--collect-only",
        "-k",
        "sglang-recurrent",
        "-p",
        "no:cacheprovider",
        env={"CI": ci},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "gdn-fuzz profile 'dev' on cpu:\n  300 examples per fuzz test (the dev profile's); " in proc.stdout


def test_a_failure_is_its_coordinate_and_a_failed_line_not_a_dump():
    proc = pytest_run(
        "fuzz/test_decode.py", "--hypothesis-profile=ci", "-k", "flashinfer-pretranspose", "--gdn-target", MUTANT
    )
    out = proc.stdout
    assert proc.returncode == 1, out[-3000:]
    assert "FAILED fuzz/test_decode.py::test_decode[flashinfer-pretranspose-fp32]" in out
    lines = [ln for ln in out.splitlines() if ln.startswith("  UnwrittenOutput: ")]
    assert lines, out[-3000:]  # one per dispatch bucket the mutant fails in, each shrunk to its own coordinate
    for line in lines:
        assert any(Case.parse(line.split(": ")[1]).padded)
    assert len(out.splitlines()) < 60 and "FuzzSession" not in out and "object at 0x" not in out


# --- the gdn-fuzz command line: exit 2, one line ---------------------------------------------------------------------
CLI_ERRORS = {
    "unknown command": (["nosuch"], "gdn-fuzz: unknown command 'nosuch'"),
    "gate on a missing installation": (
        ["gate", "--baseline", "/nonexistent", "--candidate", sys.executable],
        "installation '/nonexistent' (baseline): no such file or directory",
    ),
    "gate on an unknown profile": (
        ["gate", "--baseline", sys.executable, "--candidate", sys.executable, "--profile", "nosuch"],
        "--profile nosuch: not a gdn-fuzz profile",
    ),
    "gate on the gate profile, now ci": (
        ["gate", "--baseline", sys.executable, "--candidate", sys.executable, "--profile", "gate"],
        f"--profile gate: {GATE_IS_CI}",
    ),
    "gate on an unknown family": (
        ["gate", "--baseline", sys.executable, "--candidate", sys.executable, "--families", "fla,nosuch"],
        "--families: nosuch is no target family",
    ),
    "gate with a malformed override": (
        ["gate", "--baseline", sys.executable, "--candidate", sys.executable, "--baseline-override", "flashinfer"],
        "--baseline-override 'flashinfer': expected FAMILY=module.path[:attr]",
    ),
    "campaign without families": (["campaign"], "give one or more target families"),
    "campaign on a missing installation": (
        ["campaign", "fla-", "--installation", "old=/nonexistent"],
        "installation '/nonexistent' (old): no such file or directory",
    ),
    "campaign on a file that is no python": (
        ["campaign", "fla-", "--installation", str(ROOT / "README.md")],
        "a file, not executable",
    ),
    "campaign, two installations one label": (
        ["campaign", "fla-", "--installation", f"a={ROOT}", "--installation", f"a={ROOT}"],
        "label 'a' given twice",
    ),
    "campaign on an unknown family": (["campaign", "nosuch-"], "family 'nosuch-' is the prefix of no target"),
    "campaign on an unknown profile": (["campaign", "fla-", "--profile", "nosuch"], "invalid choice: 'nosuch'"),
    "campaign without workers": (["campaign", "fla-", "--workers", "0"], "--workers 0: expected >= 1"),
    "export of a bad coordinate": (["export", BASE.replace("T1", "T4"), "--target", "fla-recurrent"], "decode with T4"),
    "probe of an unknown target": (["probe", BASE, "--target", "nosuch"], "unknown target nosuch"),
    "sanitize of an unknown target": (["sanitize", "nosuch", BASE], "gdn-fuzz sanitize: error: unknown target nosuch"),
    "sanitize into a directory": (  # it used to fail as it wrote, after every case had run under the sanitizer
        ["sanitize", "fla-recurrent", BASE, "--out", str(ROOT)],
        f"gdn-fuzz sanitize: error: --out {ROOT}: a directory; give a file name in it",
    ),
    "probe with a bad grid": (["probe", BASE, "--grid", "B=0"], "--grid B=0: NAME is one of B, H, G, T"),
    "probe with a bad module": (["probe", BASE, "--module", "fla"], "--module 'fla': expected FAMILY=module.path"),
    "export of a missing corpus file": (["export", "/nonexistent.json"], "/nonexistent.json: not readable JSON"),
}


@pytest.mark.parametrize("case", CLI_ERRORS, ids=lambda s: s.replace(" ", "_").replace(",", ""))
def test_bad_command_line_is_one_line_and_exit_2(case, tmp_path):
    args, message = CLI_ERRORS[case]
    proc = run("-m", "fuzz", *args, *(["--out", str(tmp_path)] if args[0] in ("gate", "campaign") else []))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in one_line(proc)
    assert not list(tmp_path.iterdir()), "refused before anything ran"


def test_unlabelled_installations_write_inside_out():
    """An unlabelled PATH is labelled by its directory's name: the run's files (LABEL-FAMILY.json) stay in --out."""
    from fuzz.run.installation import parse

    assert parse(str(ROOT)).label == ROOT.name
    assert parse(sys.executable).label == Path(sys.executable).parent.parent.name
    assert parse(f"0.7.4={ROOT}").label == "0.7.4"


# --- Case: a Case that cannot exist is not constructible ------------------------------------------------------------
BAD_COORDINATES = {
    "unknown op": (BASE.replace("decode", "bogus"), "unknown op 'bogus'"),
    "unknown decay regime": (BASE.replace("decay_mild", "gate_wild"), "decay='wild'"),
    "unknown dtype": (BASE.replace("fp32state", "fp8state"), "unknown token 'fp8state'"),
    "slot outside the pool": (BASE.replace("slots[3,-1]", "slots[4,-1]"), "slots[4,-1]: slot 4 is outside pool4"),
    "write slots for another B": (BASE + "-wslots[1]", "wslots[1]: expected one write slot per request, B2"),
    "write slot outside the pool": (BASE + "-wslots[1,7]", "wslots[1,7]: slot 7 is outside pool4"),
    "token slots for another B": (VERIFY + "-tslots[2/3]", "expected B2 rows of T2 slots"),
    "token slots for another T": (VERIFY + "-tslots[2/3/4,5/6/7]", "expected B2 rows of T2 slots"),
    "token slots without an update": (VERIFY + "-tslots[2/3,4/5]-noupdate", "tslots with noupdate"),
    "intermediate rows for another B": (VERIFY + "-inter2x2+0-rows[0]", "rows[0]: expected one intermediate row"),
    "intermediate row outside the buffer": (VERIFY + "-inter2x2+0-rows[0,2]", "row 2 is outside the 2 rows"),
    "intermediate rows without a buffer": (VERIFY + "-rows[0,1]", "rows[0,1]: intermediate rows, but no intermediate"),
    "fewer buffer rows than requests": (VERIFY + "-inter1x2+0", "1 rows for B2 requests"),
    "fewer buffer steps than tokens": (VERIFY + "-inter2x1+0", "1 steps for T2 tokens"),
    "decode with T4": (BASE.replace("T1", "T4"), "decode with T4"),
    "prefill without seqlens": (PREFILL, "seqlens[]: a prefill has one sequence length per request, B2"),
    "prefill with T past its longest sequence": (PREFILL + "-seqlens[1,1]", "prefill with T2"),
    "prefill without an update": (PREFILL + "-seqlens[2,1]-noupdate", "prefill: no tslots"),
    "seqlens outside a prefill": (BASE + "-seqlens[1,1]", "only a prefill has sequence lengths"),
    "empty pool": (BASE.replace("pool4", "pool0"), "pool=0: expected an integer >= 1"),
    "no qk heads": (BASE.replace("-H1-", "-H0-"), "H=0"),
    "no value heads": (BASE.replace("HV2", "HV0"), "HV=0"),
    "no key dim": (BASE.replace("K8", "K0"), "K=0"),
    "no value dim": (BASE.replace("V16", "V0"), "V=0"),
    "seed past 32 bits": (BASE.replace("seed7", "seed4294967296"), "seed4294967296"),
    "unknown null sentinel": (BASE + "-null5", "null=5"),
    "duplicate token": (BASE + "-T1", "'T1' repeats 'T1'"),
    "duplicate flag": (BASE + "-nol2-nol2", "'nol2' repeats 'nol2'"),
    "B that disagrees with the slots": (BASE.replace("B2", "B3"), "'B3' disagrees with slots[3,-1]"),
    "pad that disagrees with the slots": (BASE.replace("pad1", "pad0"), "'pad0' disagrees"),
    "missing seed": (BASE.replace("-seed7", ""), "missing seed"),
    "trailing garbage": (BASE + "xyz", "unknown token 'slots[3,-1]xyz'"),
    "trailing dash": (BASE + "-", "unknown token ''"),
    "garbage in a list": (BASE.replace("slots[3,-1]", "slots[3,a]"), "unknown token 'slots[3,a]'"),
    "scale that is no number": (BASE + "-scalefoo", "unknown token 'scalefoo'"),
    "zero scale": (BASE + "-scale0.0", "scale=0.0"),
    "unknown edge": (BASE + "-edge_cliff", "edge 'cliff': expected one of pad-past-scratch"),
    "accepted counts without token slots": (VERIFY + "-acc[1,1]", "acc[1,1]: accepted counts select a per-token slot"),
    "accepted counts for another B": (VLLM + "-acc[1]", "acc[1]: expected one accepted count per request, B2"),
    "accepted count that reads another slot": (VLLM + "-acc[2,1]", "request 0 reads slot 3 (tslots column 1)"),
    "out-of-range count with a live read slot": (VLLM + "-acc[0,1]", "count 0 names no starting state"),
    "accepted count past 2T": (
        VLLM_SKIPPED + "-acc[5,1]",
        "count 5 is outside 0..2T",
    ),
    "scratch short of a live row": (VERIFY + "-inter1x2+0-edge_pad_past_scratch", "1 rows for B2 requests"),
}


@pytest.mark.parametrize("name", BAD_COORDINATES, ids=lambda s: s.replace(" ", "_"))
def test_a_coordinate_that_names_no_case_is_refused_in_one_line(name):
    coordinate, message = BAD_COORDINATES[name]
    with pytest.raises(CaseError) as error:
        Case.parse(coordinate)
    assert message in str(error.value) and "\n" not in str(error.value)


BAD_FIELDS = {
    "a string for an int": (dict(H="1"), "H='1'"),
    "a list for a tuple": (dict(read_slots=[1]), "read_slots=[1]"),
    "no requests": (dict(read_slots=()), "slots[]"),
    "an int for a flag": (dict(l2norm=0), "l2norm=0"),
    "unknown layout": (dict(layout="xy"), "layout='xy'"),
    "unknown index dtype": (dict(index_dtype="i16"), "index_dtype='i16'"),
    "unknown input dtype": (dict(input_dtype="fp8"), "input_dtype='fp8'"),
    "negative pool": (dict(pool=-3), "pool=-3"),
    "negative gap": (dict(pool_gap=-1), "pool_gap=-1"),
    "negative warm pool": (dict(warm_pool=-1), "warm_pool=-1"),
    "scale the coordinate cannot spell": (dict(scale=1e-5), "scale=1e-05"),
    "non-finite scale": (dict(scale=float("nan")), "scale=nan"),
    "buffer steps without rows": (dict(inter_steps=2), "steps without rows"),
}


@pytest.mark.parametrize("name", BAD_FIELDS, ids=lambda s: s.replace(" ", "_"))
def test_a_case_that_cannot_exist_is_not_constructible(name):
    changes, message = BAD_FIELDS[name]
    with pytest.raises(CaseError) as error:
        Case.parse(BASE).replace(**changes)
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"op": "decode"}, "missing field(s) ['H', 'HV', 'K', 'V', 'T', 'pool', 'read_slots', 'seed']"),
        ({**Case.parse(BASE).to_json(), "extra": 1}, "unknown field(s) ['extra']"),
        ({**Case.parse(BASE).to_json(), "T": 4}, "decode with T4"),
        ([], "expected a JSON object"),
    ],
)
def test_from_json_refuses_what_is_no_case(data, message):
    with pytest.raises(CaseError) as error:
        Case.from_json(data)
    assert message in str(error.value)


@pytest.mark.parametrize(
    "coordinate",
    [
        BASE.replace("HV2", "HV3"),  # HV not a multiple of H: an invalid input the target must reject, still a Case
        "decode-B2-T1-H1-HV1-K8-V16-pool4-pad1-fp32state-bf16in-i32-vk-decay_mild-seed7-slots[0,3]-null0",  # 0: padding
        BASE.replace("slots[3,-1]", "slots[3,-2]"),  # any negative slot is padding by the contract
        VERIFY + "-tslots[2/-1,4/5]",  # a padded token slot
        VERIFY + "-inter4x3+1-rows[3,-1]",  # explicit rows, one request storing none
        VERIFY.replace("T2", "T1"),  # verify with one token
        "prefill-B2-T0-H1-HV1-K8-V8-pool3-pad0-fp32state-bf16in-i32-vk-decay_mild-seed0-slots[0,1]-seqlens[0,0]",
        BASE + "-scale0.25-warm3-gap1-nol2-noupdate",
        VLLM + "-acc[1,1]",  # accepted counts select the read slot (tslots column count - 1)
        VLLM_PADDED + "-acc[2,1]",  # a padded row: the null slot in every column, accepted 1
        VLLM_SKIPPED + "-acc[0,1]-edge_accepted_zero",  # a skipped edge row: null
        VLLM_SKIPPED + "-acc[3,1]-edge_accepted_past_T",
        VERIFY.replace("B2", "B3").replace("pad0", "pad2").replace("slots[0,1]", "slots[1,-1,-1]")
        + "-inter2x2+0-edge_pad_past_scratch",  # the padded tail past a scratch of 2 rows
        BASE.replace("slots[3,-1]", "slots[0,-1]") + "-edge_slot_zero",
    ],
)
def test_structural_choices_stay_valid_cases(coordinate):
    case = Case.parse(coordinate)
    assert Case.parse(repr(case)) == case == Case.from_json(case.to_json())


# --- strategies never draw a Case the validation refuses ----------------------------------------------------------
@pytest.fixture(scope="module", autouse=True)
def cpu_flashinfer():
    with overridden({"flashinfer": "fuzz.standins.flashinfer_cpu"}):
        yield


# The h200 profile's large tests as an H200 resolves the budget (139 GiB free, GPU_RESERVE kept back): every target
# has a bucket that fits there, so every op draws.
H200_LARGE = dataclasses.replace(BUDGETS["h200"], large_bytes=int(139 * 2**30 * (1 - GPU_RESERVE)))


@pytest.mark.parametrize("target", TARGETS, ids=str)
@pytest.mark.parametrize(
    ("budget", "large"),
    [("ci", False), ("dev", False), ("h200", False), ("h200", True)],
    ids=["ci", "dev", "h200", "h200-large"],
)
@settings(max_examples=30, database=None, suppress_health_check=list(HealthCheck), deadline=None)
@given(data=st.data())
def test_every_drawn_case_validates(target, budget, large, data):
    """Drawing builds the Case, so a draw that broke validation raises CaseError here; each op and mask policy."""
    op = data.draw(st.sampled_from(sorted(target.support.ops)))
    bugs = target.known_bugs(data.draw(st.sampled_from(MASK_POLICIES)))
    case = data.draw(cases(target, op, H200_LARGE if large else BUDGETS[budget], bugs, large))
    assert Case.parse(repr(case)) == case


# --- the wheel: the corpus, the pytest plugin -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel of this checkout, built in a temporary directory."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "src"
    for name in ("fuzz", "reference", "corpus"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    built = run(
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-q",
        "-w",
        str(tmp / "dist"),
        str(source),
        timeout=600,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    [path] = (tmp / "dist").glob("*.whl")
    return path


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """The wheel installed into a directory of its own (put on PYTHONPATH: its entry points are then live)."""
    target = tmp_path_factory.mktemp("site")
    done = run("-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel), timeout=600)
    assert done.returncode == 0, done.stderr
    return target


def test_the_wheel_ships_every_package_and_the_corpus(wheel, installed, tmp_path):
    names = set(zipfile.ZipFile(wheel).namelist())
    corpus = sorted(p.name for p in (ROOT / "corpus").glob("*.json"))
    assert corpus and {f"fuzz/corpus_data/{n}" for n in corpus} <= names
    packages = {str(p.parent.relative_to(ROOT)) for d in ("fuzz", "reference") for p in (ROOT / d).rglob("__init__.py")}
    assert {f"{p}/__init__.py" for p in packages} <= names, "a package missing from pyproject's list"

    probe = (
        "import importlib.resources, fuzz\nfrom fuzz.run import corpus\n"
        "print(fuzz.__file__)\n"
        "print(sorted(p.name for p in importlib.resources.files('fuzz.corpus_data').iterdir()))\n"
        "print(corpus.default_dir(), len(corpus.load_all()))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(installed)},
    )
    assert proc.returncode == 0, proc.stderr
    where, listed, loaded = proc.stdout.splitlines()[-3:]
    assert where.startswith(str(installed))
    assert eval(listed) == corpus  # our own probe's printed list
    assert loaded == f"{installed / 'fuzz' / 'corpus_data'} {len(corpus)}"


def test_the_wheel_declares_the_pytest_plugin_entry_point(wheel):
    [entry_points] = [n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".dist-info/entry_points.txt")]
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[pytest11]\ngdn_fuzz = fuzz.suite.plugin\n" in text, text


def test_installed_the_plugin_loads_once_and_runs_the_fuzz_suites(installed, tmp_path):
    """With the entry point live, fuzz/conftest.py must not register the hooks a second time (pytest refuses the
    options twice); elsewhere the options are there."""
    env = {**os.environ, "PYTHONPATH": str(installed)}
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(installed / "fuzz" / "test_decode.py"),
            "-q",
            "-p",
            "no:cacheprovider",
            "--hypothesis-profile=ci",
            "-k",
            "sglang-recurrent",
            "--gdn-examples=3",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert ran.returncode == 0 and ran.stdout.count("gdn-fuzz targets") == 1, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert "sglang-recurrent                   ran (installed, " in ran.stdout
    helped = subprocess.run(
        [sys.executable, "-m", "pytest", "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env
    )
    assert "--gdn-events=FILE.jsonl" in helped.stdout, helped.stdout[-2000:] + helped.stderr[-2000:]


def test_the_plugin_is_dormant_in_a_run_that_collects_nothing_of_ours(tmp_path):
    """A user's own tests, with its own Hypothesis profile, run as if gdn-fuzz were not installed: the plugin used to
    refuse the profile (exit 4), and print its targets table in every run."""
    (tmp_path / "conftest.py").write_text('from hypothesis import settings\n\nsettings.register_profile("theirs")\n')
    (tmp_path / "test_theirs.py").write_text("def test_theirs():\n    assert True\n")
    runs = {
        plugin: subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "_hypothesis_pytestplugin",
                *plugin,
                "--hypothesis-profile=theirs",
                "-p",
                "no:cacheprovider",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYTHONPATH": str(ROOT), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        )  # the same plugins
        for plugin in ((), ("-p", "fuzz.suite.plugin"))
    }  # installed or not
    for proc in runs.values():
        assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    mine = runs["-p", "fuzz.suite.plugin"].stdout
    assert "gdn-fuzz" not in mine and len(mine.splitlines()) == len(runs[()].stdout.splitlines()), mine


def test_a_required_family_that_does_not_load_is_a_usage_error(tmp_path):
    """--gdn-require of a missing library used to exit 1, a finding's status, after failing each of its tests."""
    shadow = tmp_path / "flashinfer"  # first on the path: flashinfer fails to import, installed or not
    shadow.mkdir()
    (shadow / "__init__.py").write_text("raise ImportError('shadowed by the test')\n")
    proc = run(
        *"-m pytest fuzz/test_decode.py -p no:cacheprovider --hypothesis-profile=ci --gdn-require=flashinfer".split(),
        env={"PYTHONPATH": os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)},
    )
    assert proc.returncode == 4, proc.stdout[-1500:] + proc.stderr[-1500:]
    assert "--gdn-require=flashinfer: flashinfer cannot be loaded here" in proc.stderr
