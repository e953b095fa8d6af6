"""The FlashInfer targets on every release's API, 0.6.5 .. 0.7.4, on the CPU.

Signature detection (fuzz.targets.api) on fake functions; the CPU stand-in behind each mimicked release's exact
signatures (fuzz.standins.flashinfer_cpu.release_*): the adapters pass only keywords those take, by keyword, and a
short fuzz run finds nothing (in particular no TypeError turned RejectedValidInput); what each release narrows and why
a target is unavailable, against the stand-ins and against fake installed `flashinfer` packages of chosen versions
(where the version decides routing the signatures cannot show); the semantics row and the known bugs each version
picks, at the boundaries.
"""

from __future__ import annotations

import inspect
import json
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from hypothesis import HealthCheck, given, settings

from fuzz.generate.profiles import BUDGETS
from fuzz.generate.strategies import cases
from fuzz.model.case import Case
from fuzz.model.known_bugs import BY_ID
from fuzz.model.support import Support
from fuzz.run.harness import check
from fuzz.standins import flashinfer_cpu
from fuzz.standins.flashinfer_cpu import RELEASE_SIGNATURES, RELEASES, release_api
from fuzz.targets import api as fapi
from fuzz.targets import flashinfer, flashinfer_sm100
from fuzz.targets.semantics import ZERO_STATE, semantics_for
from tests.draws import first_draws

BY_NAME = {t.name: t for t in flashinfer.TARGETS + flashinfer_sm100.TARGETS}
CORE = [t.name for t in flashinfer.TARGETS]
# Every release's GDN entry points as its wheel has them (scripts/flashinfer_signatures.py extracts them)
WHEEL_SIGNATURES = json.loads((Path(__file__).resolve().parents[1] / "data" / "flashinfer-signatures.json").read_text())


# ---- signature detection ------------------------------------------------------------------------------------------
def _plain(q, k, state=None, *, backend="auto"):
    pass


def _posonly(q, /, k=None):
    pass


def _catchall(q, **extra):
    pass


def test_accepts_reads_named_keyword_only_positional_only_and_catch_all():
    assert fapi.accepts(_plain, "q") and fapi.accepts(_plain, "state") and fapi.accepts(_plain, "backend")
    assert not fapi.accepts(_plain, "initial_state")
    assert not fapi.accepts(_posonly, "q") and fapi.accepts(_posonly, "k")
    assert fapi.accepts(_catchall, "anything")
    assert fapi.lacks(_plain, ["q", "output_state_indices", "backend", "ssm_state_indices"]) == [
        "output_state_indices",
        "ssm_state_indices",
    ]
    assert fapi.default(_plain, "backend") == "auto" and fapi.default(_plain, "q", "none") == "none"


def test_accepts_follows_functools_wraps():
    import functools

    def logged(f):
        @functools.wraps(f)
        def inner(*args, **kwargs):
            return f(*args, **kwargs)

        return inner

    wrapped = logged(_plain)
    assert fapi.accepts(wrapped, "backend") and not fapi.accepts(wrapped, "initial_state")


def test_keywords_drops_neutral_values_and_refuses_the_rest():
    t = torch.zeros(2)
    got = fapi.keywords(
        _plain,
        dict(
            q=t,
            k=t,
            state=None,
            backend="auto",
            initial_state=None,
            disable_state_update=False,
            extra_backend="flashinfer",
        ),
        {"extra_backend": ("flashinfer",)},
    )
    assert set(got) == {"q", "k", "state", "backend"} and got["q"] is t
    with pytest.raises(fapi.AdapterError, match="has no keyword initial_state"):
        fapi.keywords(_plain, dict(q=t, k=t, initial_state=t))
    with pytest.raises(fapi.AdapterError, match="has no keyword disable_state_update"):
        fapi.keywords(_plain, dict(q=t, k=t, disable_state_update=True))
    with pytest.raises(fapi.AdapterError, match="has no keyword backend"):
        fapi.keywords(lambda q: None, dict(q=t, backend="cake_gdn"), {"backend": ("auto", "flashinfer")})
    # a catch-all takes everything, neutral or not
    assert set(fapi.keywords(_catchall, dict(q=t, output_state_indices=t))) == {"q", "output_state_indices"}


