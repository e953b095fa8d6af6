"""`gdn-fuzz campaign` (fuzz.cli.campaign): a run cut off while shrinking still reports, per (target, failure kind),
the smallest case its live log holds, marked not minimal; an argument TypeError is flagged as our adapter error; a
run killed after its first test leaves that test's report; a real campaign run on the CPU writes its table."""

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from fuzz.cli import campaign, campaign_tables
from fuzz.generate.profiles import BUDGETS
from fuzz.judge.failures import NonFinite, StateMismatch
from fuzz.model.case import Case
from fuzz.run.report import FailureRecord, RunReport
from fuzz.run.result import Failure
from fuzz.suite.session import FuzzSession, Options, logged_failures, resumable
from tests.child_pytest import pytest_run

BIG = "verify-B3-T2-H1-HV2-K8-V16-pool4-pad1-fp32state-bf16in-i32-vk-decay_mild-seed0-slots[1,2,-1]"
SMALL = "verify-B1-T2-H1-HV2-K8-V16-pool2-pad1-fp32state-bf16in-i32-vk-decay_mild-seed0-slots[-1]"
OTHER = "decode-B2-T1-H1-HV2-K8-V16-pool3-pad0-fp32state-bf16in-i32-vk-decay_mild-seed5-slots[1,2]"
REPO = Path(__file__).resolve().parents[2]
ROW = dict(installation="x", family="flashinfer-", seconds=1, killed=False, exit=1, errors=[], examples=3, distinct=3)
ROW.update(buckets=1, environment={}, targets={})  # a campaign summary's run row, as summary.json holds it


def failure(kind, coordinate, detail="state[0]: error 5 > bound 0.1"):
    return Failure.from_exception(kind(Case.parse(coordinate), detail), "t-a:verify")


def test_smallest_logged_case_per_target_and_kind(tmp_path):
    """The live log as the session writes it (--gdn-live-log), read back by the campaign."""
    live = tmp_path / "live.jsonl"
    session, target = FuzzSession("ci", BUDGETS["ci"], Options(live_log=live)), SimpleNamespace(name="t-a")
    for f in (failure(StateMismatch, BIG), failure(StateMismatch, SMALL), failure(NonFinite, OTHER, "output[0] = nan")):
        session._log(target, f)
    assert [(t, k, repr(c)) for t, k, c in logged_failures(live)] == [
        ("t-a", "StateMismatch", BIG),
        ("t-a", "StateMismatch", SMALL),
        ("t-a", "NonFinite", OTHER),
    ]
    found = campaign.unfinished(live, reported={("t-a", "NonFinite")}, family="t-")
    assert [(f["target"], f["kind"], f["case"], f["minimal"]) for f in found] == [
        ("t-a", "StateMismatch", SMALL, False)
    ]
    assert campaign.unfinished(live, reported=set(), family="u-") == []  # another family's job: none of its rows


def test_an_argument_type_error_is_flagged_as_ours():
    row = {
        **ROW,
        "failures": [
            {
                "kind": "RejectedValidInput",
                "target": "flashinfer-bf16",
                "case": SMALL,
                "first_hit_seconds": 0.5,
                "hits": 3,
                "minimal": True,
                "test": "t",
                "detail": "TypeError: f() got an unexpected keyword argument 'backend'",
            }
        ],
    }
    text = campaign_tables.markdown([row], campaign_tables.Settings("ci", 5, "none", "1"))
    assert "ADAPTER ERROR (ours)" in text and SMALL in text


