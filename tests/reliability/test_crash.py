"""kill -9 under load: acknowledged durable and delayed pushes (PUSH and PUSHB), FAILs and ACKs survive every
crash and every acknowledged push left is worked, no job completes twice, a cron outlives every kill, every
PUSHF graph is wholly there or wholly absent and no parent is pulled before its children completed.

CI runs the smoke size; ``BUNQUEUE_CRASH_KILLS=500`` (or ``python tests/reliability/crashload.py``) runs
hundreds of kills.
"""
from __future__ import annotations

import asyncio
import os
from pathlib import Path

from tests.reliability.crashload import BUFFER_LOSS_WINDOW_MS, run


def test_sigkill_under_load_loses_nothing_acknowledged(tmp_path: Path) -> None:
    kills = int(os.environ.get("BUNQUEUE_CRASH_KILLS", "10"))
    verdict = asyncio.run(run(kills, tmp_path, seed=7))
    assert verdict.kills == kills
    assert verdict.durable_pushed > 0 and verdict.acked > 0, "the load did not run"
    assert all(verdict.pushed_by.get(kind, 0) > 0 for kind in ("PUSH", "PUSHB", "PUSHF")), verdict.pushed_by
    assert verdict.fewest_round_pushes > 0 and verdict.fewest_round_completions > 0, "a round did no work"
    assert verdict.durable_missing == 0 and verdict.unworked == 0, verdict
    assert verdict.redelivered_after_ack == 0, verdict
    assert verdict.buffered_missing_outside_window == 0, (BUFFER_LOSS_WINDOW_MS, verdict)
    assert verdict.integrity == "ok"
    assert verdict.failed > 0 and verdict.failed_then_completed > 0 and verdict.delayed_pushed > 0, verdict
    assert verdict.single_pushes > 0, verdict
    assert verdict.double_completed == 0, verdict
    assert verdict.failures_lost == 0, verdict
    assert verdict.cron_completed > 0 and verdict.cron_alive, verdict
    flows = verdict.flows
    assert flows is not None and flows.graphs_acked > 0, "no flow graph was pushed"
    assert flows.partial == 0 and flows.acked_missing == 0, flows
    assert flows.stuck_parents == 0 and flows.orphan_pulls == 0, flows
    assert flows.parents_completed > 0 and flows.early_parents == 0, flows