def test_is_neutral_compares_tensors_by_identity():
    assert fapi.is_neutral(None) and fapi.is_neutral(False) and fapi.is_neutral("auto", ("auto",))
    assert not fapi.is_neutral(torch.zeros(())) and not fapi.is_neutral(0) and not fapi.is_neutral("cake", ("auto",))


def test_support_narrowed_intersects_ops_and_lowers_maxima():
    sup = Support(ops=frozenset({"decode", "verify"}))
    assert sup.narrowed(ops=("decode",)).ops == frozenset({"decode"})
    assert sup.narrowed(max_T=4).max_T == 4 and sup.narrowed(max_T=4).narrowed(max_T=8).max_T == 4
    assert sup.narrowed(verify_min_T=2).verify_min_T == 2 and sup.narrowed(pool=False).pool is False


# ---- the stand-in behind each release's signatures -----------------------------------------------------------------
def test_release_objects_mimic_a_release_on_the_cpu():
    for release, api in RELEASES.items():
        assert api.api_release == api.__version__ == release and api.RUNS_ON == "cpu"
        for name, params in RELEASE_SIGNATURES[release].items():
            assert str(inspect.signature(getattr(api, name))) == f"({params})"
    with pytest.raises(TypeError):
        flashinfer_cpu.release_0_6_10.gated_delta_rule_decode_pretranspose(
            None, None, None, None, None, None, None, None, backend="flashinfer"
        )
    with pytest.raises(TypeError):
        flashinfer_cpu.release_0_6_10.gated_delta_rule_mtp(*[None] * 9, ssm_state_indices=None)


@pytest.mark.parametrize("release", sorted(RELEASE_SIGNATURES))
def test_release_signatures_match_the_wheels(release):
    """Each mimicked signature, parameter for parameter and default for default, as the wheel's AST has it."""
    for name, params in RELEASE_SIGNATURES[release].items():
        namespace: dict = {}
        exec(WHEEL_SIGNATURES[release]["stubs"][name], namespace)  # a signature stub from the wheel
        assert str(inspect.signature(namespace[name])) == f"({params})", (release, name)


def _recorder(release: str) -> SimpleNamespace:
    """release_api(release) whose entry points assert keyword-only calls inside their signature and log them."""
    api, calls = release_api(release), []

    def wrap(name):
        entry = getattr(api, name)
        sig = inspect.signature(entry)

        def recorded(*args, **kwargs):
            assert not args, f"{name} called with {len(args)} positional arguments (positional orders change)"
            unknown = set(kwargs) - set(sig.parameters)
            assert not unknown, f"{name} ({release}) got keywords it lacks: {sorted(unknown)}"
            calls.append((name, frozenset(kwargs)))
            return entry(**kwargs)

        recorded.__signature__, recorded.__name__ = sig, name
        return recorded

    return SimpleNamespace(
        __version__=release,
        api_release=release,
        RUNS_ON="cpu",
        calls=calls,
        **{n: wrap(n) for n in RELEASE_SIGNATURES[release]},
    )


RECORDERS = types.ModuleType("_gdn_release_recorders")  # an importable home for the override spec
sys.modules[RECORDERS.__name__] = RECORDERS
for _release in RELEASES:
    setattr(RECORDERS, "r" + _release.replace(".", "_"), _recorder(_release))


def _spec(release: str) -> str:
    return f"{RECORDERS.__name__}:r{release.replace('.', '_')}"


PAIRS = [(r, name, op) for r in RELEASES for name in CORE for op in sorted(BY_NAME[name].support.ops)]


