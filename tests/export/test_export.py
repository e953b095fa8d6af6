"""fuzz.export: scripts a library's maintainer runs as they are, where gdn-fuzz cannot be imported.

Every registry target is exported for a small drawn case of each operation it supports (through the CPU stand-ins
for the GPU library, through the installed fla-core and SGLang under TRITON_INTERPRET=1), and so are a few mutants of
the stand-in, a few cases chosen to cover every tensor-generation path, and the corpus entries: those of the Triton
families against the installed library, FlashInfer's through its CPU stand-in. Every script runs once, in parallel,
in a fresh interpreter whose PYTHONPATH shadows gdn-fuzz's packages with ones that refuse to import (the venv has
gdn-fuzz installed editable): its outcome must be the one line fuzz.run.harness.check's verdict gives in-process (the
same failure class, or NOT REPRODUCED where the check passes), with exit 1 for a reproduction only.

Slow: the `runs` fixture (one child exports and checks ~60 cases, then every script runs; minutes on two cores) and
test_gpu_corpus_entry_reproduces_standalone (GPU only). The size, first-screen, exit-code and issue-body tests export
a corpus entry or two and run a script at most once each.

Drawing the Triton targets' cases and checking them in-process imports triton, which must see TRITON_INTERPRET=1
first: that happens in one child process (`prepare`), never in this one.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import json
import os
import re
import subprocess
import sys
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from unittest import mock

import pytest
import torch

from fuzz.cli.export import main as export_main
from fuzz.export import embed, release, shake
from fuzz.export.embedded import EmbeddedModules
from fuzz.export.script import MARKER, export, export_script
from fuzz.generate.materialize import materialize
from fuzz.model.case import Case
from fuzz.model.guarded import Guarded
from fuzz.model.known_bugs import BY_ID
from fuzz.run import corpus
from fuzz.standins import FOR_ADAPTER
from fuzz.targets.registry import TARGETS

REPO = Path(__file__).resolve().parents[2]
BY_NAME = {t.name: t for t in TARGETS}
PADDED = "decode-B1-T1-H1-HV1-K8-V16-pool1-pad1-fp32state-bf16in-i32-vk-decay_mild-seed0-slots[-1]"
# bytes: an exported corpus entry's script is smaller (issue 32 aimed at 40 KB; judging what an engine's contract
# leaves undefined, scratch slots and discarded rows, as the verdict does, costs every script 0.7 KB: the largest,
# sglang-recurrent's and sglang-packed's, are 41.1-41.2 KB)
SIZE = 42_000
# bytes, a script that carries a stand-in the library's own code imports (SGLang's glue over FlashInfer's CPU stand-in,
# SOURCES): the glue loader and the stand-in's four entry points, shaken (18.5 KB of 44.7 KB), on ~48 KB: 67.4 KB
STANDIN_SIZE = 70_000
FIRST_SCREEN = 60  # lines: the library call starts within them
FAKE_ENGINE = Path(__file__).resolve().parent / "fake_engine"  # the engine of tests/export/fake_glue.py
JARGON = ("model error", "fuzz/", "masks", "corpus", "oracle", "Warning", "gdn-fuzz's adapter", "poison")


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
    return FOR_ADAPTER.get(type(BY_NAME[target]).__module__)


def _drawn() -> list:
    """Every target's every op, as its script runs (--device cpu: Triton interpreted); an op the target does not run
    there (Target.op_unavailable: the Triton glue's prefill) is skipped with the target's reason."""
    params = []
    with mock.patch.dict(os.environ, {"TRITON_INTERPRET": "1"}):  # read by op_unavailable; triton is not imported
        for t in TARGETS:
            for op in sorted(t.support.ops):
                spec = Spec(f"{t.name}-{op}", t.name, op=op, module=_standin(t.name))
                reason = t.op_unavailable(op, "cpu")
                marks = [pytest.mark.skip(reason=f"{t.name} {op} unavailable: {reason}")] if reason else []
                if getattr(t, "not_exportable", None):  # refused in one line: test_not_exportable_targets_say_so...
                    continue
                params.append(pytest.param(spec, id=spec.id, marks=marks))
    return params


DRAWN = _drawn()
MUTANTS = [
    Spec(f"mutant-{name}", target, coordinate, module=f"tests.mutants:{name}")
    for name, target, coordinate in (
        ("padded_output_not_zeroed", "flashinfer-pretranspose-fp32", PADDED),
        (
            "padded_output_rewritten",
            "flashinfer-mtp-fp32",
            "verify-B1-T2-H1-HV1-K8-V16-pool1-pad1-fp32state-bf16in-i32-vk-decay_mild-seed0-slots[-1]",
        ),
        (
            "inter_row_by_slot",
            "flashinfer-mtp-fp32",
            "verify-B1-T1-H1-HV1-K8-V16-pool2-pad0-fp32state-bf16in-i32-vk-decay_mild-seed0-slots[1]-inter2x1+0",
        ),
        (
            "prefill_skipped_write_wraps",
            "flashinfer-prefill-chunk",
            "prefill-B1-T1-H1-HV1-K8-V16-pool1-pad1-fp32state-bf16in-i32-vk-decay_mild-seed0-slots[-1]-seqlens[1]",
        ),
        # only the unjudged warm call on a larger pool trips it: the script must make that call too
        (
            "strided_pool_capacity_baked_in",
            "flashinfer-mtp-fp32",
            "verify-B1-T2-H1-HV1-K8-V16-pool2-pad0-fp32state-bf16in-i32-vk-decay_mild-seed0-slots[1]-gap1-warm3",
        ),
    )
]
BUILDS = [
    Spec(f"build-{n}", target, coordinate, module=_standin(target))
    for n, (target, coordinate) in enumerate(
        (
            # every generation path: each decay regime and "mixed", prefill, both layouts, strides, dtypes, buffers
            (
                "flashinfer-bf16",
                "verify-B3-T6-H1-HV2-K8-V16-pool7-pad1-bf16state-fp16in-i32-vk-decay_mixed-seed3-"
                "slots[5,-1,2]-wslots[4,-1,6]-inter3x8+0-noupdate",
            ),
            (
                "flashinfer-mtp-fp32",
                "verify-B2-T3-H1-HV2-K8-V16-pool9-pad1-fp32state-bf16in-i64-vk-decay_saturated-seed11-"
                "slots[5,-1]-tslots[1/2/3,4/6/7]-inter3x4+1",
            ),
            (
                "flashinfer-prefill-chunk",
                "prefill-B3-T4-H1-HV2-K8-V16-pool5-pad1-fp32state-fp16in-i32-vk-decay_forget-seed4-"
                "slots[3,-1,1]-seqlens[4,2,0]-wslots[2,4,0]-gap1",
            ),
            (
                "flashinfer-decode-kmajor",
                "decode-B2-T1-H2-HV4-K8-V16-pool2-pad0-fp32state-fp16in-i64-kv-decay_threshold-"
                "seed5-slots[0,1]-scale0.25-nol2",
            ),
            (
                "sglang-sigmoid",
                "verify-B3-T6-H1-HV2-K8-V16-pool7-pad1-fp32state-fp32in-i32-vk-decay_negsat-seed5-"
                "slots[5,-1,2]-gap3-inter4x8+1-rows[2,0,-1]-scale0.25",
            ),
        )
    )
]
CPU_FAMILIES = {"fla": "fla-core", "sglang": "sglang"}  # the Triton families, which run on a CPU interpreted


def _cpu_corpus() -> list:
    """Every corpus entry as it runs here: a Triton family's against the installed release (skipped, with the reason,
    where another is installed), FlashInfer's through its CPU stand-in."""
    params = []
    for entry in corpus.load_all():
        dist = CPU_FAMILIES.get(entry.library)
        version = release.installed(dist) if dist else None
        reason = (
            f"{dist} is not installed"
            if dist and version is None
            else f"holds for {entry.versions}, {dist} {version} is installed"
            if dist and entry.versions and version not in entry.versions
            else None
        )
        spec = Spec(f"corpus-{entry.path.stem}", entry.target, entry=str(entry.path), module=_standin(entry.target))
        marks = [pytest.mark.skip(reason=f"{entry.target} unavailable: {reason}")] if reason else []
        params.append(pytest.param(spec, id=spec.id, marks=marks))
    return params


