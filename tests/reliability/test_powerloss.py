"""Power cuts under load (the crash load on the ``powercut`` VFS, which drops every write not yet fsynced):
with ``BUNQUEUE_SQLITE_SYNCHRONOUS=FULL`` nothing acknowledged is lost and the file stays whole; with
``NORMAL`` only what came after the WAL's last fsync is lost.

CI runs a few cuts; ``python -m tests.reliability.powerloss --cuts 100 --synchronous FULL`` runs the long one
(``BUNQUEUE_POWER_CUTS=100`` here does the same).
"""
from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from bunqueue._testbase import powercut
from tests.reliability.powerloss import PowerVerdict, run_cuts

CUTS = int(os.environ.get("BUNQUEUE_POWER_CUTS", "8"))


def power_cuts(tmp_path: Path, synchronous: str, seed: int) -> PowerVerdict:
    try:
        powercut.build(tmp_path / "shim")
    except powercut.PowercutUnavailable as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(str(exc))
    return asyncio.run(run_cuts(CUTS, tmp_path, synchronous, seed=seed))


def test_full_loses_nothing_acknowledged_on_power_loss(tmp_path: Path) -> None:
    verdict = power_cuts(tmp_path, "FULL", seed=3)
    crash = verdict.crash
    assert len(verdict.cuts) == CUTS
    assert crash.durable_pushed > 0 and crash.acked > 0 and crash.failed > 0, "the load did not run"
    assert [cut.integrity for cut in verdict.cuts] == ["ok"] * CUTS and crash.integrity == "ok"
    assert verdict.durable_lost == 0, verdict
    assert verdict.acks_undone == 0 and crash.double_completed == 0, verdict
    assert verdict.failures_lost == 0, verdict
    assert crash.buffered_missing_outside_window == 0, verdict
    assert verdict.outside_bound == 0, verdict
    assert crash.cron_alive, verdict
    flows = crash.flows
    assert flows is not None and flows.graphs_acked > 0
    assert flows.partial == flows.acked_missing == flows.stuck_parents == 0, flows


def test_normal_loses_only_what_came_after_the_last_wal_fsync(tmp_path: Path) -> None:
    verdict = power_cuts(tmp_path, "NORMAL", seed=3)
    crash = verdict.crash
    # Rounds this short never reach a checkpoint: each cut drops the unsynced WAL, so the cut really bites.
    assert verdict.bytes_dropped > 0 and verdict.durable_lost > 0, verdict
    assert verdict.outside_bound == 0, verdict
    assert [cut.integrity for cut in verdict.cuts] == ["ok"] * CUTS and crash.integrity == "ok"
    flows = crash.flows
    assert flows is not None and flows.partial == flows.stuck_parents == 0, flows
