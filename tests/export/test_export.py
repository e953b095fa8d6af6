"""fuzz.export: scripts generated from the fuzzer's own sources, run where gdn-fuzz cannot be imported.

Every registry target is exported for a small drawn case of each operation it supports (through the CPU stand-ins
for the GPU library, through the installed fla-core and SGLang under TRITON_INTERPRET=1), and so are a few mutants of
the stand-in, a few cases chosen to cover every tensor-generation path, and the corpus entries that run on a CPU.
Every script runs once, in parallel, in a fresh interpreter whose PYTHONPATH shadows gdn-fuzz's packages with ones
that refuse to import (the venv has gdn-fuzz installed editable), with --dump: its verdict must be the one
fuzz.run.harness.check gives in-process, and its tensors must equal materialize()'s bit for bit.

Drawing the Triton targets' cases and checking them in-process imports triton, which must see TRITON_INTERPRET=1
first: that happens in one child process (`prepare`), never in this one.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest
import torch

from fuzz.cli.export import main as export_main
from fuzz.export import embed, issue
from fuzz.export.runner import EmbeddedModules
from fuzz.export.script import MARKER, adapter_of, export_script
from fuzz.generate.materialize import materialize
from fuzz.model.case import Case
from fuzz.model.guarded import Guarded
from fuzz.model.known_bugs import BY_ID
from fuzz.run import corpus
from fuzz.targets.registry import TARGETS

REPO = Path(__file__).resolve().parents[2]
BY_NAME = {t.name: t for t in TARGETS}
STANDINS = {
    "fuzz.targets.flashinfer": "fuzz.standins.flashinfer_cpu",
    "fuzz.targets.flashinfer_sm100": "fuzz.standins.flashinfer_sm100_cpu",
}
PADDED = "decode-B1-T1-H1-HV1-K8-V16-pool1-pad1-fp32state-bf16in-i32-vk-gate_mild-seed0-slots[-1]"


@dataclass(frozen=True)
class Spec:
    """One exported script. `coordinate` None: drawn (the first valid case of several requests a derandomized draw
    gives, a padded and a live one among them where the target takes a pool); `entry`: from that corpus file."""

    id: str
    target: str
    coordinate: str | None = None
    op: str | None = None
    module: str | None = None
    entry: str | None = None


def _standin(target: str) -> str | None:
    return STANDINS.get(adapter_of(BY_NAME[target]))


DRAWN = [
    Spec(f"{t.name}-{op}", t.name, op=op, module=_standin(t.name)) for t in TARGETS for op in sorted(t.support.ops)
]
MUTANTS = [
    Spec(f"mutant-{name}", target, coordinate, module=f"tests.mutants:{name}")
    for name, target, coordinate in (
        ("padded_output_not_zeroed", "flashinfer-pretranspose-fp32", PADDED),
        (
            "padded_output_rewritten",
            "flashinfer-mtp-fp32",
            "verify-B1-T2-H1-HV1-K8-V16-pool1-pad1-fp32state-bf16in-i32-vk-gate_mild-seed0-slots[-1]",
        ),
        (
            "inter_row_by_slot",
            "flashinfer-mtp-fp32",
            "verify-B1-T1-H1-HV1-K8-V16-pool2-pad0-fp32state-bf16in-i32-vk-gate_mild-seed0-slots[1]-inter2x1+0",
        ),
        (
            "prefill_skipped_write_wraps",
            "flashinfer-prefill-chunk",
            "prefill-B1-T1-H1-HV1-K8-V16-pool1-pad1-fp32state-bf16in-i32-vk-gate_mild-seed0-slots[-1]-seqlens[1]",
        ),
        # only the unjudged warm call on a larger pool trips it: the script must make that call too
        (
            "strided_pool_capacity_baked_in",
            "flashinfer-mtp-fp32",
            "verify-B1-T2-H1-HV1-K8-V16-pool2-pad0-fp32state-bf16in-i32-vk-gate_mild-seed0-slots[1]-gap1-warm3",
        ),
    )
]
BUILDS = [
    Spec(f"build-{n}", target, coordinate, module=_standin(target))
    for n, (target, coordinate) in enumerate(
        (
            # every generation path: each gate regime and "mixed", prefill, both layouts, strides, dtypes, buffers
            (
                "flashinfer-bf16",
                "verify-B3-T6-H1-HV2-K8-V16-pool7-pad1-bf16state-fp16in-i32-vk-gate_mixed-seed3-"
                "slots[5,-1,2]-wslots[4,-1,6]-inter3x8+0-noupdate",
            ),
            (
                "flashinfer-mtp-fp32",
                "verify-B2-T3-H1-HV2-K8-V16-pool9-pad1-fp32state-bf16in-i64-vk-gate_saturated-seed11-"
                "slots[5,-1]-tslots[1/2/3,4/6/7]-inter3x4+1",
            ),
            (
                "flashinfer-prefill-chunk",
                "prefill-B3-T4-H1-HV2-K8-V16-pool5-pad1-fp32state-fp16in-i32-vk-gate_forget-seed4-"
                "slots[3,-1,1]-seqlens[4,2,0]-wslots[2,4,0]-gap1",
            ),
            (
                "flashinfer-decode-kmajor",
                "decode-B2-T1-H2-HV4-K8-V16-pool2-pad0-fp32state-fp16in-i64-kv-gate_threshold-"
                "seed5-slots[0,1]-scale0.25-nol2",
            ),
            (
                "sglang-sigmoid",
                "verify-B3-T6-H1-HV2-K8-V16-pool7-pad1-fp32state-fp32in-i32-vk-gate_negsat-seed5-"
                "slots[5,-1,2]-gap3-inter4x8+1-rows[2,0,-1]-scale0.25",
            ),
        )
    )
]
CPU_FAMILIES = {"fla": "fla-core", "sglang": "sglang"}  # the Triton families, which run on a CPU interpreted


def _cpu_corpus() -> list:
    """Corpus entries of the Triton families, skipped (with the reason) where the installed release is another."""
    params = []
    for entry in corpus.load_all():
        dist = CPU_FAMILIES.get(entry.library)
        if dist is None:
            continue
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            version = None
        reason = (
            f"{dist} is not installed"
            if version is None
            else f"holds for {entry.versions}, {dist} {version} is installed"
            if entry.versions and version not in entry.versions
            else None
        )
        spec = Spec(f"corpus-{entry.path.stem}", entry.target, entry=str(entry.path))
        marks = [pytest.mark.skip(reason=f"{entry.target} unavailable: {reason}")] if reason else []
        params.append(pytest.param(spec, id=spec.id, marks=marks))
    return params


CORPUS = _cpu_corpus()
SPECS = DRAWN + MUTANTS + BUILDS + [p.values[0] for p in CORPUS if not p.marks]


# ---- the child that draws, exports and checks in-process (TRITON_INTERPRET=1 before triton loads) -----------------
def prepare(specs: str, directory: str) -> None:
    """For each Spec (JSON): the case, its script (exported through the command line) and the in-process verdict,
    one JSON line each."""
    from fuzz.targets.registry import overridden

    for spec in (Spec(**s) for s in json.loads(specs)):
        target = BY_NAME[spec.target]
        with overridden({target.family.name: spec.module} if spec.module else {}):
            _prepare(spec, target, directory)


def _prepare(spec, target, directory: str) -> None:
    """One Spec of `prepare`, with its override in place."""
    from hypothesis import HealthCheck, Phase, find, settings

    from fuzz.cli.main import main as cli_main
    from fuzz.generate.profiles import BUDGETS
    from fuzz.generate.strategies import cases
    from fuzz.run.harness import check

    if spec.entry:
        case = corpus.load(Path(spec.entry)).case
    elif spec.coordinate:
        case = Case.parse(spec.coordinate)
    else:  # no shrinking: a case as varied as the fuzzer's, and cheap to find
        pool = target.declared().pool
        case = find(
            cases(target, spec.op, BUDGETS["ci"], target.known_bugs()),
            lambda c, pool=pool: c.valid and c.B > 1 and (not pool or 0 < sum(c.padded) < c.B),
            settings=settings(
                database=None,
                derandomize=True,
                max_examples=500,
                deadline=None,
                phases=[Phase.generate],
                suppress_health_check=list(HealthCheck),
            ),
        )
    script = Path(directory) / f"{spec.id}.py"
    args = ([spec.entry] if spec.entry else [repr(case), "--target", spec.target]) + ["-o", str(script)]
    assert cli_main(["export", *args, *(["--module", spec.module] if spec.module else [])]) == 0
    failure = None if spec.entry else check(target, case, "cpu").failure
    print(
        json.dumps(
            dict(
                id=spec.id,
                case=repr(case),
                script=str(script),
                fuzzer=failure and [failure.kind, failure.detail.splitlines()[0]],
            )
        ),
        flush=True,
    )


def fresh_env(directory: Path) -> dict:
    """The environment of a fresh interpreter that cannot import gdn-fuzz: PYTHONPATH starts with a folder whose
    fuzz/, reference/ and tests/ raise ImportError; the caller's other entries (a GPU host's libraries) follow."""
    blocker = directory / "no_gdn_fuzz"
    for package in embed.PACKAGES:
        (blocker / package).mkdir(parents=True, exist_ok=True)
        (blocker / package / "__init__.py").write_text(f"raise ImportError('gdn-fuzz imported: {package}')\n")
    libraries = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != REPO]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRITON_INTERPRET")}
    return {**env, "PYTHONPATH": os.pathsep.join([str(blocker), *libraries])}


def run_fresh(script: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(script), *args],
        env=env or fresh_env(script.parent),
        cwd=script.parent,
        capture_output=True,
        text=True,
        timeout=600,
    )


@dataclass
class Run:
    case: Case
    script: Path
    fuzzer: list | None  # [kind, first line of the detail] of the in-process check, None: it passed
    rc: int
    out: str
    dump: Path


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Run]:
    directory = tmp_path_factory.mktemp("export")
    code = (
        f"from tests.export.test_export import prepare; prepare({json.dumps([asdict(s) for s in SPECS])!r}, "
        f"{str(directory)!r})"
    )
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-6000:]
    prepared = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert [p["id"] for p in prepared] == [s.id for s in SPECS]

    env = fresh_env(directory)

    def run(p: dict) -> Run:
        script = Path(p["script"])
        done = run_fresh(script, "--device", "cpu", "--dump", str(script.with_suffix(".pt")), env=env)
        return Run(
            Case.parse(p["case"]),
            script,
            p["fuzzer"],
            done.returncode,
            done.stdout + done.stderr,
            script.with_suffix(".pt"),
        )

    with ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as pool:
        return {p["id"]: r for p, r in zip(prepared, pool.map(run, prepared))}


def verdict(out: str) -> str:
    return [line for line in out.splitlines() if line.startswith(("REPRODUCED", "NOT REPRODUCED", "NOT RUN"))][-1]


def _same(x, y) -> bool:
    """Same dtype, shape, strides, offset and bits (None only matches None)."""
    if x is None or y is None:
        return x is None and y is None
    return (x.dtype, x.shape, x.stride(), x.storage_offset()) == (
        y.dtype,
        y.shape,
        y.stride(),
        y.storage_offset(),
    ) and torch.equal(x.contiguous().view(torch.uint8), y.contiguous().view(torch.uint8))


# ---- the tests ---------------------------------------------------------------------------------------------------
def test_gdn_fuzz_cannot_be_imported_where_the_scripts_run(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", "import fuzz"], env=fresh_env(tmp_path), cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode != 0 and "gdn-fuzz imported" in proc.stderr


@pytest.mark.parametrize("spec", DRAWN, ids=lambda s: s.id)
def test_every_target_exports_and_passes_what_the_fuzzer_passes(runs, spec):
    r = runs[spec.id]
    assert r.fuzzer is None, f"{r.case!r}: the fuzzer fails {r.fuzzer}"
    assert r.rc == 0 and verdict(r.out) == "NOT REPRODUCED", r.out
    assert f"case:        {r.case!r}" in r.out and "environment: python" in r.out


@pytest.mark.parametrize("spec", MUTANTS, ids=lambda s: s.id)
def test_mutant_reproduces_with_the_fuzzers_failure(runs, spec):
    r = runs[spec.id]
    assert r.fuzzer is not None, f"{r.case!r}: the fuzzer passes the mutant"
    assert r.rc == 1 and verdict(r.out) == f"REPRODUCED: {r.fuzzer[0]}: {r.fuzzer[1]}", r.out


@pytest.mark.parametrize("spec", BUILDS, ids=lambda s: s.id)
def test_script_verdict_is_the_fuzzers(runs, spec):
    r = runs[spec.id]
    want = "NOT REPRODUCED" if r.fuzzer is None else f"REPRODUCED: {r.fuzzer[0]}: {r.fuzzer[1]}"
    assert r.rc == (0 if r.fuzzer is None else 1) and verdict(r.out) == want, r.out


@pytest.mark.parametrize("spec", CORPUS)
def test_corpus_entry_reproduces_standalone(runs, spec):
    r, entry = runs[spec.id], corpus.load(Path(spec.entry))
    assert " ".join(entry.description.split()) in " ".join(r.script.read_text().split())  # the expectation, on top
    if entry.expect == "pass":
        assert r.rc == 0 and verdict(r.out) == "NOT REPRODUCED", r.out
    else:
        assert r.rc == 1 and verdict(r.out).startswith(f"REPRODUCED: {entry.expect}: "), r.out


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.id)
def test_script_tensors_are_materializes_bit_for_bit(runs, spec):
    r = runs[spec.id]
    got, want = torch.load(r.dump), materialize(r.case, "cpu")
    for name, value in vars(want).items():
        pairs = (
            [(f"{name}.full", value.full), (f"{name}.view", value.view)]
            if isinstance(value, Guarded)
            else [(name, value)]
        )
        for key, tensor in pairs:
            assert _same(got.pop(key, None), tensor), key
    assert not got, f"tensors materialize() does not build: {sorted(got)}"


def _embedded(script: Path) -> dict[str, str]:
    tree = ast.parse(script.read_text())
    node = next(n for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "SOURCES")
    return ast.literal_eval(node.value)


def test_script_carries_the_fuzzers_modules_verbatim_and_only_those_its_target_needs(runs):
    sources = {spec.target: _embedded(runs[spec.id].script) for spec in DRAWN}
    for embedded in sources.values():
        for name, text in embedded.items():
            assert text == (embed.ROOT / embed.path_of(name)).read_text(), name
    common = {
        "fuzz.model.case",
        "fuzz.model.values",
        "fuzz.model.guarded",
        "fuzz.model.patterns",
        "fuzz.model.tensors",
        "fuzz.model.support",
        "fuzz.generate.materialize",
        "fuzz.targets.base",
        "fuzz.targets.semantics",
        "fuzz.model.known_bugs",
        "reference",
        "reference.batched",
        "fuzz.judge.failures",
        "fuzz.judge.oracle",
        "fuzz.judge.tolerance",
        "fuzz.judge.verdict",
        "fuzz.run.harness",
        "fuzz.run.result",
        "fuzz.run.environment",
    }
    never = {"fuzz.targets.registry", "fuzz.generate.strategies", "fuzz.suite.session", "fuzz.export.script"}
    adapters = {
        "fuzz.targets.fla",
        "fuzz.targets.sglang",
        "fuzz.targets.sglang_loader",
        "fuzz.targets.flashinfer",
        "fuzz.targets.flashinfer_sm100",
        "fuzz.standins.flashinfer_cpu",
        "fuzz.standins.flashinfer_sm100_cpu",
    }
    wanted = {
        "fla-recurrent": {"fuzz.targets.fla"},
        "sglang-packed": {"fuzz.targets.sglang", "fuzz.targets.sglang_loader"},
        "flashinfer-bf16": {"fuzz.targets.flashinfer", "fuzz.standins.flashinfer_cpu"},
        "flashinfer-cake-fp32": {
            "fuzz.targets.flashinfer",
            "fuzz.targets.flashinfer_sm100",
            "fuzz.standins.flashinfer_cpu",
            "fuzz.standins.flashinfer_sm100_cpu",
        },
    }
    for target, modules in wanted.items():
        assert common | modules <= set(sources[target]) and not never & set(sources[target]), target
        assert set(sources[target]) & adapters == modules, target


LITERALS = ["x = 1\n", "s = r'a\\'\n", "d = '''q'''\n", "e = '''q''' + \"\"\"r\"\"\"\n", "", "ends without a newline '"]


@pytest.mark.parametrize("source", LITERALS)
def test_sources_are_embedded_as_literals_that_read_back_verbatim(source):
    assert ast.literal_eval(embed.literal(source)) == source


def test_embedded_modules_import_under_their_own_names(monkeypatch):
    """Dataclasses under `from __future__ import annotations` (a ClassVar is told from a field through the module's
    namespace), relative imports, a package without source, tracebacks with the embedded lines; a module of the same
    package that is not embedded does not import."""
    shapes = """from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class Shape:
    B: int
    limit: ClassVar[int] = 4
