"""Data files of older schema versions are brought to the current version and read as before."""
from __future__ import annotations

import sqlite3
from pathlib import Path

from bunqueue._core.jobfactory import JobFactory
from bunqueue._core.rows import RowBuffer
from bunqueue.storage import schema


def _file_of_version(path: str, version: int) -> sqlite3.Connection:
    conn = schema.connect(path, "NORMAL")
    conn.execute("BEGIN IMMEDIATE")
    for target in range(1, version + 1):
        for statement in schema.MIGRATIONS[target]:
            conn.execute(statement)
    conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (str(version),))
    return conn


def test_version_1_file_gains_the_newer_tables(tmp_path: Path) -> None:
    path = str(tmp_path / "v1.db")
    conn = _file_of_version(path, 1)
    conn.execute("INSERT INTO queues (name, settings) VALUES ('q', ?)", (schema.pack({"paused": True}),))
    conn.execute("COMMIT")
    assert schema.migrate(conn) == schema.SCHEMA_VERSION == 5
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("5",)
    conn.execute("INSERT INTO webhooks (id, record) VALUES ('h', ?)", (schema.pack({"id": "h"}),))
    conn.execute("INSERT INTO crons (name, record) VALUES ('c', ?)", (schema.pack({"name": "c"}),))
    snap = schema.read_snapshot(conn, 4, 10)
    assert snap.webhooks == [{"id": "h"}] and snap.crons == [{"name": "c"}]
    assert snap.queues == {"q": {"paused": True}}
    conn.close()


def test_version_4_jobs_read_back_and_later_pulls_keep_their_start(tmp_path: Path) -> None:
    # Version 4 rows: a pull wrote the state column alone, so a job pulled then has no start to recover.
    path = str(tmp_path / "v4.db")
    conn = _file_of_version(path, 4)
    factory = JobFactory()
    waiting, pulled = (factory.build({"name": name}, "q", 1.0, True) for name in ("waiting", "pulled"))
    for job in (waiting, pulled):
        conn.execute(
            "INSERT INTO jobs (id, queue, state, record) VALUES (?, ?, ?, ?)",
            (job.id, "q", 1, RowBuffer().record(job)),
        )
    conn.execute("UPDATE jobs SET state = 3 WHERE id = ?", (pulled.id,))
    conn.execute("COMMIT")
    assert schema.migrate(conn) == 5
    snap = schema.read_snapshot(conn, 4, 10)
    assert {job.id: job.state for job in snap.jobs} == {waiting.id: 1, pulled.id: 3}
    assert snap.pulls == {}
    # A pull after the upgrade records its start beside the state.
    conn.execute("UPDATE jobs SET state = 3, started_at = 1796315349442 WHERE id = ?", (waiting.id,))
    assert schema.read_snapshot(conn, 4, 10).pulls == {waiting.id: 1796315349442.0}
    conn.close()