@pytest.mark.parametrize(("release", "name", "op"), PAIRS, ids=[f"{r}-{n}-{o}" for r, n, o in PAIRS])
def test_short_fuzz_on_each_release_api_finds_nothing(release, name, op, override):
    """A derandomized draw per (release, target, op) through the harness: no failure at all (the stand-in is
    correct), so in particular no TypeError from a keyword the release lacks; every call was keyword-only and inside
    the release's signature (the recorder asserts it)."""
    override(_spec(release))
    target, recorder = BY_NAME[name], getattr(RECORDERS, "r" + release.replace(".", "_"))
    assert target.unavailable_reason("cpu") is None
    seen = []

    @settings(max_examples=8, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(case=cases(target, op, BUDGETS["ci"], target.known_bugs()))
    def run(case):
        result = check(target, case, "cpu")
        seen.append(case)
        assert result.failure is None, result.failure.message + "\n" + "\n".join(result.failure.notes)

    before = len(recorder.calls)
    run()
    assert seen and len(recorder.calls) > before
    function = target.needs[0]
    assert all(called == function for called, _ in recorder.calls[before:])


def test_standin_releases_through_pytest_report_no_type_errors():
    """The documented command, on an older API: every FlashInfer fuzz test passes (a few examples each), so no
    TypeError from a keyword the release lacks became a RejectedValidInput."""
    import subprocess

    for release in ("release_0_6_10",):  # the API every FlashInfer test failed on at example 0 (H200)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "fuzz/",
                "--hypothesis-profile=ci",
                "-k",
                "flashinfer",
                "-q",
                "-p",
                "no:warnings",
                "--gdn-examples=6",
                "--gdn-target",
                f"flashinfer=fuzz.standins.flashinfer_cpu:{release}",
            ],
            cwd=Path(__file__).resolve().parents[2],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]  # a finding fails its fuzz test
        assert " passed" in proc.stdout and " failed" not in proc.stdout


# ---- narrowing and reasons, per API --------------------------------------------------------------------------------
# What each mimicked API narrows: its signatures, and its release's version where the release routes what its
# signature cannot show (as the installed release does; these run on no GPU, so SM100-only routes are off)
_SEQUENCE_ORDERED = dict(pool=False, split_write=False, strided_pool=False)  # prefill before 0.7.0 (SM90)
NARROWED = {
    "0.6.5": {
        "flashinfer-pretranspose-fp32": dict(pool=False, split_write=False, intermediate=False, no_update=False),
        "flashinfer-bf16": dict(pool=False, split_write=False, intermediate=False, no_update=False),
        "flashinfer-decode-kmajor": {},
        "flashinfer-mtp-fp32": dict(split_write=False, token_slots=False),
        "flashinfer-prefill-chunk": _SEQUENCE_ORDERED,
    },
    "0.6.10": {
        "flashinfer-pretranspose-fp32": dict(intermediate=False, no_update=False),
        "flashinfer-bf16": dict(intermediate=False, no_update=False),
        "flashinfer-decode-kmajor": {},
        "flashinfer-mtp-fp32": dict(split_write=False, token_slots=False),
        "flashinfer-prefill-chunk": _SEQUENCE_ORDERED,
    },
    "0.6.16.post4": {
        "flashinfer-pretranspose-fp32": dict(intermediate=False, no_update=False),
        "flashinfer-bf16": dict(intermediate=False, no_update=False),
        "flashinfer-decode-kmajor": {},
        "flashinfer-mtp-fp32": {},
        "flashinfer-prefill-chunk": _SEQUENCE_ORDERED,
    },
    "0.7.2.post1": {
        "flashinfer-pretranspose-fp32": {},
        "flashinfer-bf16": {},
        "flashinfer-decode-kmajor": {},
        "flashinfer-mtp-fp32": {},
        "flashinfer-prefill-chunk": dict(pool=False, split_write=False),
    },
    "0.7.4": {name: {} for name in CORE},
}
NARROWED["0.6.11"] = NARROWED["0.6.10"]


