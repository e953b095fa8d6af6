"""Verify, then commit: every engine target that verifies and decodes, driven through chains on one pool (a verify,
the engine's commit of the accepted tokens, again, then a decode: fuzz.generate.chain draws them, fuzz.run.chain
judges them), each request's committed slot against the oracle's decode of its accepted prefix. -k <target> selects
one."""

from fuzz.suite.chain import chain_test

test_chain = chain_test()