"""
    use = "from ..shapes import Shape\n\n\ndef broken():\n    raise ValueError('from the embedded file')\n"
    sources = {"gdnembed": "", "gdnembed.shapes": shapes, "gdnembed.sub.use": use}
    monkeypatch.setattr(sys, "meta_path", [EmbeddedModules(sources, "repro.py"), *sys.meta_path])
    try:
        use = importlib.import_module("gdnembed.sub.use")
        assert [f.name for f in dataclasses.fields(use.Shape)] == ["B"] and use.Shape(2).B == 2
        assert use.__file__ == "repro.py:gdnembed/sub/use.py" and sys.modules["gdnembed.sub"].__path__ == []
        with pytest.raises(ValueError) as raised:
            use.broken()
        assert "raise ValueError('from the embedded file')" in "".join(traceback.format_exception(raised.value))
        with pytest.raises(ModuleNotFoundError, match="gdnembed.other is not embedded in this script"):
            importlib.import_module("gdnembed.other")
    finally:
        for name in [m for m in sys.modules if m.partition(".")[0] == "gdnembed"]:
            del sys.modules[name]


def test_the_library_not_loading_is_not_run(tmp_path):
    script = tmp_path / "repro.py"
    assert export_main([PADDED, "--target", "flashinfer-bf16", "--module", "no_such_module", "-o", str(script)]) == 0
    proc = run_fresh(script, "--device", "cpu")
    assert proc.returncode == 2 and verdict(proc.stdout) == "NOT RUN: the library did not load", proc.stdout
    assert "override no_such_module: No module named 'no_such_module'" in proc.stdout


def test_issue_body_from_a_reproduced_corpus_entry(tmp_path, capsys):
    entry = corpus.load(REPO / "corpus" / "sglang-recurrent-decode-StateMismatch-0.json")
    installed = importlib.metadata.version("sglang")  # pinned by constraints-cpu.txt: a mismatch is ours to fix
    assert installed in entry.versions, f"{entry.path.name} holds for sglang {entry.versions}, {installed} is installed"
    script, body = tmp_path / "repro.py", tmp_path / "issue.md"
    assert export_main([str(entry.path), "-o", str(script), "--issue", str(body)]) == 0
    text = body.read_text()
    assert str(tmp_path) not in text and sys.prefix not in text  # no path of this machine
    said = capsys.readouterr().out.splitlines()
    assert said[0].startswith(f"wrote {script} (") and said[1] == f"wrote {body}: {text.splitlines()[0][2:]}"
    assert said[2].startswith("  the script's verdict here: REPRODUCED: StateMismatch: "), said
    assert "It ran on the CPU under the Triton interpreter (TRITON_INTERPRET=1)" in text
    assert text.startswith(
        f"# [sglang {importlib.metadata.version('sglang')}] "
        "fused_recurrent_gated_delta_rule_update: StateMismatch: @input_guard .contiguous() "
        "copies a strided pool view, the state write is lost\n"
    )
    assert "**What happens.** `sglang." in text  # the function's qualified name
    assert "`StateMismatch`: state[" in text
    assert f"`{entry.case!r}`" in text and "a strided view: 1 spare heads after each slot" in text
    assert "| torch | " in text and "python repro.py\n" in text and "pip install --no-deps sglang==" in text
    assert "REPRODUCED: StateMismatch" in text and "<details><summary>" in text
    assert len(text) < issue.BODY_LIMIT and (
        "```python\n" + script.read_text() in text or "is attached: too long for an issue body" in text
    )


def test_issue_body_states_the_expectation_where_the_case_cannot_run(tmp_path):
    """The library cannot load where the body is written (an override that does not exist: so on a GPU host too)."""
    entry = corpus.load(REPO / "corpus" / "flashinfer-bf16-verify-StateMismatch-0.json")
    script, body = tmp_path / "repro.py", tmp_path / "issue.md"
    export_main([str(entry.path), "-o", str(script), "--issue", str(body), "--module", "no_such_module"])
    text = body.read_text()
    assert text.startswith("# [flashinfer-python") and "StateMismatch: bf16-state gated_delta_rule_mtp" in text
    assert "Not reproduced where this report was written: `NOT RUN: the library did not load`" in text
    bug = BY_ID[entry.bug]
    # the root cause in the library's words, a paragraph of its own after where the script ran; not our masks
    assert f"written.\n\n**Known root cause** ({bug.releases}): {bug.root_cause}\n" in text
    assert "masked by" not in text and bug.root_cause.endswith(".") and "; masked by" in bug.summary
    assert "is attached: too long for an issue body" in text and "\nSOURCES = {" not in text


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--target", "nosuch"], "unknown target 'nosuch'"),
        (["--target", "fla-recurrent", "-o", "missing/dir/x.py"], "-o missing/dir/x.py: no directory missing/dir"),
        (["--target", "fla-recurrent", "-o", "x.py", "--issue", "missing/i.md"], "--issue missing/i.md: no directory"),
    ],
    ids=["unknown-target", "no-output-dir", "no-issue-dir"],
)
def test_export_bad_input_is_one_line(args, says, capsys):
    with pytest.raises(SystemExit) as exit_:
        export_main([PADDED, *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and says in err[-1] and "Traceback" not in "".join(err), err


def test_export_bad_coordinate_and_corpus_file_are_one_line(tmp_path, capsys):
    (bad := tmp_path / "bad.json").write_text("{")
    for case in ("decode-B1-nonsense", str(bad)):
        with pytest.raises(SystemExit) as exit_:
            export_main([case, "--target", "fla-recurrent"])
        assert exit_.value.code == 2 and case in capsys.readouterr().err.splitlines()[-1]


def test_export_says_what_it_wrote(tmp_path, capsys):
    script = tmp_path / "r.py"
    assert export_main([PADDED, "--target", "fla-recurrent", "-o", str(script)]) == 0
    assert (
        capsys.readouterr().out == f"wrote {script} ({len(script.read_text().splitlines())} lines): python {script}\n"
    )


def test_cli_and_the_gates_call(capsys):
    with pytest.raises(SystemExit):
        export_main([PADDED])
    with pytest.raises(ValueError, match="unknown target"):
        export_script(Case.parse(PADDED), "flashinfer")
    assert export_main([PADDED, "--target", "fla-recurrent"]) == 0
    assert capsys.readouterr().out.startswith('"""Reproduction of a gdn-fuzz case on fla-recurrent')
    text = export_script(
        Case.parse(PADDED), "flashinfer-bf16", library_module="tests.mutants:gva_head_modulo", note="from the gate"
    )  # as gdn-fuzz gate exports its new and fixed failures
    assert "\nNote:     from the gate\n" in text and "OVERRIDE = 'tests.mutants:gva_head_modulo'" in text