@pytest.mark.parametrize("release", sorted(NARROWED))
def test_support_narrowing_per_release_api(release, override):
    """Each mimicked API reports its release: narrowed by its signatures and routed by its version, within that
    release's contract (K = V = 128, T <= 4 on 0.6.5's bf16 kernels) but with no device requirement (a CPU stand-in)."""
    override(f"fuzz.standins.flashinfer_cpu:release_{release.split('.post')[0].replace('.', '_')}")
    for name in CORE:
        target = BY_NAME[name]
        assert target.release() == release
        plan = target.release_plan()
        assert (plan.narrowing, plan.unavailable) == (NARROWED[release][name], None), name
        sup = target.declared()
        for field, value in NARROWED[release][name].items():
            assert getattr(sup, field) == value, (name, field)
        assert sup.head_dims == ((128, 128),) and sup.arch == (), name
        assert sup.max_T == (4 if name == "flashinfer-bf16" and release == "0.6.5" else None), name
    prefill = BY_NAME["flashinfer-prefill-chunk"].release_plan()
    assert prefill.pool == release.startswith("0.7.")  # state_indices on SM90 from 0.7.0
    assert prefill.prenormalize == (not release.startswith("0.7."))  # use_qk_l2norm_in_kernel honoured from 0.7.1


@pytest.mark.parametrize(
    ("release", "reasons"),
    [
        (
            "0.6.10",
            {
                "flashinfer-cake-bf16": ("gated_delta_rule_decode_pretranspose", "backend"),
                "flashinfer-cake-fp32": ("gated_delta_rule_decode_pretranspose", "backend"),
                "flashinfer-cake-kmajor": ("gated_delta_rule_decode", "backend"),
            },
        ),
        ("0.6.16.post4", {"flashinfer-replayssm": ("gated_delta_rule_mtp", "cache_replayssm")}),
    ],
)
def test_unavailable_reasons_name_function_keyword_and_api(release, reasons, override):
    api = release_api(release)
    api.gated_delta_rule_replayssm_commit = lambda *a, use_qk_l2norm=True, backend="auto": None
    api.CakeGDNUnsupportedError = NotImplementedError
    RECORDERS.extra = api
    override(f"{RECORDERS.__name__}:extra")
    for name, (function, keyword) in reasons.items():
        assert BY_NAME[name].unavailable_reason("cpu") == (
            f"unavailable on this release: {function} has no keyword {keyword} (override {RECORDERS.__name__}:extra, "
            f"the API of flashinfer-python {release})"
        )
    for name in CORE:  # the core targets run on every API
        assert BY_NAME[name].unavailable_reason("cpu") is None, name


# ---- installed releases (fake packages): flags, version routing, prefill -------------------------------------------
def _decode_source(release: str, **flags) -> str:
    lines = [
        "from fuzz.standins.flashinfer_cpu import release_api",
        f"_r = release_api({release!r})",
        *(f"{name} = _r.{name}" for name in RELEASE_SIGNATURES[release] if name != "chunk_gated_delta_rule"),
    ]
    return "\n".join(lines + [f"{flag} = {value}" for flag, value in flags.items()]) + "\n"


def _prefill_source(release: str, cxx: bool = False) -> str:
    return (
        "from fuzz.standins.flashinfer_cpu import release_api\n"
        f"chunk_gated_delta_rule = release_api({release!r}).chunk_gated_delta_rule\n"
        + ("def gen_gdn_prefill_sm90_module():\n    raise RuntimeError('would build with nvcc')\n" if cxx else "")
    )


@pytest.fixture
def installed(fake_flashinfer_package, tmp_path):
    """install(version, api=version's signatures, capability=(9, 0), cxx=False, data=False, **flags): a fake
    flashinfer `version` whose functions are the stand-in behind `api`'s signatures."""

    def install(version, api=None, capability=(9, 0), cxx=False, data=False, **flags):
        api = api or version
        for module in [m for m in sys.modules if m == "flashinfer" or m.startswith("flashinfer.")]:
            del sys.modules[module]  # a second install in one test: import it afresh
        data_dir = tmp_path / "data"
        if data:
            for name in flashinfer.PREFILL_CXX_SOURCES:
                (data_dir / name).parent.mkdir(parents=True, exist_ok=True)
                (data_dir / name).mkdir() if "." not in Path(name).name else (data_dir / name).write_text("")
            (tmp_path / "cuda" / "bin").mkdir(parents=True, exist_ok=True)
            (tmp_path / "cuda" / "bin" / "nvcc").write_text("")
        fake_flashinfer_package(
            {
                "gdn_decode.py": _decode_source(api, **flags),
                "gdn_prefill.py": _prefill_source(api, cxx),
                "jit/env.py": f"import pathlib\nFLASHINFER_DATA = pathlib.Path({str(data_dir)!r})\n",
                "jit/cpp_ext.py": f"def get_cuda_path():\n    return {str(tmp_path / 'cuda')!r}\n",
            },
            version=version,
            capability=capability,
        )

    return install


