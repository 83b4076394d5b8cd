"""The queued-memory benchmark against our own server, small: every job is counted and memory is read."""
from __future__ import annotations

from benchmarks.compare.servers import OursLauncher
from benchmarks.queued_memory import measure


def test_every_pushed_job_is_queued_and_memory_is_read() -> None:
    row = measure(OursLauncher(), "memory", 3000, progress=False)
    assert row["counted"] == 3000
    assert 0 < row["idle_mib"] <= row["queued_mib"] <= row["peak_mib"]
    assert row["bytes_per_job"] > 0
