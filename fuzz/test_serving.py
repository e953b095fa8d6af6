"""Serving sequences: every available target driven like a serving engine drives it, one persistent pool per example,
calls of every operation it supports with shapes, dtypes, capacities, strides and output buffers changing between them
(fuzz.generate.serving draws them, fuzz.run.serving judges them). -k <target> selects one."""

from fuzz.suite.serving import serving_test

test_serving = serving_test()