CORPUS = _cpu_corpus()
SPECS = [p.values[0] for p in DRAWN if not p.marks] + MUTANTS + BUILDS + [p.values[0] for p in CORPUS if not p.marks]


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
        sup = target.declared(target.known_bugs())
        pool = sup.pool and sup.padding  # padded rows where a slot map has them and no known bug's mask keeps them out
        case = find(
            cases(target, spec.op, BUDGETS["ci"], target.known_bugs()),
            # a contract edge (an engine's undefined call) is no case the fuzzer passes or fails as a bug
            lambda c, pool=pool: c.valid and c.edge is None and c.B > 1 and (not pool or 0 < sum(c.padded) < c.B),
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
    try:
        cli_main(["export", *args, *(["--module", spec.module] if spec.module else [])])
    except SystemExit:  # refused with one line (NotExportable): no script
        pass
    failure = check(target, case, "cpu").failure
    print(
        json.dumps(
            dict(
                id=spec.id,
                case=repr(case),
                script=str(script) if script.exists() else None,
                fuzzer=failure and failure.kind,
            )
        ),
        flush=True,
    )


def fresh_env(directory: Path, missing: tuple[str, ...] = (), path: tuple[Path, ...] = ()) -> dict:
    """The environment of a fresh interpreter that cannot import gdn-fuzz: PYTHONPATH starts with a folder whose
    fuzz/, reference/ and tests/ raise ImportError, and whose sitecustomize makes the top-level modules `missing`
    names fail to import (a python without numpy, torch or the library); `path` and the caller's other entries (a GPU
    host's libraries) follow."""
    blocker = directory / "no_gdn_fuzz"
    for package in embed.PACKAGES:
        (blocker / package).mkdir(parents=True, exist_ok=True)
        (blocker / package / "__init__.py").write_text(f"raise ImportError('gdn-fuzz imported: {package}')\n")
    (blocker / "sitecustomize.py").write_text(
        "import sys\n\n\nclass Missing:\n"
        f"    names = {missing!r}\n\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.partition('.')[0] in self.names:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n\n\n"
        "sys.meta_path.insert(0, Missing())\n"
    )
    libraries = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != REPO]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRITON_INTERPRET")}
    return {**env, "PYTHONPATH": os.pathsep.join([str(blocker), *map(str, path), *libraries])}


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
    script: Path | None  # None: the export refused with one line (NotExportable)
    fuzzer: str | None  # the in-process check's failure class, None: it passed
    rc: int
    out: str


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Run]:
    """Slow: every Spec exported and checked in one child, then every script run (--device cpu) in parallel."""
    directory = tmp_path_factory.mktemp("export")
    code = (
        f"from tests.export.test_export import prepare; prepare({json.dumps([asdict(s) for s in SPECS])!r}, "
        f"{str(directory)!r})"
    )
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True, timeout=3000)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-6000:]
    prepared = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert [p["id"] for p in prepared] == [s.id for s in SPECS]

    env = fresh_env(directory)

    def run(p: dict) -> Run:
        case, script = Case.parse(p["case"]), p["script"] and Path(p["script"])
        if script is None:
            return Run(case, None, p["fuzzer"], 2, "")
        done = run_fresh(script, "--device", "cpu", env=env)
        return Run(case, script, p["fuzzer"], done.returncode, done.stdout + done.stderr)

    with ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as pool:
        return {p["id"]: r for p, r in zip(prepared, pool.map(run, prepared))}


