"""Pools whose requests' element offsets pass 2^31 (the int32 offset overflow class), drawn in every example here
instead of rarely in the other tests: every pool dtype, index dtype and contiguous or strided pool of each target, a
2^31-element guard below the pool where a wrapped offset lands (fuzz.model.guarded), one such case at a time
per GPU (fuzz.run.memory). A target whose large cases do not fit the device's memory is reported unavailable, with the
sizes; a stand-in that declares a smaller OFFSET_BITS is fuzzed here on the CPU."""

from fuzz.suite.session import fuzz_test

test_large_pool_decode = fuzz_test("decode", large=True)
test_large_pool_verify = fuzz_test("verify", large=True)
test_large_pool_prefill = fuzz_test("prefill", large=True)
