"""The soak (``python -m benchmarks.soak``) in short: a fresh SQLite server under a paced load for about 20 s,
every job acknowledged exactly once, nothing left on the server, the server up and stopped cleanly.

Speed and memory flatness are reported, not asserted here: 20 s on a shared machine measures neither (the
heaps and SQLite's page cache are still settling); the hour-long run in the README does. The checks' own
arithmetic is tested below so that a run with a duplicate, a lost job or a leak cannot pass.
"""
from __future__ import annotations

import json
import subprocess
import sys

from benchmarks.soak import Sample, SoakConfig, memory_figures, run
from benchmarks.soakload import Tally

SECONDS = 20
RATE = 1000


def test_short_soak_completes_every_job_exactly_once() -> None:
    lines: list[str] = []
    result = run(SoakConfig(minutes=SECONDS / 60, rate=RATE, workers=20, sample_seconds=2), lines.append)
    assert result["pushed"] == result["planned"] == SECONDS * RATE, result["pushed"]
    assert result["completed"] == result["pushed"]
    assert result["completed_twice"] == 0
    assert result["never_completed"] == 0
    assert result["acks_refused"] == 0 and result["unknown_seq"] == 0
    assert result["left_on_server"] == {}
    checks = result["checks"]
    assert checks["every_job_once"] and checks["no_ack_refused"] and checks["nothing_left_on_server"], checks
    assert checks["server_alive_and_stopped_cleanly"], result.get("server_log_tail")
    # A progress line at the start, one per sample during the load and one after the drain.
    assert len(lines) >= SECONDS // 2, lines
    assert all(s["rss_mb"] > 0 for s in result["samples"])


def test_tally_counts_duplicates_losses_and_refusals() -> None:
    tally = Tally(5)
    tally.pushed = 5
    jobs = [{"data": {"seq": seq}} for seq in (0, 1, 2)]
    tally.record_ack(jobs, {"ok": True})
    tally.record_ack(jobs[:1], {"ok": True})
    tally.record_ack([{"data": {"seq": 3}}, {"data": {"seq": 9}}], {"ok": True, "data": {"ignoredIndices": [0]}})
    tally.record_ack([{"data": {"seq": 4}}], {"ok": False, "error": "Job not found"})
    assert tally.completed_twice() == 1
    assert tally.never_completed() == 2
    assert tally.acks_refused == 2
    assert tally.unknown_seq == 1
    assert tally.completed == 4


def _samples(rss: list[float]) -> list[Sample]:
    return [Sample(float(10 * i), 0, 0, 0.0, 0.0, 0, 0, mb, 0.0, 0.0, 0.0) for i, mb in enumerate(rss)]


def test_memory_flat_passes_noise_and_fails_a_steady_rise() -> None:
    noisy = memory_figures(_samples([50, 80, 100, 101, 99, 100, 102, 100, 99]), 80)
    assert noisy["memory_flat"] and noisy["rss_half_mb"] == 99, noisy
    rising = memory_figures(_samples([50, 80, 100, 102, 104, 106, 108, 110, 112]), 80)
    assert not rising["memory_flat"], rising
    assert rising["rss_slope_mb_per_10min"] == 120.0
    too_short = memory_figures(_samples([50, 50]), 10)
    assert not too_short["memory_flat"]


def test_command_prints_json_and_exits_by_its_checks() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.soak", "--minutes", "0.1", "--rate", "200", "--workers", "2",
         "--sample-seconds", "1", "--json"],
        capture_output=True, text=True, timeout=120,
    )
    result = json.loads(done.stdout)
    assert result["completed"] == result["pushed"] == 1200
    assert done.returncode == (0 if result["ok"] else 1)
    assert "pushed" in done.stderr, "no progress lines"