def test_flags_are_the_release_s_own(installed):
    # 0.6.10: the bf16 flag is _GDN_DECODE_BF16_STATE_AVAILABLE; the pre-0.6.8 KLAST name means nothing there
    installed("0.6.10", _GDN_DECODE_BF16_STATE_AVAILABLE=False, _GDN_DECODE_KLAST_BF16_STATE_AVAILABLE=True)
    assert BY_NAME["flashinfer-bf16"].unavailable_reason("cuda") == (
        "flashinfer 0.6.10: kernels failed to import (_GDN_DECODE_BF16_STATE_AVAILABLE is False); check "
        "nvidia-cutlass-dsl and apache-tvm-ffi"
    )
    for name in ("flashinfer-pretranspose-fp32", "flashinfer-mtp-fp32", "flashinfer-decode-kmajor"):
        assert BY_NAME[name].unavailable_reason("cuda") is None, name
    installed("0.6.10", _GDN_DECODE_KLAST_BF16_STATE_AVAILABLE=False, _MTP_AVAILABLE=False)
    assert BY_NAME["flashinfer-bf16"].unavailable_reason("cuda") is None
    assert "_MTP_AVAILABLE is False" in BY_NAME["flashinfer-mtp-fp32"].unavailable_reason("cuda")


def test_flags_before_0_6_8(installed):
    installed("0.6.6", api="0.6.5", _GDN_DECODE_KLAST_BF16_STATE_AVAILABLE=False, _PRETRANSPOSE_AVAILABLE=False)
    assert "_GDN_DECODE_KLAST_BF16_STATE_AVAILABLE is False" in BY_NAME["flashinfer-bf16"].unavailable_reason("cuda")
    # 0.6.5 / 0.6.6 run the fp32 kernels inline: no _PRETRANSPOSE_AVAILABLE there to believe
    assert BY_NAME["flashinfer-pretranspose-fp32"].unavailable_reason("cuda") is None
    installed("0.6.7", api="0.6.10", _NONTRANSPOSE_AVAILABLE=False)
    assert "_NONTRANSPOSE_AVAILABLE is False" in BY_NAME["flashinfer-decode-kmajor"].unavailable_reason("cuda")


@pytest.mark.parametrize(
    ("version", "api", "name", "narrowing"),
    [
        # 0.6.6 takes initial_state*, but only for bf16 states: the fp32 pretranspose runs on the batch's states
        (
            "0.6.6",
            "0.6.10",
            "flashinfer-pretranspose-fp32",
            dict(pool=False, split_write=False, intermediate=False, no_update=False),
        ),
        ("0.6.6", "0.6.10", "flashinfer-bf16", dict(intermediate=False, no_update=False)),  # T <= 4: the contract's
        (
            "0.6.7.post3",
            "0.6.10",
            "flashinfer-pretranspose-fp32",
            dict(intermediate=False, no_update=False, strided_pool=False),
        ),
        ("0.6.8", "0.6.10", "flashinfer-bf16", dict(intermediate=False, no_update=False)),
        ("0.6.10", "0.6.10", "flashinfer-prefill-chunk", dict(pool=False, split_write=False, strided_pool=False)),
        # state_indices is in 0.6.16's signature, but SM90 raises NotImplementedError for it before 0.7.0
        (
            "0.6.16.post4",
            "0.6.16.post4",
            "flashinfer-prefill-chunk",
            dict(pool=False, split_write=False, strided_pool=False),
        ),
        ("0.7.2.post1", "0.7.2.post1", "flashinfer-prefill-chunk", dict(pool=False, split_write=False)),
        ("0.7.4", "0.7.4", "flashinfer-prefill-chunk", {}),
    ],
)
def test_installed_release_routing(installed, version, api, name, narrowing):
    """What the installed release's signatures and version narrow; its contract (fuzz.targets.flashinfer_contract)
    bounds what is drawn beside that: K = V = 128, its GPUs, and T <= 4 on the bf16 kernels before 0.6.8."""
    installed(version, api)
    target = BY_NAME[name]
    assert target.unavailable_reason("cuda") is None
    assert target.release_plan().narrowing == narrowing
    sup = target.declared()
    assert sup.head_dims == ((128, 128),) and sup.arch == target.support.arch and 9 in sup.arch
    assert sup.max_T == (4 if name == "flashinfer-bf16" and version == "0.6.6" else None)