def _gpu_corpus() -> list:
    """FlashInfer corpus entries: run where a GPU and a FlashInfer release they hold for are installed."""
    params = []
    for entry in corpus.load_all():
        if entry.library != "flashinfer":
            continue
        try:
            version = importlib.metadata.version("flashinfer-python")
        except importlib.metadata.PackageNotFoundError:
            version = None
        reason = (
            "no CUDA GPU here"
            if not torch.cuda.is_available()
            else "flashinfer-python is not installed"
            if version is None
            else f"holds for {entry.versions}, {version} is installed"
            if entry.versions and version not in entry.versions
            else None
        )
        marks = [pytest.mark.skip(reason=f"{entry.target} unavailable: {reason}")] if reason else []
        params.append(pytest.param(entry, id=entry.path.stem, marks=marks))
    return params


@pytest.mark.parametrize("entry", _gpu_corpus())
def test_gpu_corpus_entry_reproduces_standalone(tmp_path, entry):
    script = tmp_path / "repro.py"
    assert export_main([str(entry.path), "-o", str(script)]) == 0
    proc = run_fresh(script)
    if entry.expect == "pass":
        assert proc.returncode == 0 and verdict(proc.stdout) == "NOT REPRODUCED", proc.stdout + proc.stderr
    else:
        assert proc.returncode == 1 and verdict(proc.stdout).startswith(f"REPRODUCED: {entry.expect}: "), (
            proc.stdout + proc.stderr
        )