def verdict(out: str) -> str:
    """A script's outcome: its one line of output (anything more, a traceback or a warning, fails here)."""
    lines = out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(("REPRODUCED: ", "NOT REPRODUCED", "NOT RUN: ")), out[-3000:]
    return lines[0]


def kind(line: str) -> str | None:
    """The failure class a REPRODUCED line names, None for NOT REPRODUCED."""
    assert not line.startswith("NOT RUN"), line
    return line.split(": ")[1] if line.startswith("REPRODUCED") else None


def _agrees(r: Run) -> None:
    """The script's one line and exit status say what the fuzzer's check says in-process."""
    assert r.script is not None, f"{r.case!r}: not exported"
    line = verdict(r.out)
    assert kind(line) == r.fuzzer and r.rc == (0 if r.fuzzer is None else 1), (r.case, r.fuzzer, line)


# ---- the tests ---------------------------------------------------------------------------------------------------
def test_gdn_fuzz_cannot_be_imported_where_the_scripts_run(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", "import fuzz"], env=fresh_env(tmp_path), cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode != 0 and "gdn-fuzz imported" in proc.stderr


@pytest.mark.parametrize("spec", DRAWN)
def test_every_target_exports_and_passes_what_the_fuzzer_passes(runs, spec):
    r = runs[spec.id]
    assert r.fuzzer is None, f"{r.case!r}: the fuzzer fails {r.fuzzer}"
    if spec.target == "flashinfer-replayssm":  # two library calls and no export_snippet of its own: refused
        assert r.script is None
        return
    _agrees(r)


@pytest.mark.parametrize("spec", MUTANTS, ids=lambda s: s.id)
def test_mutant_reproduces_with_the_fuzzers_failure(runs, spec):
    r = runs[spec.id]
    assert r.fuzzer is not None, f"{r.case!r}: the fuzzer passes the mutant"
    _agrees(r)


@pytest.mark.parametrize("spec", BUILDS, ids=lambda s: s.id)
def test_script_verdict_is_the_fuzzers(runs, spec):
    _agrees(runs[spec.id])


@pytest.mark.parametrize("spec", CORPUS)
def test_corpus_entry_verdict_is_the_fuzzers(runs, spec):
    """Every corpus entry whose target runs here: the script's outcome is gdn-fuzz's on the same case (a Triton
    family's: the finding its entry records; FlashInfer's, through the stand-in, which has none of its bugs)."""
    r, entry = runs[spec.id], corpus.load(Path(spec.entry))
    _agrees(r)
    if entry.bug:  # what the finding is, on top, in the library's words
        assert " ".join(BY_ID[entry.bug].root_cause.split()[:6]) in " ".join(r.script.read_text().split())
    if spec.module is None:
        assert r.fuzzer == (None if entry.expect == "pass" else entry.expect), r.out


def _dump(script: Path, target: Path, env: dict) -> subprocess.CompletedProcess:
    """The script's tensors for its case, as its main() builds them, saved by a driver that runs the script's module
    without main()."""
    code = (
        "import runpy, torch\n"
        f"ns = runpy.run_path({str(script)!r}, run_name='repro')\n"
        "t = ns['tensors'](ns['SimpleNamespace'](repro=ns['REPRO'], device='cpu'))\n"
        "out = {}\n"
        "for name, value in vars(t).items():\n"
        "    if hasattr(value, 'full'):\n"
        "        out |= {f'{name}.full': value.full, f'{name}.view': value.view}\n"
        "    else:\n"
        "        out[name] = value\n"
        f"torch.save(out, {str(target)!r})\n"
    )
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=script.parent, capture_output=True, text=True)


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


