"""gdn-fuzz: Hypothesis-driven differential fuzzing of GDN kernels against the float64 oracle."""
