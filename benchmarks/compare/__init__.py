"""Side-by-side benchmark of this broker against the Bun original: ``python -m benchmarks.compare``.

Installs Bun and the reference bunqueue from npm into benchmarks/.cache/ when missing, starts each
server fresh for every round on free loopback ports (memory and SQLite modes), runs the workloads of
:mod:`benchmarks.load` against both in alternating order, verifies exactly-once delivery as it goes,
and prints medians with ratios oriented so that > 1 always means ours is better.
"""