@pytest.mark.parametrize(
    ("version", "api", "pool", "prenormalize"),
    [
        ("0.6.16.post4", "0.6.16.post4", False, True),
        ("0.7.0", "0.7.2.post1", True, True),
        ("0.7.1", "0.7.2.post1", True, False),
        ("0.7.4", "0.7.4", True, False),
    ],
)
def test_prefill_pool_and_l2norm_per_release(installed, version, api, pool, prenormalize):
    installed(version, api)
    plan = BY_NAME["flashinfer-prefill-chunk"].release_plan()
    assert (plan.pool, plan.prenormalize) == (pool, prenormalize)


def test_prefill_state_indices_on_sm100_from_0_6_16(installed):
    installed("0.6.16.post4", capability=(10, 0))
    assert BY_NAME["flashinfer-prefill-chunk"].release_plan().pool


def test_cxx_prefill_without_its_data_is_unavailable(installed):
    installed("0.6.10", cxx=True)
    reason = BY_NAME["flashinfer-prefill-chunk"].unavailable_reason("cuda")
    assert reason.startswith("unavailable on this release: the SM90 prefill JIT-compiles CUDA C++ from flashinfer/data")
    assert "csrc/gdn_prefill_launcher.cu" in reason and reason.endswith("flashinfer-python 0.6.10)")
    for name in ("flashinfer-pretranspose-fp32", "flashinfer-bf16", "flashinfer-mtp-fp32"):
        assert BY_NAME[name].unavailable_reason("cuda") is None, name
    installed("0.6.10", cxx=True, data=True)
    assert BY_NAME["flashinfer-prefill-chunk"].unavailable_reason("cuda") is None


@pytest.mark.parametrize(
    ("version", "api", "names"),
    [
        ("0.6.6", "0.6.10", ("flashinfer-pretranspose-fp32", "flashinfer-bf16")),  # no fp32 pool; bf16 T <= 4
        ("0.6.16.post4", "0.6.16.post4", ("flashinfer-prefill-chunk",)),  # sequence-ordered, adapter l2norm
        ("0.7.0", "0.7.2.post1", ("flashinfer-prefill-chunk",)),
    ],
)  # state_indices (identity), adapter l2norm
def test_installed_old_release_runs_clean(installed, version, api, names):
    """A fake installed release (its version drives the routing the signatures cannot show) over a few drawn cases:
    nothing fails."""
    installed(version, api)
    for name in names:
        for op in sorted(BY_NAME[name].support.ops):
            _fuzz_clean(BY_NAME[name], op)


def _fuzz_clean(target, op, examples=2):
    @settings(
        max_examples=examples, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck)
    )
    @given(case=cases(target, op, BUDGETS["ci"]))
    def run(case):
        assert case.T <= (target.declared().max_T or case.T)  # 0.6.6: bf16 kernels for T <= 4 only
        result = check(target, case, "cpu")
        assert result.failure is None, result.failure.message + "\n".join(result.failure.notes)

    run()


def test_prenormalized_prefill_passes_unit_norm_keys(installed, monkeypatch):
    installed("0.6.16.post4")
    target = BY_NAME["flashinfer-prefill-chunk"]
    seen = {}
    real = target.api().chunk_gated_delta_rule

    def spy(**kw):
        seen.update(kw)
        return real(**kw)

    spy.__signature__ = inspect.signature(real)
    monkeypatch.setattr(target.api(), "chunk_gated_delta_rule", spy)
    case = Case(op="prefill", H=1, HV=2, K=128, V=128, T=3, pool=2, read_slots=(0, 1), seqlens=(3, 1), seed=3)
    assert check(target, case, "cpu").failure is None
    assert seen["use_qk_l2norm_in_kernel"] is False and "state_indices" not in seen and "backend" not in seen
    norms = seen["k"].float().norm(dim=-1)
    assert torch.allclose(norms, torch.ones_like(norms), atol=1e-2)


