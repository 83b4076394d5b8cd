"""Test support shared by the test suite and the benchmarks."""
