"""A data file of schema version 1 (no webhooks table) is brought to version 2 in place."""
from __future__ import annotations

from pathlib import Path

from bunqueue.storage import schema


def test_version_1_file_gains_the_webhooks_table(tmp_path: Path) -> None:
    path = str(tmp_path / "v1.db")
    conn = schema.connect(path, "NORMAL")
    conn.execute("BEGIN IMMEDIATE")
    for statement in schema.MIGRATIONS[1]:
        conn.execute(statement)
    conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '1')")
    conn.execute("INSERT INTO queues (name, settings) VALUES ('q', ?)", (schema.pack({"paused": True}),))
    conn.execute("COMMIT")
    assert schema.migrate(conn) == 2
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("2",)
    conn.execute("INSERT INTO webhooks (id, record) VALUES ('h', ?)", (schema.pack({"id": "h"}),))
    snap = schema.read_snapshot(conn, 4, 10)
    assert snap.webhooks == [{"id": "h"}] and snap.queues == {"q": {"paused": True}}
    conn.close()