# ---- the call on top ----------------------------------------------------------------------------------------------
SHOWN = [  # one target of each family, a padded slot among the FlashInfer one's (-1 must show)
    (
        "flashinfer-bf16",
        "verify-B3-T6-H1-HV2-K8-V16-pool7-pad1-bf16state-fp16in-i32-vk-gate_mixed-seed3-slots[5,-1,2]-"
        "wslots[4,-1,6]-inter3x8+0-noupdate",
        "fuzz.standins.flashinfer_cpu",
        "flashinfer.gdn_decode.gated_delta_rule_decode_pretranspose(",
    ),
    (
        "fla-recurrent",
        "verify-B2-T3-H1-HV2-K8-V16-pool2-pad0-fp32state-bf16in-i32-vk-gate_mild-seed1-slots[0,1]",
        None,
        "fla.ops.gated_delta_rule.fused_recurrent.fused_recurrent_gated_delta_rule(",
    ),
    (
        "sglang-recurrent",
        "decode-B2-T1-H1-HV2-K8-V16-pool5-pad1-fp32state-bf16in-i64-vk-gate_mild-seed2-slots[3,-1]-gap1",
        None,
        "sglang.",
    ),
]


def _top_call(text: str) -> list[str]:
    """The call shown on top of a script: its commented lines from the function to the closing parenthesis."""
    top = text[: text.index(MARKER)].splitlines()
    first = next(n for n, line in enumerate(top) if line.startswith("#     ") and line.endswith("("))
    last = top.index("#     )", first)
    return [line[len("#     ") :] for line in top[first : last + 1]]


