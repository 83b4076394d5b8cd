"""The WAL stays bounded under writes that never pause.

A PASSIVE checkpoint copies the frames it finds and the WAL restarts only when a write begins after every
frame was copied; with the writer always mid-batch that never happens, and the WAL grew by the whole load
(hundreds of MB in a soak). Past ``WAL_RESET_FRAMES`` the writer truncates it between two batches.
"""
from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path

import pytest

from bunqueue.storage import sqlite
from bunqueue.storage.sqlite import SQLiteStore

SETTINGS = {"paused": False, "note": "x" * 3000}


async def _write_without_pause(store: SQLiteStore, changes: int) -> None:
    # Each queue row is about one page, and a change comes every few loop turns: the writer always has
    # the next batch waiting when it commits.
    for i in range(changes):
        store.queue_changed(f"q{i % 400}", {**SETTINGS, "i": i})
        if i % 2 == 0:
            await asyncio.sleep(0)
    assert await store.committed() is None


def _wal_bytes(path: str) -> int:
    wal = Path(path + "-wal")
    return wal.stat().st_size if wal.exists() else 0


@pytest.mark.parametrize("synchronous", ["NORMAL", "FULL"])
async def test_wal_truncated_under_a_load_that_never_pauses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, synchronous: str
) -> None:
    monkeypatch.setattr(sqlite, "CHECKPOINT_ROWS", 200)
    monkeypatch.setattr(sqlite, "WAL_RESET_BYTES", 2 * 1024 * 1024)
    path = str(tmp_path / "data.db")
    store = SQLiteStore(path, synchronous)
    store.open(0, 0)
    store.start(asyncio.get_running_loop())
    try:
        peak = 0
        for _ in range(40):
            await _write_without_pause(store, 2_000)
            peak = max(peak, _wal_bytes(path))
        # 80,000 page-sized rows: an unbounded WAL holds 20 to 50 MB of them; a bounded one about
        # WAL_RESET_BYTES and what was written while its PASSIVE ran (more on a busy machine).
        assert store.wal_resets > 0
        assert peak < 24 * 1024 * 1024, f"WAL reached {peak / 1e6:.1f} MB"
    finally:
        await store.close()
    # The rows are all there after the truncations.
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT count(*) FROM queues").fetchone()[0] == 400
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    assert os.path.getsize(path) > 0
