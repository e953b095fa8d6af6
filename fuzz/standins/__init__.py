"""CPU stand-ins for GPU kernel libraries: same API and contracts, so targets can be fuzzed without a GPU."""
