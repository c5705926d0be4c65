"""Benchmark harness: ``python -m benchmarks.run`` (see benchmarks/README.md)."""
