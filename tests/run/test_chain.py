"""Verify, then commit (fuzz.generate.chain, fuzz.run.chain, fuzz.suite.chain): a chain's coordinate gives it back; the
invariant holds on the real glue and kernels (SGLang's under the FlashInfer CPU stand-in and the Triton interpreter,
its commit kernel launched raw; vLLM's interpreted); each commit mutant of tests/mutants.py breaks it on a
hand-written chain, and the ci profile finds it within test_chain's budget and shrinks it to one round."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from fuzz.generate.chain import Chain, after, chain_target, chains
from fuzz.generate.profiles import BUDGETS
from fuzz.judge.failures import NonFinite, StateMismatch
from fuzz.run.chain import ChainRun
from fuzz.suite.chain import OP, run_chains
from fuzz.suite.serving import ServingTest
from fuzz.targets.registry import TARGETS, overridden
from tests.targets.test_glue_loaders import interpreted  # noqa: F401 (autouse: TRITON_INTERPRET=1 for this module)

BY_NAME = {t.name: t for t in TARGETS}
CI = BUDGETS["ci"]
CI_CHAINS = 200 // 4  # test_chain's budget under the ci profile: 200 calls, chains of up to 3 verifies and a decode
QUIET = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck), phases=[Phase.generate])
SHAPE = "H2-HV2-K8-V8-pool4-pad1-fp32state-fp16in-i32-vk-decay_forget"
# Two live requests (batch rows 0 and 1 on slots 2 and 1: a commit by slot reads the other's row) and a padded row.
TRITON = (
    f"verify-B3-T2-{SHAPE}-seed5-slots[2,1,-1]-inter4x2+0-noupdate | acc[2,1] | "
    f"verify-B3-T2-{SHAPE}-seed6-slots[2,1,-1]-inter4x2+0-noupdate | acc[1,2] | "
    f"decode-B3-T1-{SHAPE}-seed7-slots[2,1,-1]"
)
# No padded row: SM90 FlashInfer decode sends one onto the last slot (known bug sglang-sm90-pad-last-slot).
FLASHINFER = (
    TRITON.replace("K8-V8", "K128-V128").replace("fp16in", "bf16in").replace("B3", "B2").replace("pad1", "pad0")
).replace(",-1]", "]")
VLLM_SHAPE = "H1-HV2-K8-V16-pool8-pad0-fp32state-bf16in-i32-vk-decay_mild"
VLLM = (
    f"verify-B2-T3-{VLLM_SHAPE}-seed1-slots[2,4]-tslots[1/2/3,4/5/6]-null0-acc[2,1] | acc[3,2] | "
    f"verify-B2-T3-{VLLM_SHAPE}-seed2-slots[3,5]-tslots[1/2/3,4/5/6]-null0-acc[3,2] | acc[1,1] | "
    f"decode-B2-T1-{VLLM_SHAPE}-seed3-slots[1,4]-null0"
)
CHAINS = {
    "sglang-glue-triton": TRITON,
    "sglang-glue-fi-sm90": FLASHINFER,
    "sglang-glue-fallback": FLASHINFER,
    "vllm-sigmoid": VLLM,
    "vllm-recurrent": VLLM,
}
MUTANTS = ("commit_reads_wrong_row", "commit_off_by_one_step")


def test_the_coordinate_gives_the_chain_back():
    for coordinate in CHAINS.values():
        chain = Chain.parse(coordinate)
        assert repr(chain) == coordinate
        assert Chain.parse(repr(chain)) == chain
        assert len(chain.rounds) == 2 and chain.decode.op == "decode"
    with pytest.raises(ValueError, match="accepted-count token"):
        Chain.parse(TRITON.replace("acc[2,1]", "2,1"))


def test_the_next_call_reads_what_the_commit_selects():
    """vLLM: the accepted counts become the next call's num_accepted_tokens and its read slots; SGLang's slots stay."""
    chain = Chain.parse(VLLM)
    (first, accepted), (second, _) = chain.rounds
    assert after(first, accepted, "verify", second.seed) == second
    assert after(second, chain.rounds[1][1], "decode", chain.decode.seed) == chain.decode
    (first, accepted), (second, _) = Chain.parse(TRITON).rounds
    assert after(first, accepted, "verify", second.seed) == second


@pytest.mark.parametrize("name", ["sglang-glue-triton", "vllm-sigmoid"])
def test_drawn_chains_round_trip(name):
    target = BY_NAME[name]
    assert chain_target(target)

    @settings(QUIET, max_examples=30)
    @given(chains(target, CI))
    def round_trip(chain):
        assert Chain.parse(repr(chain)) == chain
        assert all(case.op == "verify" for case, _ in chain.rounds) and chain.decode.op == "decode"

    round_trip()


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_the_invariant_holds_on_the_real_glue(name):
    run = ChainRun(BY_NAME[name], "cpu")
    assert run.run(Chain.parse(CHAINS[name])) is None
    assert [r.case.op for r in run.results] == ["verify", "verify", "decode"]
    assert all(r.comparisons for r in run.results)


@pytest.mark.parametrize("name", ["sglang-glue-triton", "sglang-glue-fi-sm90"])
@pytest.mark.parametrize("mutant", MUTANTS)
def test_each_commit_mutant_breaks_the_invariant(mutant, name):
    with overridden({"sglang-glue": f"tests.mutants:{mutant}"}):
        failure = ChainRun(BY_NAME[name], "cpu").run(Chain.parse(CHAINS[name]))
    assert failure is not None and failure.kind in (StateMismatch.__name__, NonFinite.__name__), failure
    assert failure.cause.startswith("after the commit: "), failure.cause
    assert f"call 1 of 3 (verify) of the chain {CHAINS[name]}" in failure.detail


@pytest.mark.parametrize("mutant", MUTANTS)
def test_the_ci_profile_finds_each_commit_mutant_and_shrinks_it(mutant):
    target = BY_NAME["sglang-glue-triton"]
    with overridden({"sglang-glue": f"tests.mutants:{mutant}"}):
        test = ServingTest.start(f"test_chain[{target.name}]", target, box=60, shrink_seconds=60, op=OP)
        found = run_chains(target, test, CI_CHAINS, CI, seed_=0, base=settings(deadline=None, database=None))
    assert found, f"{mutant}: no failure in {test.drawn} chains"
    committed = [(f, c) for f, c in found if f.cause.startswith("after the commit: ")]  # a wrong state, or NaN
    assert committed, [f.message for f, _ in found]
    assert min(test.reported[f.key].examples_before for f, _ in committed) < CI_CHAINS
    assert all(len(chain.rounds) == 1 for _, chain in committed), [c for _, c in committed]  # shrunk to one round
