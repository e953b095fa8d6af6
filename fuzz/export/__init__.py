"""Standalone reproduction scripts and upstream issue bodies, generated from the fuzzer's own sources."""