def _made_call(out: str) -> list[str]:
    """The call a script printed as it made it."""
    lines = out.splitlines()
    first = lines.index("the call, as made here:") + 1
    last = lines.index("    )", first)
    return [line[4:] for line in lines[first : last + 1]]


@pytest.mark.parametrize(("target", "coordinate", "module", "function"), SHOWN, ids=[s[0] for s in SHOWN])
def test_script_opens_with_the_call_its_check_makes(tmp_path, target, coordinate, module, function):
    script = tmp_path / "repro.py"
    assert (
        export_main([coordinate, "--target", target, "-o", str(script), *(["--module", module] if module else [])]) == 0
    )
    text = script.read_text()
    shown = _top_call(text)
    assert shown[0].startswith(function) and f".{BY_NAME[target].needs[0]}(" in shown[0] and len(shown) > 8, shown
    head = text.splitlines()
    assert head.index(f"#     {shown[0]}") < 40  # right after the short docstring
    assert head.index(MARKER) < head.index("class EmbeddedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):")
    assert any(" [" in line and "  strides (" in line for line in shown), shown  # dtype [shape]  strides (...)
    proc = run_fresh(script, "--device", "cpu")
    assert proc.returncode in (0, 1) and _made_call(proc.stdout) == shown, proc.stdout + proc.stderr[-3000:]


