"""Verify-then-commit chains as a test: chains (fuzz.generate.chain) drawn for one engine target, run and judged by
fuzz.run.chain, in rounds by the engine the fuzz tests use (fuzz.suite.rounds), into the run report.

Each example is one chain; its budget is the fuzz tests' in calls, as a serving test's: --gdn-examples (else the
profile's max_examples) calls, in chains of up to MAX_ROUNDS verifies and a decode. A test keeps a serving test's
accounts (fuzz.suite.serving.ServingTest, under the operation name OP): the time box stops generation, a round stops
at its first failure and Hypothesis shrinks the chain (fewer rounds, smaller cases); the next round draws on, raising
only failure keys no earlier round reported. Chains run in pytest's process: the pool lives across their calls.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import Phase, settings

from fuzz.generate.chain import MAX_ROUNDS, Chain, chain_target, chains
from fuzz.generate.profiles import Budget
from fuzz.run.chain import ChainRun
from fuzz.run.result import Failure
from fuzz.suite.rounds import Plan, run_rounds
from fuzz.suite.serving import FIRST_ROUND, ServingTest
from fuzz.suite.session import FuzzSession
from fuzz.targets.base import Target
from fuzz.targets.unsupported import UnsupportedHere

OP = "chain"  # the operation name of chain tests in the run report


def run_chains(
    target: Target,
    test: ServingTest,
    examples: int,
    budget: Budget,
    bugs: tuple = (),
    *,
    device: str = "cpu",
    base: settings | None = None,
    seed_: int | None = None,
    shrink: bool = True,
) -> list[tuple[Failure, Chain]]:
    """Run `examples` chains of `test` on `target` in rounds (fuzz.suite.rounds); settings from `base` (default the
    active profile's). Returns each distinct failure, shrunk unless shrink=False (--gdn-no-shrink), with its chain."""

    def body(data) -> None:
        chain = data.draw(chains(target, budget, bugs), label="chain")
        failure = ChainRun(target, device, test).run(chain)
        if failure is not None and test.hit(failure, (chain,), None):
            raise failure.exception()

    return run_rounds(
        test,
        Plan(
            examples=examples,
            first=FIRST_ROUND,
            body=body,
            seed=seed_,
            base=base,
            shrink=shrink,
            explain=False,
            found=lambda failures, ran: _reported(test, failures, ran),
        ),
    )


def _reported(test: ServingTest, failures: list[Failure], ran: settings) -> list[tuple[Failure, Chain]]:
    """A round's new distinct failures (each key's last raise: its smallest chain), in the run report."""
    found = []
    minimal = Phase.shrink in ran.phases and test.may_check(time.monotonic())  # shrinking ran to its end
    for key in (f.key for f in failures):
        failure, (chain,), _ = test.last[key]
        record = test.reported[key] = test.failure_record(failure, minimal)
        if test.report is not None:
            test.report.add_failure(record)
        found.append((record.failure, chain))
    return found


# ---- the pytest test -------------------------------------------------------------------------------------------
def chain_test():
    """The pytest test of fuzz/test_chain.py; fuzz.suite.plugin parametrizes `target` over the registry's chain
    targets (gdn_serving: one pool, several operations; gdn_accepts: fuzz.generate.chain.chain_target)."""

    def test_chain(target: Target, gdn_session: FuzzSession, request) -> None:
        session = gdn_session
        options, nodeid = session.options, request.node.nodeid
        test = ServingTest.start(
            nodeid, target, session.report, options.test_seconds, options.shrink_seconds, options.bound_seconds, OP
        )
        calls = options.examples or settings.default.max_examples
        try:
            found = run_chains(
                target,
                test,
                max(1, calls // (MAX_ROUNDS + 1)),
                session.budget,
                target.serving_bugs(options.masks),
                device=session.budget.device,
                shrink=options.shrink,
                seed_=session.first_seed(nodeid),
            )
        except UnsupportedHere as e:  # the library does not support this device: unavailable, not a finding
            pytest.skip(session.unsupported_here(target, str(e)))
        found = [(f, c) for f, c in found if options.fails_test(f.key)]
        if found:
            lines = [f"{len(found)} distinct failure(s) of {target.name} in verify-commit chains:"]
            lines += [f"  {failure.kind}: {failure.message.splitlines()[0][:800]}" for failure, _ in found]
            pytest.fail("\n".join(lines), pytrace=False)

    test_chain.gdn_serving, test_chain.gdn_op = True, OP
    test_chain.gdn_accepts = chain_target
    return test_chain


__all__ = ["OP", "chain_test", "run_chains"]
