"""What the tests and benchmarks share: a real server process, a raw-frame client, free ports."""