@pytest.mark.parametrize("spec", BUILDS, ids=lambda s: s.id)
def test_script_tensors_are_materializes_bit_for_bit(runs, spec, tmp_path):
    r = runs[spec.id]
    done = _dump(r.script, tmp_path / "t.pt", fresh_env(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    got, want = torch.load(tmp_path / "t.pt"), materialize(r.case, "cpu")
    for name, value in vars(want).items():
        pairs = (
            [(f"{name}.full", value.full), (f"{name}.view", value.view)]
            if isinstance(value, Guarded)
            else [(name, value)]
        )
        for key, tensor in pairs:
            assert _same(got.pop(key, None), tensor), key
    assert not got, f"tensors materialize() does not build: {sorted(got)}"


def _parts(script: Path) -> dict[str, str]:
    """The gdn-fuzz code a script embeds below its marker, by file: from '# ---- <path>' to the next such line."""
    text = script.read_text()
    below = text[text.index(MARKER) :].split("\nREPRO = ")[0]
    return {m.group(1): m.group(2) for m in re.finditer(r"(?ms)^# ---- (\S+)\n(.*?)(?=^# ---- |\Z)", below)}


def _defined(text: str) -> list[str]:
    names = []
    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return names


def test_script_carries_the_fuzzers_code_and_only_what_its_case_needs(runs):
    """Each embedded statement is gdn-fuzz's as it runs (the same syntax tree, without docstrings, comments and
    annotations); the value generator, materialize, the oracle and the tolerance rule are there; never the
    strategies, the harness, the registry, the verdict or an adapter; a SGLang script carries its loader, no other."""
    sources = {spec.target: _parts(runs[spec.id].script) for spec in SPECS if spec.op and runs[spec.id].script}
    for embedded in sources.values():
        for path, text in embedded.items():
            module = path.removesuffix(".py").replace("/", ".")
            shaken = shake.shake([(module, n) for n in _defined(text)], _attributes(text), docstrings=lambda m: False)
            mine = next(p.text for p in shaken.parts if p.module == module)
            assert ast.dump(ast.parse(text)) == ast.dump(ast.parse(shake.plain(mine))), path
    common = {"fuzz/model/values.py", "fuzz/generate/materialize.py", "reference/ops.py", "fuzz/judge/tolerance.py"}
    never = {
        "fuzz/targets/registry.py",
        "fuzz/generate/strategies.py",
        "fuzz/run/harness.py",
        "fuzz/judge/verdict.py",
        "fuzz/suite/session.py",
        "fuzz/export/script.py",
        "fuzz/targets/fla.py",
        "fuzz/targets/sglang.py",
        "fuzz/targets/flashinfer.py",
    }
    for target, embedded in sources.items():
        assert common <= set(embedded) and not never & set(embedded), target
        loaders = {p for p in embedded if p.endswith("_loader.py")}
        assert loaders == LOADERS.get(BY_NAME[target].family.name, set()), target


# The wheel loaders a script carries, per family: an engine's glue is loaded beside its kernels (SGLang's glue loader
# imports its kernel loader); vLLM's kernels have their own.
LOADERS = {
    "sglang": {"fuzz/targets/sglang_loader.py"},
    "sglang-glue": {"fuzz/targets/sglang_loader.py", "fuzz/targets/sglang_glue_loader.py"},
    "vllm": {"fuzz/targets/vllm_loader.py"},
}


def _attributes(text: str) -> set[str]:
    """The method names a part keeps (each kept class's): what shake keeps with the part's own statements."""
    return {
        n.name for c in ast.walk(ast.parse(text)) if isinstance(c, ast.ClassDef) for n in c.body if hasattr(n, "name")
    }


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
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert verdict(proc.stdout + proc.stderr) == "NOT RUN: needs no_such_module (pip install 'no_such_module')"


# ---- exit status and its one line (each a defect of issue 32 on the exporter before it) ---------------------------
SGLANG_ENTRY = REPO / "corpus" / "sglang-recurrent-decode-StateMismatch-0.json"
FLASHINFER_ENTRY = REPO / "corpus" / "flashinfer-bf16-verify-PoolCorruption-0.json"  # the README's example


@pytest.fixture(scope="module")
def sglang_script(tmp_path_factory) -> Path:
    """The SGLang corpus entry's script (SGLang installed here: the CPU install's constraints pin it)."""
    script = tmp_path_factory.mktemp("sglang") / "repro.py"
    assert export_main([str(SGLANG_ENTRY), "-o", str(script)]) == 0
    return script


@pytest.mark.parametrize(
    ("missing", "dist"),
    [(("numpy",), "numpy"), (("torch",), "torch"), (("sglang",), "sglang"), (("triton",), "triton")],
    ids=["numpy", "torch", "the-library", "triton"],
)
def test_a_missing_package_is_not_run_with_its_pip_line(sglang_script, tmp_path, missing, dist):
    """A python without numpy (the issue's own CPU install line gave one), torch, the library or triton: exit 2 and
    one line naming the package and the release to install; never a traceback, never exit 1."""
    proc = run_fresh(sglang_script, env=fresh_env(tmp_path, missing))
    version = corpus.load(SGLANG_ENTRY).versions if dist == "sglang" else None
    pin = str(version).removeprefix("==") if version else release.installed(dist).split("+")[0]
    assert proc.returncode == 2 and verdict(proc.stdout + proc.stderr) == (
        f"NOT RUN: needs {dist} (pip install '{dist}=={pin}')"
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--bogus"], "NOT RUN: bad argument: unrecognized arguments: --bogus"),
        (["--device", "tpu"], "NOT RUN: bad argument: argument --device: invalid choice: 'tpu'"),
    ],
    ids=["unknown-option", "bad-device"],
)
def test_a_bad_argument_is_not_run_in_one_line(sglang_script, args, says):
    proc = run_fresh(sglang_script, *args)
    assert proc.returncode == 2 and verdict(proc.stdout + proc.stderr).startswith(says), proc.stdout + proc.stderr


def test_device_cuda_without_a_gpu_is_not_run_in_one_line(sglang_script, tmp_path):
    def without_gpu(script):  # a machine without a GPU, wherever this runs: CUDA sees no device
        return dict(fresh_env(script.parent), CUDA_VISIBLE_DEVICES="")

    proc = run_fresh(sglang_script, "--device", "cuda", env=without_gpu(sglang_script))
    assert proc.returncode == 2 and verdict(proc.stdout + proc.stderr) == (
        f"NOT RUN: --device cuda: torch {torch.__version__} sees no CUDA GPU here"
    )
    script = tmp_path / "fi.py"  # a GPU library on a machine without one
    assert export_main([str(FLASHINFER_ENTRY), "-o", str(script)]) == 0
    proc = run_fresh(script, env=without_gpu(script))
    assert proc.returncode == 2 and verdict(proc.stdout + proc.stderr).startswith(
        "NOT RUN: flashinfer.gdn_decode.gated_delta_rule_decode_pretranspose needs a CUDA GPU of compute capability 9.x"
    )


def test_the_scripts_own_defect_is_not_run_never_a_reproduction(sglang_script, tmp_path):
    """Exit 1 means a reproduction and nothing else: a defect of the script itself is exit 2 and one line."""
    broken = tmp_path / "broken.py"
    text = sglang_script.read_text()
    broken.write_text(text.replace("    want = expected(run, t)", "    want = expected(run, t)[5]", 1))
    proc = run_fresh(broken)
    assert proc.returncode == 2 and verdict(proc.stdout + proc.stderr).startswith(
        "NOT RUN: the script itself failed: IndexError"
    )


# ---- what a maintainer sees first ---------------------------------------------------------------------------------
def _main_call(text: str) -> tuple[str, list[str], int]:
    """(the function main() calls the library as, its keywords in order, the line the call starts on)."""
    main = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == "main")
    calls = [
        n for n in ast.walk(main) if isinstance(n, ast.Call) and n.keywords and not isinstance(n.func, ast.Attribute)
    ]
    calls += [n for n in ast.walk(main) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.keywords]
    call = max(calls, key=lambda c: len(c.keywords))
    name = call.func.id if isinstance(call.func, ast.Name) else call.func.attr
    return name, [k.arg for k in call.keywords], call.lineno


