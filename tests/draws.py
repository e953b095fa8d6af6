"""Hypothesis settings for a test that walks a strategy's draws: the same `n` examples every run (derandomized, no
database), generation only (no shrinking: a draw is looked at, not failed), no deadline and no health check."""

from hypothesis import HealthCheck, Phase, settings


def first_draws(n: int) -> settings:
    return settings(
        max_examples=n,
        database=None,
        deadline=None,
        derandomize=True,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
