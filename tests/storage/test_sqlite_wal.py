"""The WAL stays bounded under writes that never pause.

A PASSIVE checkpoint copies the frames it finds and the WAL restarts only when a write begins after every
frame was copied; with the writer always mid-batch that never happens, and the WAL grew by the whole load
(hundreds of MB in a soak). Past ``WAL_RESET_BYTES`` the writer truncates it between two batches, and past
``WAL_LIMIT_BYTES`` (a PASSIVE slower than the writes) it waits for the PASSIVE and truncates.
"""
from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from pathlib import Path

import pytest

from bunqueue.storage import sqlite
from bunqueue.storage.sqlite import SQLiteStore

SETTINGS = {"paused": False, "note": "x" * 3000}
QUEUES = 400
# A batch holds at most one row per queue, each about one page, plus the pages above them.
BATCH_BYTES = QUEUES * 2 * 4096


async def _write_without_pause(store: SQLiteStore, changes: int, path: str) -> int:
    """The largest WAL seen while writing."""
    # Each queue row is about one page, and a change comes every few loop turns: the writer always has
    # the next batch waiting when it commits.
    peak = 0
    for i in range(changes):
        store.queue_changed(f"q{i % QUEUES}", {**SETTINGS, "i": i})
        if i % 2 == 0:
            await asyncio.sleep(0)
            peak = max(peak, _wal_bytes(path))
    assert await store.committed() is None
    return peak


def _wal_bytes(path: str) -> int:
    wal = Path(path + "-wal")
    return wal.stat().st_size if wal.exists() else 0


@pytest.mark.parametrize("synchronous", ["NORMAL", "FULL"])
async def test_wal_truncated_under_a_load_that_never_pauses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, synchronous: str
) -> None:
    await _bounded_under_load(tmp_path, monkeypatch, synchronous, changes=80_000)


async def test_wal_bounded_when_the_checkpoint_is_slower_than_the_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A disk whose PASSIVE takes half a second: the writes meanwhile would all land in the WAL.
    passive = SQLiteStore._passive

    def slow_passive(self: SQLiteStore, conn: sqlite3.Connection, wal: str) -> None:
        time.sleep(0.5)
        passive(self, conn, wal)

    monkeypatch.setattr(SQLiteStore, "_passive", slow_passive)
    await _bounded_under_load(tmp_path, monkeypatch, "NORMAL", changes=20_000)


async def _bounded_under_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, synchronous: str, changes: int
) -> None:
    monkeypatch.setattr(sqlite, "CHECKPOINT_ROWS", 200)
    monkeypatch.setattr(sqlite, "WAL_RESET_BYTES", 2 * 1024 * 1024)
    monkeypatch.setattr(sqlite, "WAL_LIMIT_BYTES", 8 * 1024 * 1024)
    path = str(tmp_path / "data.db")
    store = SQLiteStore(path, synchronous)
    store.open(0, 0)
    store.start(asyncio.get_running_loop())
    try:
        peak = 0
        for _ in range(changes // 2_000):
            peak = max(peak, await _write_without_pause(store, 2_000, path))
        # Page-sized rows: an unbounded WAL holds 20 to 50 MB of them; a bounded one never more than
        # the limit and the one batch written before the writer looked.
        assert store.wal_resets > 0
        assert peak < sqlite.WAL_LIMIT_BYTES + BATCH_BYTES, f"WAL reached {peak / 1e6:.1f} MB"
    finally:
        await store.close()
    # The rows are all there after the truncations.
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT count(*) FROM queues").fetchone()[0] == QUEUES
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    assert os.path.getsize(path) > 0
