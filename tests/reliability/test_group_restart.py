"""Group controls and grouped job order survive a restart; a version 1 data file is migrated."""
from __future__ import annotations

import sqlite3
from pathlib import Path

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.server import ServerProcess
from bunqueue.storage import schema


def start(data: Path) -> ServerProcess:
    return ServerProcess(env={"BUNQUEUE_DATA_PATH": str(data), "RATE_LIMIT_MAX_REQUESTS": "0"}).start()


def data(c: RawClient, cmd: str, **fields: object) -> dict[str, object]:
    reply = c.call({"cmd": cmd, "queue": "gq", **fields})
    assert reply["ok"], reply
    return reply["data"]


def test_group_controls_and_lane_order_survive_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    proc = start(db)
    try:
        c = RawClient(proc.addr)
        for name, group, prio in [("a2", "A", 2), ("a0", "A", 0), ("a0b", "A", 0), ("b1", "B", 1)]:
            job = {"cmd": "PUSH", "queue": "gq", "name": name, "data": 1, "groupId": group, "priority": prio}
            assert c.call({**job, "durable": True})["ok"]
        assert c.call({"cmd": "SetGroupConcurrency", "queue": "gq", "groupId": "A", "concurrency": 3})["ok"]
        assert c.call({"cmd": "SetGroupRateLimit", "queue": "gq", "groupId": "A", "max": 5, "duration": 900})["ok"]
        assert data(c, "PauseGroup", groupId="P") == {"changed": True}
        assert c.call({"cmd": "SetGroupConcurrency", "queue": "gq", "groupId": "Z", "concurrency": 2})["ok"]
        assert data(c, "RemoveGroupConcurrency", groupId="Z") == {"removed": 1}
        # Runtime windows are not kept.
        assert c.call({"cmd": "RateLimitGroup", "queue": "gq", "groupId": "B", "duration": 600000})["ok"]
        c.close()
        assert proc.stop() == 0
        proc = start(db)
        c = RawClient(proc.addr)
        assert data(c, "GetGroupConcurrency", groupId="A") == {"concurrency": 3}
        assert data(c, "GetGroupRateLimit", groupId="A") == {"limit": {"max": 5, "duration": 900}}
        assert data(c, "IsGroupPaused", groupId="P") == {"paused": True}
        assert data(c, "GetGroupConcurrency", groupId="Z") == {"concurrency": None}
        assert data(c, "GetGroupRateLimitTtl", groupId="B") == {"ttl": -2}
        assert data(c, "GetGroupsJobsCount") == {"count": 4}
        pulled = c.call({"cmd": "PULLB", "queue": "gq", "count": 10})["jobs"]
        assert [job["name"] for job in pulled] == ["a0", "b1", "a0b", "a2"]
        c.close()
    finally:
        proc.stop()


def test_a_version_1_file_gains_the_group_table(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    for statement in schema.MIGRATIONS[1]:
        conn.execute(statement)
    conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '1')")
    conn.close()
    proc = start(db)
    try:
        c = RawClient(proc.addr)
        assert data(c, "PauseGroup", groupId="G") == {"changed": True}
        c.close()
        assert proc.stop() == 0
    finally:
        proc.stop()
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (
        str(schema.SCHEMA_VERSION),
    )
    assert conn.execute("SELECT queue, group_id FROM group_controls").fetchall() == [("gq", "G")]
    conn.close()