@pytest.fixture(scope="module")
def corpus_exports() -> dict[str, object]:
    """Every corpus entry exported here as a user would (no --module): FlashInfer's call recorded against the CPU
    stand-in of the release the entry pins, where FlashInfer is not installed."""
    return {entry.path.stem: export(entry.case, entry.target, entry=entry) for entry in corpus.load_all()}


@pytest.mark.parametrize("name", [e.path.stem for e in corpus.load_all()])
def test_corpus_script_is_small_and_opens_with_the_call(corpus_exports, name):
    """Under 40 KB (70 KB with an embedded stand-in), the library call as its docs write it (the function, imported
    from its module, every keyword the adapter passes) starting within the first 60 lines; the tensors it reads named
    above it."""
    exported = corpus_exports[name]
    text, call = exported.text, exported.recorded.call
    assert len(text.encode()) < (STANDIN_SIZE if "\nSOURCES = {" in text else SIZE), len(text.encode())
    function, keywords, line = _main_call(text)
    assert function == call.function.rpartition(".")[2] and keywords == [k for k, _ in call.arguments]
    assert line <= FIRST_SCREEN, line
    module, _, short = call.function.rpartition(".")
    owner, _, cls = module.rpartition(".")  # a glue's method (FlashInferGDNKernel.decode): its class is imported
    imported = f"from {owner} import {cls}\n" if cls[:1].isupper() else None
    function_import = f"from {'fla.ops.gated_delta_rule' if module.startswith('fla.') else module} import {short}\n"
    assert function_import in text or (imported is not None and imported in text)
    assert text.index("t = tensors(run") < text.index(f"{short}(\n")


