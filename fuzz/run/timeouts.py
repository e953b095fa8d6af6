"""How long one check may take in an isolated worker (--gdn-isolate) before it is a KernelHang. A module of its own,
so that the pytest options (fuzz.suite.options) give the default without importing the worker and with it torch: the
plugin's options are registered in every pytest run where gdn-fuzz is installed."""

DEFAULT_TIMEOUT = 120.0  # seconds per call; the first call on a fresh worker may compile
