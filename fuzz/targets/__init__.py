"""Target adapters, one module per kernel library; fuzz.targets.registry lists them."""