# ---- the issue body -----------------------------------------------------------------------------------------------
def test_issue_body_pins_the_release_the_finding_holds_for(tmp_path, capsys):
    """The README's example: whatever FlashInfer is installed here (none in CI, 0.7.4 on a GPU host), the body installs
    the newest release in the entry's range that its known bug was seen on (0.7.4 fixed it), lists that release in
    the environment beside what this machine has, and speaks the library's words (no gdn-fuzz jargon, no third-party
    warning)."""
    entry, bug = corpus.load(FLASHINFER_ENTRY), BY_ID[corpus.load(FLASHINFER_ENTRY).bug]
    script, body = tmp_path / "repro.py", tmp_path / "issue.md"
    assert export_main([str(entry.path), "-o", str(script), "--issue", str(body)]) == 0
    text = body.read_text()
    assert bug.seen_on == ("0.7.2.post1",) and "0.7.2.post1" in entry.versions
    assert "```sh\npip install torch 'flashinfer-python==0.7.2.post1'\npython repro.py\n```" in text
    here = release.installed("flashinfer-python") or "not installed"
    assert f"| flashinfer-python | 0.7.2.post1 | {here} |" in text
    assert text.startswith("# [flashinfer-python 0.7.2.post1] gated_delta_rule_decode_pretranspose: ")
    assert bug.root_cause.rstrip(".") in text and "0.7.4 fixes it" in text
    prose = text[: text.index("<details>")]
    assert not [word for word in JARGON if word in prose], prose
    assert "```python\n" + script.read_text() in text  # the script, inline: it is small
    said = capsys.readouterr().out.splitlines()
    assert said[2] == "  the script's outcome here: " + verdict(run_fresh(script).stdout)


def test_issue_body_from_a_reproduced_corpus_entry(tmp_path, capsys):
    entry = corpus.load(SGLANG_ENTRY)
    installed = release.installed("sglang")  # pinned by constraints-cpu.txt: a mismatch is ours to fix
    assert installed in entry.versions, f"{entry.path.name} holds for sglang {entry.versions}, {installed} is installed"
    script, body = tmp_path / "repro.py", tmp_path / "issue.md"
    assert export_main([str(entry.path), "-o", str(script), "--issue", str(body)]) == 0
    text = body.read_text()
    assert str(tmp_path) not in text and sys.prefix not in text  # no path of this machine
    said = capsys.readouterr().out.splitlines()
    assert said[0].startswith(f"wrote {script} (") and said[1] == f"wrote {body}: {text.splitlines()[0][2:]}"
    assert said[2].startswith("  the script's outcome here: REPRODUCED: StateMismatch: initial_state_source["), said
    assert text.startswith(
        f"# [sglang {installed}] fused_recurrent_gated_delta_rule_update: @input_guard .contiguous() copies a "
        "strided pool view, the state write is lost\n"
    )
    assert "run on a CPU, the Triton kernels interpreted (TRITON_INTERPRET=1), prints (exit status 1):" in text
    assert "pip install torch triton numpy && pip install --no-deps 'sglang==0.5.23'" in text
    assert "`initial_state_source`" in text and "| triton | " in text and "python repro.py\n" in text
    prose = text[: text.index("<details>")]
    assert not [word for word in JARGON if word in prose], prose
    assert "```python\n" + script.read_text() in text


