"""Power cuts under load (the crash load on the ``powercut`` VFS, which drops every write not yet fsynced,
or keeps a random half of the sectors written since, as a disk that reorders its writes): with
``BUNQUEUE_SQLITE_SYNCHRONOUS=FULL`` nothing acknowledged is lost and the file stays whole; with ``NORMAL``
only what came after the WAL's last fsync is lost.

CI runs a few cuts; ``python -m tests.reliability.powerloss --cuts 100 --synchronous FULL`` runs the long one
(``BUNQUEUE_POWER_CUTS=100`` here does the same).
"""
from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from bunqueue._testbase import powercut
from tests.reliability.powerloss import PowerVerdict, run_cuts

CUTS = int(os.environ.get("BUNQUEUE_POWER_CUTS", "8"))


def shim(folder: Path) -> Path:
    try:
        return powercut.build(folder)
    except powercut.PowercutUnavailable as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(str(exc))


def power_cuts(tmp_path: Path, synchronous: str, seed: int, keep: float = 0.0) -> PowerVerdict:
    shim(tmp_path / "shim")
    return asyncio.run(run_cuts(CUTS, tmp_path, synchronous, seed=seed, keep=keep))


# Commits rows 0-99 with an fsync each, then 100-149 without any, and waits to be killed.
WRITER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA journal_mode=WAL")
conn.execute("PRAGMA synchronous=FULL")
conn.execute("CREATE TABLE t (n INTEGER)")
for n in range(100):
    conn.execute("INSERT INTO t VALUES (?)", (n,))
conn.execute("PRAGMA synchronous=OFF")
for n in range(100, 150):
    conn.execute("INSERT INTO t VALUES (?)", (n,))
print("written", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize(("keep", "rows"), [(0.0, 100), (1.0, 150)])
def test_a_cut_takes_each_file_back_to_its_last_fsync(tmp_path: Path, keep: float, rows: int) -> None:
    """Every unsynced write dropped, or (``keep`` 1) every one written again from the log."""
    data = tmp_path / "data"
    data.mkdir()
    db = data / "t.db"
    env = {**os.environ, **powercut.server_env(shim(tmp_path / "shim"))}
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(db)], env=env, stdout=subprocess.PIPE)
    try:
        assert writer.stdout is not None and writer.stdout.readline() == b"written\n"
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as before:
            assert before.execute("SELECT count(*) FROM t").fetchone() == (150,)
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
    Path(f"{db}-shm").unlink(missing_ok=True)
    cuts = powercut.cut(data, keep)
    assert [cut.path.name for cut in cuts] == ["t.db-wal"] and cuts[0].bytes_dropped > 0
    assert cuts[0].bytes_redone == (cuts[0].bytes_dropped if keep else 0)
    assert sorted(path.name for path in data.iterdir()) == ["t.db", "t.db-wal"]
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as after:
        assert after.execute("SELECT min(n), max(n), count(*) FROM t").fetchone() == (0, rows - 1, rows)
        assert after.execute("PRAGMA integrity_check").fetchone() == ("ok",)


@pytest.mark.parametrize("keep", [0.0, 0.5], ids=["all-unsynced-dropped", "half-unsynced-sectors-kept"])
def test_full_loses_nothing_acknowledged_on_power_loss(tmp_path: Path, keep: float) -> None:
    verdict = power_cuts(tmp_path, "FULL", seed=3, keep=keep)
    crash = verdict.crash
    assert len(verdict.cuts) == CUTS
    assert crash.durable_pushed > 0 and crash.acked > 0 and crash.failed > 0, "the load did not run"
    assert [cut.integrity for cut in verdict.cuts] == ["ok"] * CUTS and crash.integrity == "ok"
    assert verdict.durable_lost == 0 and crash.unworked == 0, verdict
    assert verdict.acks_undone == 0 and crash.double_completed == 0, verdict
    assert verdict.failures_lost == 0, verdict
    assert crash.buffered_missing_outside_window == 0, verdict
    assert verdict.outside_bound == 0, verdict
    assert crash.cron_alive, verdict
    flows = crash.flows
    assert flows is not None and flows.graphs_acked > 0
    assert flows.partial == flows.acked_missing == flows.stuck_parents == flows.early_parents == 0, flows


def test_normal_loses_only_what_came_after_the_last_wal_fsync(tmp_path: Path) -> None:
    verdict = power_cuts(tmp_path, "NORMAL", seed=3)
    crash = verdict.crash
    # Rounds this short never reach a checkpoint: each cut drops the unsynced WAL, so the cut really bites.
    assert verdict.bytes_dropped > 0 and verdict.durable_lost > 0, verdict
    assert verdict.outside_bound == 0 and crash.unworked == 0, verdict
    assert [cut.integrity for cut in verdict.cuts] == ["ok"] * CUTS and crash.integrity == "ok"
    flows = crash.flows
    assert flows is not None and flows.partial == flows.stuck_parents == 0, flows


# Creates a database and never fsyncs anything, then waits to be killed.
UNSYNCED = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA synchronous=OFF")
conn.execute("PRAGMA journal_mode=WAL")
conn.execute("CREATE TABLE t (n INTEGER)")
print("written", flush=True)
time.sleep(60)
"""


def test_a_file_created_since_its_folder_was_last_fsynced_is_gone_after_a_cut(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    env = {**os.environ, **powercut.server_env(shim(tmp_path / "shim"))}
    writer = subprocess.Popen([sys.executable, "-c", UNSYNCED, str(data / "t.db")], env=env,
                              stdout=subprocess.PIPE)
    try:
        assert writer.stdout is not None and writer.stdout.readline() == b"written\n"
        assert {"t.db", "t.db-wal", "t.db.created", "t.db-wal.created"} <= {p.name for p in data.iterdir()}
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
    cuts = powercut.cut(data)
    assert sorted((cut.path.name, cut.removed) for cut in cuts) == [("t.db", True), ("t.db-wal", True)]
    assert list(data.iterdir()) == []
