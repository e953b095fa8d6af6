"""pytest wiring for the fuzz suites. The hooks live in fuzz.suite.plugin: gdn-fuzz's pytest11 entry point where it is
installed, dormant until this conftest wakes it; in a checkout on PYTHONPATH, where no entry point loaded it, waking
it registers it (once)."""


def pytest_addoption(parser, pluginmanager):
    from fuzz.suite.plugin import wake

    wake(pluginmanager)