# ---- semantics rows and known bugs per version ---------------------------------------------------------------------
def test_semantics_rows_per_version():
    pf = "flashinfer.prefill.chunk"
    assert semantics_for(pf, "0.7.4").pad == ZERO_STATE and semantics_for(pf, None).pad == ZERO_STATE
    for version in ("0.7.1", "0.7.2.post1"):
        sem = semantics_for(pf, version)
        assert "normalize_qk on the host" in sem.why and sem.pad != ZERO_STATE
    for version in ("0.6.5", "0.6.13", "0.7.0.post1"):
        assert "adapter l2-normalizes" in semantics_for(pf, version).why
    for version in ("0.6.5", "0.7.0", "0.7.4"):
        assert semantics_for(pf, version).norm_as_input and semantics_for(pf, version).gates == "log"
        for path in (
            "flashinfer.pretranspose.fp32",
            "flashinfer.bf16",
            "flashinfer.mtp.fp32",
            "flashinfer.decode.kmajor",
        ):
            assert semantics_for(path, version).output == "bf16" and semantics_for(path, version).inputs_as == "bf16"
    with pytest.raises(LookupError):
        semantics_for(pf, "0.6.4")


@pytest.mark.parametrize(
    ("bug", "path", "holds", "not_holds"),
    [
        ("inter-row-stride-T", "flashinfer.mtp.fp32", ("0.6.5", "0.6.13", "0.7.2.post1"), ("0.6.4", "0.7.4")),
        ("strided-pool-capacity-key", "flashinfer.mtp.fp32", ("0.6.14", "0.7.2.post1"), ("0.6.13", "0.7.4")),
        ("sliced-inter-rejected", "flashinfer.mtp.fp32", ("0.6.14", "0.7.2"), ("0.6.13", "0.7.4")),
        ("fp16-output-roundtrip", "flashinfer.mtp.fp32", ("0.6.18", "0.7.4"), ("0.6.17",)),
        ("wide-vec-no-writeback", "flashinfer.bf16", ("0.7.0", "0.7.4"), ("0.6.16.post4",)),  # via the pretranspose
        ("bf16-i64-indices", "flashinfer.bf16", ("0.6.10", "0.6.14", "0.7.4"), ("0.6.9",)),
        ("size1-layout", "flashinfer.pretranspose.fp32", ("0.6.14", "0.7.4"), ("0.6.11", "0.6.13")),  # 0.6.14
        ("mtp-one-token-dummy-indices", "flashinfer.mtp.fp32", ("0.6.14", "0.7.4"), ("0.6.11", "0.6.13")),
        ("bf16-strided-pool-copied", "flashinfer.bf16", ("0.6.8", "0.6.11"), ("0.6.12", "0.7.4")),
        ("saturated-softplus-nan", "flashinfer.bf16", ("0.6.10", "0.7.2.post1"), ("0.7.4",)),
        ("unchecked-gva", "flashinfer.pretranspose.fp32", ("0.6.5", "0.6.10", "0.7.4"), ("0.6.4",)),
        ("unchecked-gva", "flashinfer.decode.kmajor", ("0.6.5",), ()),
    ],
)
def test_known_bug_ranges_at_their_boundaries(bug, path, holds, not_holds):
    record = BY_ID[bug]
    assert all(record.holds(path, v) for v in holds), [v for v in holds if not record.holds(path, v)]
    assert not any(record.holds(path, v) for v in not_holds)
    assert not record.holds(path, None)  # an override module is no release


