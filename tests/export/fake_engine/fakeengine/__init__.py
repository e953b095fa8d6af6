"""A serving engine's package, for tests/export: importing it pulls in the serving stack (server), as SGLang's and
vLLM's package inits do; its GDN glue module (gdn) needs none of it."""

import fakeengine.server  # noqa: F401 - what a real engine's package init drags in
