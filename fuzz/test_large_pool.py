"""Pools whose top slots' element offsets pass int32 (8 GiB on a GPU): the int32 offset overflow class, drawn in every
example here instead of rarely in the other tests, and one large pool at a time per GPU (fuzz.run.memory)."""
from fuzz.run.session import fuzz_test

test_large_pool_decode = fuzz_test("decode", large=True)
test_large_pool_verify = fuzz_test("verify", large=True)
