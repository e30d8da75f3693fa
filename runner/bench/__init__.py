"""Benchmarks that print figures (never pass/fail timing checks): router, simulator, client."""
