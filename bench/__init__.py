"""Benchmarks that print comparison tables (run each file as a script; never timed tests)."""
