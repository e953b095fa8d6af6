"""The ground floor every stage shares: the Case, the values drawn from its seed, the guarded buffers and poison
patterns a call's tensors live in, what a target supports, the known bugs and the dispatch thresholds (data), and
the memory one check needs. It imports nothing of fuzz/ above it."""