def test_issue_body_shows_the_call_the_script_makes(tmp_path):
    entry = corpus.load(SGLANG_ENTRY)
    script, body = tmp_path / "repro.py", tmp_path / "issue.md"
    assert export_main([str(entry.path), "-o", str(script), "--issue", str(body)]) == 0
    text = body.read_text()
    function, keywords, _ = _main_call(script.read_text())
    call = text[text.index("### The call\n") : text.index("### Environment")]
    rows = [line.split("|")[1].strip().strip("`") for line in call.splitlines() if line.startswith("| `")]
    assert rows == keywords and f"`sglang.kernels.ops.attention.fla.fused_recurrent.{function}`" in text
    assert "| `initial_state_indices` | int32 | [2] | (1,) | 0 | `[0, 1]` |" in call


# ---- the command line ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--target", "nosuch"], "unknown target 'nosuch'"),
        (["--target", "fla-recurrent", "-o", "missing/dir/x.py"], "-o missing/dir/x.py: no directory missing/dir"),
        (["--target", "fla-recurrent", "-o", "x.py", "--issue", "missing/i.md"], "--issue missing/i.md: no directory"),
        (["--target", "fla-recurrent", "-o", "."], "-o .: a directory; give a file name in it"),
    ],
    ids=["unknown-target", "no-output-dir", "no-issue-dir", "output-is-a-dir"],
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
    text = script.read_text()
    size = f"{len(text.splitlines())} lines, {len(text.encode()) / 1000:.1f} KB"
    assert capsys.readouterr().out == f"wrote {script} ({size}): python {script}\n"


def test_an_earlier_export_is_kept_beside_the_new_one(tmp_path, capsys):
    """Exporting to an -o that exists used to overwrite it: the earlier script is kept, renamed by its time."""
    (script := tmp_path / "r.py").write_text("the earlier export")
    assert export_main([PADDED, "--target", "fla-recurrent", "-o", str(script)]) == 0
    [kept] = tmp_path.glob("r.*-*.py")
    assert kept.read_text() == "the earlier export" and script.read_text() != "the earlier export"
    assert f"gdn-fuzz export: -o {script} held an earlier export: moved it to {kept}" in capsys.readouterr().err


def test_cli_and_the_gates_call(capsys):
    with pytest.raises(SystemExit):
        export_main([PADDED])
    with pytest.raises(ValueError, match="unknown target"):
        export_script(Case.parse(PADDED), "flashinfer")
    assert export_main([PADDED, "--target", "fla-recurrent"]) == 0
    assert capsys.readouterr().out.startswith('"""fla-core 0.6.0: fused_recurrent_gated_delta_rule: decode, B=1')
    text = export_script(
        Case.parse(PADDED), "flashinfer-bf16", library_module="tests.mutants:gva_head_modulo", note="from the gate"
    )  # as gdn-fuzz gate exports its new and fixed failures
    assert "\nNote: from the gate\n" in text and "from tests.mutants import gva_head_modulo as api\n" in text


def _gpu_corpus() -> list:
    """FlashInfer corpus entries: run where a GPU and a FlashInfer release they hold for are installed."""
    params = []
    for entry in corpus.load_all():
        if entry.library != "flashinfer":
            continue
        version = release.installed("flashinfer-python")
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
    """Slow, GPU only: the entry on the installed FlashInfer release it holds for."""
    script = tmp_path / "repro.py"
    assert export_main([str(entry.path), "-o", str(script)]) == 0
    proc = run_fresh(script)
    line = verdict(proc.stdout + proc.stderr)
    if entry.expect == "pass":
        assert proc.returncode == 0 and line.startswith("NOT REPRODUCED"), line
    else:
        assert proc.returncode == 1 and line.startswith(f"REPRODUCED: {entry.expect}: "), line


# ---- the call on top ----------------------------------------------------------------------------------------------
SHOWN = [  # one target of each family, a padded slot among the FlashInfer one's (-1 must show)
    (
        "flashinfer-bf16",
        "verify-B3-T6-H1-HV2-K8-V16-pool7-pad1-bf16state-fp16in-i32-vk-decay_mixed-seed3-slots[5,-1,2]-"
        "wslots[4,-1,6]-inter3x8+0-noupdate",
        "fuzz.standins.flashinfer_cpu",
        "gated_delta_rule_decode_pretranspose",
    ),
    (
        "fla-recurrent",
        "verify-B2-T3-H1-HV2-K8-V16-pool2-pad0-fp32state-bf16in-i32-vk-decay_mild-seed1-slots[0,1]",
        None,
        "fused_recurrent_gated_delta_rule",
    ),
    (
        "sglang-recurrent",
        "decode-B2-T1-H1-HV2-K8-V16-pool5-pad1-fp32state-bf16in-i64-vk-decay_mild-seed2-slots[3,-1]-gap1",
        None,
        "fused_recurrent_gated_delta_rule_update",
    ),
]