def test_adapter_error_is_raised_not_a_type_error(override):
    """A call the release cannot take never reaches it: forcing a split-write case onto 0.6.10's MTP (Support says no)
    raises AdapterError before the call, naming the keyword."""
    override("fuzz.standins.flashinfer_cpu:release_0_6_10")
    target = BY_NAME["flashinfer-mtp-fp32"]
    case = Case(op="verify", H=1, HV=2, K=8, V=16, T=2, pool=5, read_slots=(1, 2), write_slots=(3, 4), seed=1)
    with pytest.raises(fapi.AdapterError, match="has no keyword output_state_indices"):
        check(target, case, "cpu")  # raised, not judged: an adapter defect of ours is never a finding


# ---- every wheel's own signatures ----------------------------------------------------------------------------------
def _wheel_stubs(release: str, names: tuple) -> str:
    """The wheel's functions `names` with their exact signatures, each recording its keywords and returning
    (output, state) as the real ones do."""
    out = [
        "CALLS = []",
        "def _record(name, kw):",
        "    CALLS.append((name, kw))",
        "    return kw.get('output'), kw.get('output_state', kw.get('initial_state', kw.get('state')))",
    ]
    for name in names:
        stub = WHEEL_SIGNATURES[release]["stubs"][name]
        out.append(stub.removesuffix("pass") + f"return _record({name!r}, dict(locals()))")
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("release", list(WHEEL_SIGNATURES))
def test_every_release_signature_takes_every_drawn_case(fake_flashinfer_package, tmp_path, release):
    """Each wheel's own four signatures (stubs that record their keywords), installed as that release on a fake H200:
    every core target is available or says why, and for drawn cases its call binds (no TypeError) with keywords
    only."""
    decode = _wheel_stubs(release, (flashinfer.PRETRANSPOSE, flashinfer.MTP, flashinfer.KMAJOR))
    prefill = _wheel_stubs(release, (flashinfer.CHUNK,))
    data = tmp_path / "data"
    for name in flashinfer.PREFILL_CXX_SOURCES:  # the C++ prefill's sources and an nvcc, so its target runs
        (data / name).parent.mkdir(parents=True, exist_ok=True)
        (data / name).mkdir() if "." not in Path(name).name else (data / name).write_text("")
    (tmp_path / "cuda" / "bin").mkdir(parents=True)
    (tmp_path / "cuda" / "bin" / "nvcc").write_text("")
    cxx = "def gen_gdn_prefill_sm90_module():\n    pass\n" if WHEEL_SIGNATURES[release]["jit_prefill"] else ""
    fake_flashinfer_package(
        {
            "gdn_decode.py": decode,
            "gdn_prefill.py": prefill + cxx,
            "jit/env.py": f"import pathlib\nFLASHINFER_DATA = pathlib.Path({str(data)!r})\n",
            "jit/cpp_ext.py": f"def get_cuda_path():\n    return {str(tmp_path / 'cuda')!r}\n",
        },
        version=release,
        capability=(9, 0),
    )
    for name in CORE:
        target = BY_NAME[name]
        assert target.unavailable_reason("cuda") is None, (release, name, target.unavailable_reason("cuda"))
        target.api()
        for op in sorted(target.support.ops):
            _calls_bind(target, op)


def _placeholders(case: Case) -> SimpleNamespace:
    """What a target's call reads from the tensors, as tiny placeholders (the recording stubs never compute)."""
    one = torch.zeros(1, 1)
    index = lambda xs: None if xs is None else torch.tensor(xs, dtype=torch.int32)
    view = SimpleNamespace(view=one)
    inputs = dict.fromkeys(("q", "k", "v", "A_log", "a", "dt_bias", "b", "g", "beta", "cu_seqlens"), one)
    slots = {name: index(getattr(case, name)) for name in ("read_slots", "write_slots", "token_slots", "inter_index")}
    return SimpleNamespace(**inputs, **slots, pool=view, inter=view if case.inter_rows else None, output=view)


def _calls_bind(target, op):
    module = target.api()

    @first_draws(5)
    @given(case=cases(target, op, BUDGETS["ci"]))
    def call(case):
        if not case.valid:
            return
        before = len(module.CALLS)
        target.call(case, _placeholders(case))
        assert len(module.CALLS) == before + 1

    call()
