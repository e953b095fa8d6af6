"""Exported scripts of the serving engines' targets (the sglang-glue and vllm families): each imports the engine's
own module (installed with --no-deps, no gdn-fuzz where it runs) and its outcome is the finding's; the issue body
names the engine and its versions. One small case each, so CI's 2 cores run them in seconds."""

from __future__ import annotations

import pytest

from fuzz.export.issue import issue_body
from fuzz.export.script import MARKER, export
from fuzz.model.case import Case
from fuzz.run import corpus
from tests.export.test_export import REPO, fresh_env, kind, run_fresh, verdict

GLUE_FINDING = "sglang-glue-fi-sm90-decode-PoolCorruption-0"
VLLM_FINDING = "vllm-sigmoid-decode-AcceptedInvalidInput-0"
# the same calls on cases the engines get right: no padding row (the glue), H divides HV (vLLM)
PASSING = {
    "sglang-glue-fi-sm90": "decode-B2-T1-H1-HV1-K128-V128-pool3-pad0-fp32state-bf16in-i32-vk-decay_nodecay-seed3"
    "-slots[1,2]",
    "vllm-sigmoid": "decode-B1-T1-H1-HV2-K8-V16-pool2-pad0-fp32state-bf16in-i32-vk-decay_mild-seed0-slots[1]-tslots[1]"
    "-null0-acc[1]",
}
GLUE = "sglang.srt.layers.attention.linear.kernels"
IMPORTS = {
    "sglang-glue-fi-sm90": f"from {GLUE}.gdn_flashinfer import FlashInferGDNKernel\n",
    "vllm-sigmoid": "from vllm.",
}


def _entry(name: str) -> corpus.Entry:
    return corpus.load(REPO / "corpus" / f"{name}.json")


def _run(case: Case, target: str, tmp_path, entry=None):
    exported = export(case, target, entry=entry)
    head = exported.text[: exported.text.index(MARKER)]
    assert IMPORTS[target] in head, head
    (script := tmp_path / "repro.py").write_text(exported.text)
    proc = run_fresh(script, env=fresh_env(tmp_path))
    return exported, script, proc


@pytest.mark.parametrize("name", [GLUE_FINDING, VLLM_FINDING])
def test_an_engine_finding_reproduces_without_gdn_fuzz(name, tmp_path):
    entry = _entry(name)
    _, _, proc = _run(entry.case, entry.target, tmp_path, entry)
    line = verdict(proc.stdout + proc.stderr)
    assert proc.returncode == 1 and kind(line) == entry.expect, line


@pytest.mark.parametrize("target", sorted(PASSING))
def test_the_engines_own_call_on_a_passing_case_is_not_reproduced(target, tmp_path):
    _, _, proc = _run(Case.parse(PASSING[target]), target, tmp_path)
    line = verdict(proc.stdout + proc.stderr)
    assert proc.returncode == 0 and line.startswith("NOT REPRODUCED"), line


@pytest.mark.parametrize(
    "name, says",
    [
        (GLUE_FINDING, ("[sglang 0.5.23]", "'sglang==0.5.23'", "'flashinfer-python==", "| triton |", "stand-in")),
        (VLLM_FINDING, ("[vllm 0.34.0]", "'vllm==0.34.0'", "| triton |")),
    ],
)
def test_an_engine_issue_body_names_the_project_and_its_versions(name, says, tmp_path):
    entry = _entry(name)
    exported = export(entry.case, entry.target, entry=entry)
    (script := tmp_path / "repro.py").write_text(exported.text)
    body = issue_body(exported, script, entry.case, entry)
    assert body.verdict.startswith(f"REPRODUCED: {entry.expect}: "), body.verdict
    missing = [word for word in says if word not in body.text]
    assert not missing and "gdn-fuzz" not in body.title, (missing, body.text[:3000])