def test_padding_entries_show_and_the_call_is_recorded_without_the_library(tmp_path):
    """No --module: the library's call is recorded against it where it is installed, else against the stand-in."""
    script = tmp_path / "repro.py"
    assert export_main([SHOWN[0][1], "--target", "flashinfer-bf16", "-o", str(script)]) == 0
    shown = _top_call(script.read_text())
    assert shown[0] == "flashinfer.gdn_decode.gated_delta_rule_decode_pretranspose("
    slots = [
        line.strip() for line in shown if line.strip().startswith(("initial_state_indices=", "output_state_indices="))
    ]
    assert [line.split("=  ")[-1].strip() for line in slots] == [
        "int32 [3]  strides (1,)  = [5, -1, 2]",
        "int32 [3]  strides (1,)  = [4, -1, 6]",
    ], shown
    installed = importlib.util.find_spec("flashinfer") is not None
    assert (
        installed
        or "CPU stand-in fuzz.standins.flashinfer_cpu, since flashinfer-python is not installed"
        in " ".join(script.read_text().split())
    )


def test_issue_body_shows_the_call_the_script_makes(tmp_path):
    entry = corpus.load(REPO / "corpus" / "sglang-recurrent-decode-StateMismatch-0.json")
    script, body = tmp_path / "repro.py", tmp_path / "issue.md"
    assert export_main([str(entry.path), "-o", str(script), "--issue", str(body)]) == 0
    text = body.read_text()
    made = _made_call(text)  # the script's output, in the body
    assert made[0].startswith("sglang.") and made[0].endswith(".fused_recurrent_gated_delta_rule_update(")
    assert f"**What happens.** `{made[0][:-1]}`, on the call below." in text
    call = text[text.index("### The call\n") : text.index("### The case")]
    assert f"`{made[0][:-1]}` is called with these keyword arguments" in call
    rows = [[cell.strip() for cell in line.split("|")[1:-1]] for line in call.splitlines() if line.startswith("| `")]
    assert [row[0].strip("`") for row in rows] == [line.split("=")[0].strip() for line in made[1:-1]], call
    for row, line in zip(rows, made[1:-1]):
        words = line.split("=", 1)[1].strip()
        assert (f"{row[1]} {row[2]}  strides {row[3]}" in words) if row[1] else (row[5] == f"`{words}`"), (row, line)
    assert "| `initial_state_indices` | int32 | [2] | (1,) | 0 | `[" in call


def test_no_path_of_this_machine_in_an_issue_body(tmp_path):
    """A library's own log line (FlashInfer names its kernel cache under the temporary folder) loses the machine's
    paths as the script's folder, the Python installation and the home folder do."""
    import tempfile

    from fuzz.export.issue import scrub

    script = tmp_path / "case.py"
    log = (
        f"Persisted CuTe-DSL kernel to {tempfile.gettempdir()}/fi_ws/.cache/k.o; ran {script}; "
        f"{sys.prefix}/lib/x.py; {os.path.expanduser('~')}/.cache/y"
    )
    assert scrub(log, script) == (
        "Persisted CuTe-DSL kernel to <tmp>/fi_ws/.cache/k.o; ran ./case.py; <python>/lib/x.py; ~/.cache/y"
    )
