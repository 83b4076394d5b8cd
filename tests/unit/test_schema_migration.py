"""A data file of schema version 1 (no group controls, no webhooks) is brought to the current version."""
from __future__ import annotations

from pathlib import Path

from bunqueue.storage import schema


def test_version_1_file_gains_the_newer_tables(tmp_path: Path) -> None:
    path = str(tmp_path / "v1.db")
    conn = schema.connect(path, "NORMAL")
    conn.execute("BEGIN IMMEDIATE")
    for statement in schema.MIGRATIONS[1]:
        conn.execute(statement)
    conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '1')")
    conn.execute("INSERT INTO queues (name, settings) VALUES ('q', ?)", (schema.pack({"paused": True}),))
    conn.execute("COMMIT")
    assert schema.migrate(conn) == schema.SCHEMA_VERSION == 4
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("4",)
    conn.execute("INSERT INTO webhooks (id, record) VALUES ('h', ?)", (schema.pack({"id": "h"}),))
    conn.execute("INSERT INTO crons (name, record) VALUES ('c', ?)", (schema.pack({"name": "c"}),))
    snap = schema.read_snapshot(conn, 4, 10)
    assert snap.webhooks == [{"id": "h"}] and snap.crons == [{"name": "c"}]
    assert snap.queues == {"q": {"paused": True}}
    conn.close()
