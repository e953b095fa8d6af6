"""verify: every available target against the float64 oracle (ids name the target: -k <family> selects one)."""

from fuzz.suite.session import fuzz_test

test_verify = fuzz_test("verify")
