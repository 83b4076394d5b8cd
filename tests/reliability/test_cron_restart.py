"""Crons and their execution counts survive a restart; runs missed while down are skipped or collapsed."""
from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from bunqueue._testbase.frames import RawClient
from bunqueue.storage import schema
from tests.reliability.test_restart import restart, start


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
def test_crons_and_executions_survive(tmp_path: Path, kill: bool) -> None:
    data = tmp_path / "q.db"
    proc = start(data)
    try:
        c = RawClient(proc.addr)
        c.ok({"cmd": "Cron", "name": "a-first", "queue": "cr", "data": {"x": 1}, "repeatEvery": 3_600_000,
               "immediately": True, "jobName": "tick", "priority": 2, "maxLimit": 5, "uniqueKey": "u",
               "jobOptions": {"maxAttempts": 7}})
        # Without data: its jobs have none either (and the stored row has no data field).
        c.ok({"cmd": "Cron", "name": "b-second", "queue": "cr", "schedule": "0 9 * * *", "timezone": "Europe/Rome"})
        c.poll({"cmd": "CronGet", "name": "a-first"}, lambda r: r["cron"]["executions"] == 1)
        # The fired run is on disk before its reply: a kill now loses neither the count nor the job.
        before = c.ok({"cmd": "CronList"})["crons"]
        c.close()
        proc = restart(proc, data, kill=kill)
        c = RawClient(proc.addr)
        assert c.ok({"cmd": "CronList"})["crons"] == before
        job = c.ok({"cmd": "PULL", "queue": "cr"})["job"]
        assert (job["name"], job["data"], job["priority"], job["uniqueKey"], job["maxAttempts"]) == (
            "tick", {"x": 1}, 2, "u", 7
        )
        c.ok({"cmd": "CronDelete", "name": "a-first"})
        c.close()
        proc = restart(proc, data)
        c = RawClient(proc.addr)
        assert [cron["name"] for cron in c.ok({"cmd": "CronList"})["crons"]] == ["b-second"]
        c.close()
    finally:
        proc.stop()


def test_missed_runs_skipped_or_collapsed(tmp_path: Path) -> None:
    data = tmp_path / "q.db"
    every = 2000
    proc = start(data)
    try:
        c = RawClient(proc.addr)
        skip = c.ok({"cmd": "Cron", "name": "skip", "queue": "skip-q", "data": {}, "repeatEvery": every})["cron"]
        collapse = c.ok({"cmd": "Cron", "name": "collapse", "queue": "collapse-q", "data": {}, "repeatEvery": every,
                          "skipMissedOnRestart": False, "preventOverlap": False})["cron"]
        c.close()
        assert proc.stop() == 0
        # Down for three scheduled runs of each.
        first_missed = max(skip["nextRun"], collapse["nextRun"])
        time.sleep(max(0.0, (first_missed + 2 * every + 300) / 1000 - time.time()))
        proc = start(data)
        c = RawClient(proc.addr)
        now = time.time() * 1000
        collapsed = c.poll({"cmd": "CronGet", "name": "collapse"}, lambda r: r["cron"]["executions"] >= 1)
        assert collapsed["cron"]["executions"] == 1
        # The next run keeps the original phase and lies ahead.
        next_run = collapsed["cron"]["nextRun"]
        assert (next_run - collapse["nextRun"]) % every == 0 and next_run > now - 1000
        assert c.ok({"cmd": "GetJobCounts", "queue": "collapse-q"})["counts"]["waiting"] == 1
        skipped = c.ok({"cmd": "CronGet", "name": "skip"})["cron"]
        assert skipped["executions"] == 0 and skipped["nextRun"] >= now
        assert c.ok({"cmd": "GetJobCounts", "queue": "skip-q"})["counts"]["waiting"] == 0
        c.close()
    finally:
        proc.stop()


def test_a_version_1_file_is_upgraded(tmp_path: Path) -> None:
    data = tmp_path / "q.db"
    conn = sqlite3.connect(data)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    for statement in (
        "CREATE TABLE jobs (id TEXT PRIMARY KEY, queue TEXT NOT NULL, state INTEGER NOT NULL, record BLOB NOT NULL)",
        "CREATE TABLE results (job_id TEXT PRIMARY KEY, result BLOB NOT NULL)",
        "CREATE TABLE dlq (job_id TEXT PRIMARY KEY, queue TEXT NOT NULL, entry BLOB NOT NULL)",
        "CREATE TABLE queues (name TEXT PRIMARY KEY, settings BLOB NOT NULL)",
    ):
        conn.execute(statement)
    conn.commit()
    conn.close()
    proc = start(data)
    try:
        c = RawClient(proc.addr)
        c.ok({"cmd": "Cron", "name": "after-upgrade", "queue": "q", "data": {}, "repeatEvery": 60000})
        c.close()
        proc = restart(proc, data)
        c = RawClient(proc.addr)
        assert [cron["name"] for cron in c.ok({"cmd": "CronList"})["crons"]] == ["after-upgrade"]
        c.close()
    finally:
        proc.stop()
    conn = sqlite3.connect(data)
    version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert version == (str(schema.SCHEMA_VERSION),)
    conn.close()


def test_an_active_spawned_job_is_dropped_by_recovery(tmp_path: Path) -> None:
    data = tmp_path / "q.db"
    proc = start(data)
    try:
        c = RawClient(proc.addr)
        c.ok({"cmd": "Cron", "name": "crash", "queue": "crash-q", "data": {}, "repeatEvery": 3_600_000,
               "immediately": True})
        c.ok({"cmd": "PUSH", "queue": "plain-q", "name": "plain", "data": {}})
        c.poll({"cmd": "GetJobCounts", "queue": "crash-q"}, lambda r: r["counts"]["waiting"] == 1)
        spawned = c.ok({"cmd": "PULL", "queue": "crash-q", "detach": True})["job"]["id"]
        plain = c.ok({"cmd": "PULL", "queue": "plain-q", "detach": True})["job"]["id"]
        # A durable push commits, and with it the pulls before it.
        c.ok({"cmd": "PUSH", "queue": "other", "name": "sync", "data": {}, "durable": True})
        c.close()
        proc = restart(proc, data, kill=True)
        c = RawClient(proc.addr)
        found = c.call({"cmd": "GetJob", "id": spawned}).get("job")
        assert found is None, (found["state"], found["attempts"], found["timeline"])
        # An ordinary job is charged the interrupted attempt and runs again.
        assert c.ok({"cmd": "GetJob", "id": plain})["job"]["attempts"] == 1
        assert c.ok({"cmd": "CronGet", "name": "crash"})["cron"]["executions"] == 1
        c.close()
    finally:
        proc.stop()