def test_a_run_killed_after_its_first_test_leaves_that_tests_report(tmp_path):
    report = tmp_path / "report.json"
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "fuzz/test_decode.py",
        "-k",
        "sglang-packed or fla-recurrent",
        "--hypothesis-profile=ci",
        "--gdn-test-seconds=3",
        f"--gdn-report={report}",
        "-p",
        "tests.exit_after_first_test",
        "-q",
    ]
    proc = subprocess.run(
        cmd, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    examples = {name: t["examples"] for name, t in json.loads(report.read_text())["targets"].items() if t["examples"]}
    assert len(examples) == 1 and sum(next(iter(examples.values())).values()) > 0, examples


def test_a_campaign_on_a_mutant_tables_its_distinct_failures(tmp_path, capsys):
    out = tmp_path / "campaign"
    argv = "flashinfer-pretranspose --profile ci --test-seconds 8 --db-per-run".split()
    code = campaign.main(
        [*argv, "--out", str(out), "--pytest", "--gdn-target", "flashinfer=tests.mutants:padded_output_not_zeroed"]
    )
    assert code == 1  # findings
    assert any((out / "installed-flashinfer-pretranspose-db").rglob("*")), "the run's own example database is empty"
    summary = json.loads((out / "summary.json").read_text())
    [result] = summary["runs"]
    assert summary["settings"] == {
        "profile": "ci",
        "test_seconds": 8.0,
        "masks": "none",
        "workers": "1",
        "families": ["flashinfer-pretranspose"],
        "pytest": ["--gdn-target", "flashinfer=tests.mutants:padded_output_not_zeroed"],
    }
    kinds = {f["kind"] for f in result["failures"]}
    assert kinds == {"UnwrittenOutput"}, result["failures"]
    assert "| 1 | UnwrittenOutput | flashinfer-pretranspose-fp32 decode |" in (out / "summary.md").read_text()

    # rendered again from its summary.json, triaged against today's records: a mutant's bug is no known one
    capsys.readouterr()
    assert campaign.main(["--render", str(out / "summary.json")]) == 0  # its settings are the stored ones
    text = capsys.readouterr().out
    assert "NEW (no known-bug record explains it)" in text
    assert text.startswith("# gdn-fuzz campaign: profile ci, 8 s per fuzz test, masks none, 1 worker(s) per run\n")
    (old := tmp_path / "old.json").write_text(json.dumps(summary["runs"]))  # as campaigns wrote it before
    assert campaign.main(["--render", str(old), "--profile", "ci", "--test-seconds", "8"]) == 0
    assert capsys.readouterr().out.startswith(
        "# gdn-fuzz campaign: profile ci, 8 s per fuzz test, masks none, "
        "1 worker(s) per run (settings from the command line"
    )


def test_a_campaign_is_green_only_when_every_run_ran():
    ran = {
        "installation": "a",
        "family": "fla-",
        "seconds": 5,
        "exit": 0,
        "killed": False,
        "examples": 5,
        "distinct": 5,
        "buckets": 1,
        "failures": [],
        "errors": [],
        "environment": {},
        "targets": {},
    }
    found = [hit(SMALL, 1.0, 3)]
    assert campaign.exit_code([ran]) == 0
    assert campaign.exit_code([ran, dict(ran, exit=1, failures=found)]) == 1
    assert campaign.exit_code([ran, dict(ran, exit=5, examples=0)]) == 3  # a run that ran nothing
    assert campaign.exit_code([dict(ran, exit=-9, killed=True, failures=found)]) == 3


def test_render_of_something_else_is_one_clear_error(tmp_path, capsys):
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(SystemExit) as e:
        campaign.main(["--render", str(tmp_path / "x.json")])
    assert e.value.code == 2 and "not a campaign summary.json" in capsys.readouterr().err


def hit(case: str, seconds: float | None, before: int | None, detail: str = "state[0]: error 5 > bound 0.1") -> dict:
    """A failure of a campaign summary: one test's first hit after `seconds`, with `before` cases checked before it
    (None: an unfinished run's, from its live log)."""
    return {
        "kind": "StateMismatch",
        "target": "flashinfer-pretranspose-fp32",
        "case": case,
        "test": "t",
        "first_hit_seconds": seconds,
        "examples_before": before,
        "hits": 2,
        "minimal": seconds is not None,
        "detail": detail,
        "key": "StateMismatch | flashinfer-pretranspose-fp32:decode | state off",
    }


def test_the_by_bug_table_gives_the_first_hit_and_the_cases_before_it():
    row = {
        **ROW,
        "seconds": 60,
        "db_per_run": True,
        "failures": [
            hit(OTHER, 9.0, 40),
            hit(OTHER, 2.5, 17),
            hit(SMALL, None, None, "TypeError: f() got an unexpected keyword argument 'backend'"),
        ],
    }
    del row["failures"][2]["examples_before"]  # the campaign's rows of a run cut off (`unfinished`) have none
    args = campaign_tables.Settings("ci", 5, "none", "1")
    lines = campaign_tables.markdown([row], args).splitlines()
    assert "| known bug | distinct failures | kinds | targets | first hit | cases before | smallest case |" in lines
    assert f"| NEW | 2 | StateMismatch | flashinfer-pretranspose-fp32 | 2.5 s | 17 | `{OTHER}` |" in lines
    assert f"| ADAPTER ERROR (ours) | 1 | StateMismatch | flashinfer-pretranspose-fp32 | - | - | `{SMALL}` |" in lines
    assert lines[2].endswith("; its own example database)"), lines[2]

    old = dict(row, failures=[{k: v for k, v in f.items() if k != "examples_before"} for f in row["failures"][:2]])
    del old["db_per_run"]  # a summary written before runs said either
    lines = campaign_tables.markdown([old, dict(row, db_per_run=False)], args).splitlines()
    assert f"| NEW | 2 | StateMismatch | flashinfer-pretranspose-fp32 | 2.5 s | - | `{OTHER}` |" in lines
    titles = [line for line in lines if line.startswith("## x:")]
    assert titles[0].endswith("torch ?)") and titles[1].endswith("; no example database of its own)"), titles


def test_resume_takes_each_logged_key_its_report_did_not_hold_minimal(tmp_path):
    live = tmp_path / "run-failures.jsonl"  # beside run.json, as a campaign names them
    session, target = FuzzSession("ci", BUDGETS["ci"], Options(live_log=live)), SimpleNamespace(name="t-a")
    logged = [failure(StateMismatch, BIG), failure(StateMismatch, SMALL), failure(NonFinite, BIG, "output[0] = nan")]
    for f in logged:
        session._log(target, f)
    state, nan = logged[0].key, logged[2].key
    assert resumable(live, "t-a", "verify") == {state: Case.parse(SMALL), nan: Case.parse(BIG)}  # no report: all
    assert resumable(live, "t-a", "decode") == resumable(live, "t-b", "verify") == {}
    RunReport(
        "ci",
        "cpu",
        failures=[
            FailureRecord("t", "t-a", logged[2], 1.0, 3, minimal=True),
            FailureRecord("t", "t-a", logged[0], 1.0, 3, minimal=False),
        ],
    ).write(tmp_path / "run.json")
    assert resumable(live, "t-a", "verify") == {state: Case.parse(SMALL)}


def fuzz_decode(*args: str) -> subprocess.CompletedProcess:
    return pytest_run(
        "fuzz/test_decode.py",
        "--hypothesis-profile=ci",
        "-k",
        "flashinfer-pretranspose",
        "--gdn-target",
        "flashinfer=tests.mutants:split_write_ignored",
        *args,
    )


def test_a_later_run_finishes_the_shrink_an_earlier_one_cut_off(tmp_path):
    first, live = tmp_path / "run.json", tmp_path / "run-failures.jsonl"
    proc = fuzz_decode("--gdn-no-shrink", "--gdn-examples=60", f"--gdn-live-log={live}", f"--gdn-report={first}")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    [unshrunk] = json.loads(first.read_text())["failures"]
    assert not unshrunk["minimal"], unshrunk
    logged = min((c for t, k, c in logged_failures(live)), key=Case.size_key)

    second = tmp_path / "again.json"
    proc = fuzz_decode("--gdn-examples=1", f"--gdn-resume={live}", f"--gdn-report={second}")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    [shrunk] = json.loads(second.read_text())["failures"]
    case = Case.parse(shrunk["case"])
    assert shrunk["key"] == unshrunk["key"] and shrunk["minimal"], shrunk
    assert case.B == 1 and case.write_slots != case.read_slots and case.seed == 0, case
    assert case.size_key() < logged.size_key()
    assert shrunk["notes"][-1].startswith(
        f"shrunk by fuzz.run.reduce from {logged!r} (an earlier run's cut-off shrink)"
    ), shrunk["notes"]

    proc = fuzz_decode(f"--gdn-resume={tmp_path / 'none.jsonl'}")
    assert proc.returncode == 4 and f"--gdn-resume={tmp_path / 'none.jsonl'}: no such file" in proc.stderr


def test_a_campaign_resumes_each_run_from_the_same_runs_live_log(tmp_path, capsys):
    old, out = tmp_path / "old", tmp_path / "new"
    old.mkdir(), out.mkdir()
    (old / "a-fla-failures.jsonl").write_text("")
    started = []

    class Installation(SimpleNamespace):
        def pytest(self, cmd, log):
            started.append(cmd)
            return SimpleNamespace(wait=lambda timeout: 0, returncode=5)

    args = SimpleNamespace(
        profile="ci",
        masks="none",
        test_seconds=5,
        shrink_seconds=1,
        workers=1,
        db_per_run=False,
        timeout=None,
        pytest=[],
        resume=old,
    )
    for label in ("a", "b"):
        assert campaign.run_job(campaign.Job(Installation(label=label), "fla-", out), args)["db_per_run"] is False
    assert f"--gdn-resume={old / 'a-fla-failures.jsonl'}" in started[0]
    assert not any(arg.startswith("--gdn-resume") for arg in started[1])  # its job left no live log there
    with pytest.raises(SystemExit):  # its runs would delete the live logs they resume
        campaign.main(["fla-", "--profile", "ci", "--out", str(old), "--resume", str(old)])
    assert "give the new campaign another --out" in capsys.readouterr().err


def test_a_k_among_the_pytest_arguments_narrows_the_family_instead_of_replacing_it():
    """pytest keeps the last -k: passed on as it was, `--pytest -k X` ran other families under this one's title."""
    from fuzz.cli.campaign import selected

    assert selected("flashinfer-", ["-k", "decode", "-p", "no:warnings", "-kbf16"]) == (
        "(flashinfer-) and (decode) and (bf16)",
        ["-p", "no:warnings"],
    )
    assert selected("fla-", ["--gdn-isolate"]) == ("(fla-)", ["--gdn-isolate"])


def test_the_runs_of_one_campaign_take_heavy_memory_from_one_slot_pool(tmp_path, monkeypatch):
    """Two installations whose environments name different temporary directories: each run finds the GPU's memory
    slots where the campaign's others do (fuzz.run.memory.MEMORY_DIR, set once for all its runs), and a slot one
    process holds is taken for every run; `auto` workers are split among the runs."""
    from fuzz.run import installation, memory

    probe = (
        "import fcntl, os, tempfile; from fuzz.run import memory; p = memory.lock_path('cpu'); "
        "fd = os.open(p, os.O_RDWR | os.O_CREAT)\n"
        "try: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB); held = 'free'\n"
        "except BlockingIOError: held = 'busy'\n"
        "print(tempfile.gettempdir(), p, held)"
    )

    class Own(installation.Installation):  # its python, its own temporary directory; the probe instead of pytest
        def pytest(self, cmd, log):
            return self.start(["-c", probe], log)

    wheres = []
    for label in ("a", "b"):
        (tmp_path / f"tmp-{label}").mkdir()
        wheres.append(Own(label, "", env={"TMPDIR": str(tmp_path / f"tmp-{label}")}))
    out = tmp_path / "out"
    out.mkdir()
    args = SimpleNamespace(
        profile="ci", masks="none", test_seconds=5, shrink_seconds=1, workers="auto", db_per_run=False, timeout=60,
        pytest=[], resume=None, out=out, families=["fla-"], warm=False, warm_jobs=4,
    )  # fmt: skip
    monkeypatch.delenv(memory.MEMORY_DIR, raising=False)
    campaign.run_all(args, wheres)
    assert os.environ[memory.MEMORY_DIR]  # set once, for every run
    seen = [(out / f"{label}-fla.log").read_text().split() for label in ("a", "b")]
    assert seen[0][0] != seen[1][0] and seen[0][1] == seen[1][1] == str(memory.lock_path("cpu")), seen
    with memory.device_lock("cpu"):  # held here: busy for both runs
        campaign.run_all(args, wheres)
    assert [(out / f"{label}-fla.log").read_text().split()[2] for label in ("a", "b")] == ["busy", "busy"]
    cores = os.cpu_count() or 1
    assert campaign.worker_args("auto", 2, "ci") == ([f"-n{cores // 2}"] if cores >= 4 else [])
    assert campaign.worker_args("auto", 1, "ci") == ["--gdn-workers=auto"] and campaign.worker_args("3", 2, "ci") == [
        "-n3"
    ]


def test_a_failure_on_a_contract_edge_is_tabled_as_one_not_as_a_bug():
    """CONTRACT EDGE in the triage column with the edge's contract text, its own row in the by-bug table and a count
    apart (fuzz.model.engines.EDGES); a run without edges tables as before (tests/cli/test_pinned_outputs.py)."""
    from fuzz.model.engines import EDGES

    edge = dict(hit(SMALL + "-edge_pad_past_scratch", 1.5, 4), key=hit(SMALL, 1, 1)["key"] + " | edge pad-past-scratch")
    row = {**ROW, "failures": [hit(OTHER, 2.5, 17), edge]}
    lines = campaign_tables.markdown([row], campaign_tables.Settings("ci", 5, "none", "1")).splitlines()
    assert any(f"CONTRACT EDGE pad-past-scratch ({EDGES['pad-past-scratch'].contract})" in line for line in lines)
    assert "1 of them on a contract edge (CONTRACT EDGE: not bugs, counted apart below)" in lines
    assert any(line.startswith("| CONTRACT EDGE pad-past-scratch | 1 | StateMismatch |") for line in lines), lines
    assert any(line.startswith("| NEW | 1 | StateMismatch |") for line in lines)


def test_a_second_campaign_into_the_same_out_keeps_the_first_ones_results(tmp_path, capsys):
    """A campaign into an --out that held an earlier one's used to delete its reports and live logs and overwrite its
    summary: now they move aside, into OUT/campaign-TIME, and it says so."""
    out = tmp_path / "campaign"
    argv = ["fla-", "--profile", "ci", "--installation", "false=/bin/false", "--out", str(out)]
    assert campaign.main(argv) == 3  # a run that broke
    first = (out / "summary.json").read_text()
    capsys.readouterr()
    assert campaign.main(argv) == 3
    [aside] = out.glob("campaign-*")
    assert (aside / "summary.json").read_text() == first and (aside / "false-fla.log").exists()
    assert f"moved them to {aside}" in capsys.readouterr().err


def test_an_out_that_is_a_file_is_one_line_before_any_work(tmp_path, capsys):
    (out := tmp_path / "out").write_text("")
    with pytest.raises(SystemExit) as exit_:
        campaign.main(["fla-", "--profile", "ci", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and err[-1].startswith(f"gdn-fuzz campaign: error: --out {out}: a file"), err


def test_a_glue_finding_is_triaged_by_the_flashinfer_release_beneath_it():
    """SGLang's FlashInfer glue on a GPU runs the installed FlashInfer: a finding that FlashInfer's known bug explains
    (size1-layout holds for 0.7.4 and masks B = 1 at H = 1) is labelled with it by the release the run recorded beneath
    the glue (TargetRow.beneath); a run that recorded none (the CPU stand-in) leaves it NEW."""
    size1 = "decode-B1-T1-H1-HV1-K128-V128-pool2-pad0-fp32state-bf16in-i32-vk-decay_mild-seed0-slots[1]"
    crash = {
        **hit(size1, 1.0, 3, "RuntimeError: Can't deduce the leading dimension"),
        "kind": "KernelCrash",
        "target": "sglang-glue-fi-sm90",
        "key": "KernelCrash | sglang-glue-fi-sm90:decode | Can't deduce the leading dimension",
    }
    under = {"decode": ["flashinfer.pretranspose.fp32", "0.7.4"], "verify": ["flashinfer.mtp.fp32", "0.7.4"]}
    glue = {"version": "0.5.23", "beneath": under}
    row = {**ROW, "family": "sglang-glue-", "failures": [crash], "targets": {"sglang-glue-fi-sm90": glue}}
    args = campaign_tables.Settings("ci", 5, "none", "1")
    lines = campaign_tables.markdown([row], args).splitlines()
    assert any(line.startswith("| size1-layout | 1 | KernelCrash | sglang-glue-fi-sm90 |") for line in lines), lines
    assert any("| known: size1-layout: RuntimeError" in line for line in lines), lines
    alone = {**row, "targets": {"sglang-glue-fi-sm90": {"version": "0.5.23"}}}
    assert any(line.startswith("| NEW | 1 |") for line in campaign_tables.markdown([alone], args).splitlines())


def test_the_flashinfer_glue_reports_the_flashinfer_beneath_it_on_a_gpu_only(monkeypatch):
    """Target.beneath: the paths SGLang's FlashInfer glue calls on its arch at the installed FlashInfer's release on a
    GPU; nothing on the CPU stand-in (it reports no release) or for the Triton glue."""
    from fuzz.targets import sglang_glue
    from fuzz.targets.registry import TARGETS

    monkeypatch.setattr(sglang_glue, "installed_version", lambda dist: {"flashinfer-python": "0.7.4"}[dist])
    named = {t.name: t for t in TARGETS}
    sm90, sm100, triton = (named[n] for n in ("sglang-glue-fi-sm90", "sglang-glue-fi-sm100", "sglang-glue-triton"))
    assert sm90.beneath("cuda") == {
        "decode": ("flashinfer.pretranspose.fp32", "0.7.4"),
        "verify": ("flashinfer.mtp.fp32", "0.7.4"),
    }  # extend's chunked prefill: no record kept
    assert sm100.beneath("cuda") == {"decode": ("flashinfer.bf16", "0.7.4"), "verify": ("flashinfer.bf16", "0.7.4")}
    assert sm90.beneath("cpu") == triton.beneath("cuda") == {}
