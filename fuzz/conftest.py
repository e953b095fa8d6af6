"""pytest wiring for the fuzz suites: the hooks live in fuzz.run.plugin."""
from fuzz.run.plugin import *  # noqa: F401,F403 - pytest finds the hooks by name here