@pytest.mark.parametrize(("target", "coordinate", "module", "function"), SHOWN, ids=[s[0] for s in SHOWN])
def test_script_opens_with_the_call_its_adapter_makes(tmp_path, target, coordinate, module, function):
    """The keywords main() passes are the recorded call's, in its order; the script runs to a verdict."""
    script = tmp_path / "repro.py"
    args = [coordinate, "--target", target, "-o", str(script), *(["--module", module] if module else [])]
    assert export_main(args) == 0
    text = script.read_text()
    exported = export(Case.parse(coordinate), target, library_module=module)
    name, keywords, line = _main_call(text)
    assert name == function and keywords == [k for k, _ in exported.recorded.call.arguments] and line <= FIRST_SCREEN
    assert text.index(MARKER) > text.index(f"{function}(\n")
    proc = run_fresh(script, "--device", "cpu")
    assert proc.returncode in (0, 1) and verdict(proc.stdout + proc.stderr), proc.stdout + proc.stderr[-3000:]


def test_padding_entries_show_and_the_call_is_recorded_without_the_library(tmp_path):
    """No --module: the library's call is recorded against it where it is installed, else against the stand-in;
    the slot maps are literals on top, their padding entries shown."""
    script = tmp_path / "repro.py"
    assert export_main([SHOWN[0][1], "--target", "flashinfer-bf16", "-o", str(script)]) == 0
    text = script.read_text()
    assert "from flashinfer.gdn_decode import gated_delta_rule_decode_pretranspose\n" in text
    assert "    slots = torch.tensor([5, -1, 2], dtype=torch.int32, device=run.device)  # " in text
    assert "    write_slots = torch.tensor([4, -1, 6], dtype=torch.int32, device=run.device)  # " in text
    assert "            initial_state_indices=slots,\n" in text and "output_state_indices=write_slots,\n" in text


# ---- an engine's glue (the extension point the SGLang / vLLM glue targets use) -----------------------------------
GLUE_CASE = "decode-B2-T1-H1-HV2-K8-V16-pool3-pad1-fp32state-bf16in-i32-vk-decay_mild-seed0-slots[2,-1]"


@pytest.mark.parametrize("broken", [False, True], ids=["glue-right", "glue-loses-the-state-write"])
def test_a_glue_target_exports_a_script_that_imports_the_engine(tmp_path, monkeypatch, broken):
    """A target's own export_snippet (tests/export/fake_glue.py): the script calls the gdn-fuzz loader it names
    (embedded) and imports the engine's glue module itself; run where the engine is installed without its serving
    stack and gdn-fuzz is not, its outcome is gdn-fuzz's check of the glue."""
    from fuzz.run.harness import check
    from tests.export.fake_glue import FakeGlueTarget

    monkeypatch.syspath_prepend(str(FAKE_ENGINE))
    target, case = FakeGlueTarget(), Case.parse(GLUE_CASE)
    engine = importlib.import_module("fakeengine.gdn") if target.family.api() else None
    monkeypatch.setattr(engine, "broken", broken)
    fuzzer = check(target, case, "cpu").failure
    exported = export(case, target)
    text = exported.text.replace("\nbroken = False\n", "\n")  # the script imports the engine's own module
    head = text[: text.index(MARKER)]
    assert "load_fake_engine()  # " in head and "from fakeengine.gdn import gdn_decode\n" in head
    assert "# ---- tests/export/fake_glue.py\ndef load_fake_engine():" in text
    engine_dir = tmp_path / "engine"
    (engine_dir / "fakeengine").mkdir(parents=True)
    for source in (FAKE_ENGINE / "fakeengine").glob("*.py"):
        patched = source.read_text().replace("broken = False", f"broken = {broken}")
        (engine_dir / "fakeengine" / source.name).write_text(patched)
    (script := tmp_path / "repro.py").write_text(text)
    proc = run_fresh(script, env=fresh_env(tmp_path, path=(engine_dir,)))
    line = verdict(proc.stdout + proc.stderr)
    assert (fuzzer is None) == (not broken) and kind(line) == (fuzzer and fuzzer.kind), line
    assert proc.returncode == (1 if broken else 0) and line.endswith("(fakeengine, cpu)"), line


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


def test_not_exportable_targets_say_so_in_one_line(tmp_path, capsys):
    """vllm-mtp is judged as a pair, which no one-call script shows: `gdn-fuzz export` refuses it with the target's
    own line and a non-zero exit, and writes nothing (its drawn spec above is skipped with the same words)."""
    from fuzz.cli.main import main as cli_main

    coordinate = "verify-B1-T2-H1-HV1-K16-V16-pool2-pad0-fp32state-bf16in-i32-vk-decay_mild-seed0-slots[1]-tslots[1/1]"
    with pytest.raises(SystemExit) as exit_:
        cli_main(["export", coordinate + "-null0-acc[1]", "--target", "vllm-mtp", "-o", str(tmp_path / "r.py")])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code != 0 and not (tmp_path / "r.py").exists()
    assert len(err) == 1 and "judged as a pair" in err[0], err
