"""CPU stand-ins for GPU kernel libraries: same API and contracts, so targets can be fuzzed without a GPU."""

# The stand-in of each adapter module's library (the module path an override takes: --gdn-target, --module).
FOR_ADAPTER = {
    "fuzz.targets.flashinfer": "fuzz.standins.flashinfer_cpu",
    "fuzz.targets.flashinfer_sm100": "fuzz.standins.flashinfer_sm100_cpu",
}
