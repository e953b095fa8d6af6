"""pytest plugin for tests/cli/test_campaign.py: ends the process hard after the first test's teardown, as a campaign
round killed mid-run ends (no session finish, no terminal summary)."""

import os

import pytest


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item):
    os._exit(3)
