"""Every state a job can be in survives a graceful restart of a SQLite server."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.server import ServerProcess


def start(data: Path) -> ServerProcess:
    return ServerProcess(env={"BUNQUEUE_DATA_PATH": str(data), "RATE_LIMIT_MAX_REQUESTS": "0"}).start()


def restart(proc: ServerProcess, data: Path, *, kill: bool = False) -> ServerProcess:
    if kill:
        assert proc.proc is not None
        os.kill(proc.proc.pid, signal.SIGKILL)
        proc.proc.wait()
    else:
        assert proc.stop() == 0
    return start(data)


def push(c: RawClient, queue: str, name: str, **opts: object) -> str:
    reply = c.call({"cmd": "PUSH", "queue": queue, "name": name, "data": {"n": name}, **opts})
    assert reply["ok"], reply
    return reply["id"]


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
def test_every_state_survives_a_restart(tmp_path: Path, kill: bool) -> None:
    data = tmp_path / "q.db"
    proc = start(data)
    try:
        c = RawClient(proc.addr)
        q = "persist"
        waiting = push(c, q, "waiting", durable=True)
        prioritized = push(c, q, "prio", priority=5, durable=True)
        delayed = push(c, q, "later", delay=3_600_000, durable=True)
        custom = push(c, q, "custom", jobId="order-1", durable=True)
        unique = push(c, q, "unique", uniqueKey="k1", durable=True)
        parent = push(c, "other", "parent", durable=True)
        child = push(c, q, "child", dependsOn=[parent], durable=True)
        done = push(c, "work", "done", durable=True)
        dead = push(c, "work", "dead", maxAttempts=1, durable=True)
        active = push(c, "work", "active", maxAttempts=5, durable=True)
        for job_id, result in ((done, {"r": 1}), (dead, None)):
            pulled = c.call({"cmd": "PULL", "queue": "work", "owner": "w"})
            assert pulled["job"]["id"] == job_id
            if result is not None:
                assert c.call({"cmd": "ACK", "id": job_id, "token": pulled["token"], "result": result})["ok"]
            else:
                assert c.call({"cmd": "FAIL", "id": job_id, "token": pulled["token"], "error": "boom"})["ok"]
        worker = RawClient(proc.addr)
        assert worker.call({"cmd": "PULL", "queue": "work", "detach": True})["job"]["id"] == active
        assert c.call({"cmd": "Pause", "queue": "paused-q"})["ok"]
        c.close()
        worker.close()

        proc = restart(proc, data, kill=kill)
        c = RawClient(proc.addr)
        states = {
            job_id: c.call({"cmd": "GetState", "id": job_id})["state"]
            for job_id in (waiting, prioritized, delayed, custom, unique, child, done, dead, active)
        }
        assert states == {
            waiting: "waiting", prioritized: "prioritized", delayed: "delayed", custom: "waiting",
            unique: "waiting", child: "waiting-children", done: "completed", dead: "failed",
            active: "delayed",
        }
        assert c.call({"cmd": "GetResult", "id": done})["result"] == {"r": 1}
        interrupted = c.call({"cmd": "GetJob", "id": active})["job"]
        assert interrupted["attempts"] == 1, "an attempt cut short by the restart is charged"
        dlq = c.call({"cmd": "Dlq", "queue": "work"})
        assert [e["job"]["id"] for e in dlq["entries"]] == [dead]
        assert dlq["entries"][0]["error"] == "boom"
        assert c.call({"cmd": "IsPaused", "queue": "paused-q"})["paused"] is True
        assert push(c, q, "again", jobId="order-1") == custom, "a live custom id is still a no-op"
        assert push(c, q, "dup", uniqueKey="k1") == unique, "a unique key still dedups"
        counts = c.call({"cmd": "GetJobCounts", "queue": "work"})["counts"]
        assert (counts["completed"], counts["failed"], counts["delayed"]) == (1, 1, 1)
        # The dependency still resolves after the restart.
        pulled = c.call({"cmd": "PULL", "queue": "other", "owner": "w"})
        assert c.call({"cmd": "ACK", "id": parent, "token": pulled["token"]})["ok"]
        assert c.call({"cmd": "GetState", "id": child})["state"] == "waiting"
        order = [c.call({"cmd": "PULL", "queue": q})["job"]["name"] for _ in range(5)]
        assert order == ["prio", "waiting", "custom", "unique", "child"]
        # Closing the client returns its jobs; a stop would otherwise wait for them to finish.
        c.close()
    finally:
        proc.stop()


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    import sqlite3

    data = tmp_path / "q.db"
    start(data).stop()
    with sqlite3.connect(data) as conn:
        conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    proc = ServerProcess(env={"BUNQUEUE_DATA_PATH": str(data)})
    with pytest.raises(RuntimeError, match="schema version 999"):
        proc.start()


def test_evicted_completed_jobs_are_read_from_disk(tmp_path: Path) -> None:
    data = tmp_path / "q.db"
    proc = ServerProcess(env={"BUNQUEUE_DATA_PATH": str(data), "MAX_COMPLETED_JOBS": "10"}).start()
    try:
        c = RawClient(proc.addr)
        ids = c.call({"cmd": "PUSHB", "queue": "ev", "jobs": [{"name": str(i)} for i in range(30)]})["ids"]
        pulled = c.call({"cmd": "PULLB", "queue": "ev", "count": 30})
        for i, job in enumerate(pulled["jobs"]):
            assert c.call({"cmd": "ACK", "id": job["id"], "result": i})["ok"]
        first = ids[0]
        assert c.call({"cmd": "GetState", "id": first})["state"] == "completed"
        assert c.call({"cmd": "GetResult", "id": first})["result"] == 0
        assert c.call({"cmd": "GetJobCounts", "queue": "ev"})["counts"]["completed"] == 30
    finally:
        proc.stop()


def test_a_graceful_stop_writes_every_buffered_push(tmp_path: Path) -> None:
    data = tmp_path / "q.db"
    proc = start(data)
    c = RawClient(proc.addr)
    batch = [{"name": "j", "data": {"i": i}} for i in range(1000)]
    for _ in range(40):
        c.send({"cmd": "PUSHB", "queue": "burst", "jobs": batch})
    replies = [c.recv() for _ in range(40)]
    assert all(r["ok"] for r in replies)
    c.close()
    assert proc.stop(timeout=60) == 0
    proc = start(data)
    try:
        c = RawClient(proc.addr)
        assert c.call({"cmd": "Count", "queue": "burst"})["count"] == 40_000
    finally:
        proc.stop()


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
def test_an_interrupted_attempt_keeps_its_start_and_timeline(tmp_path: Path, kill: bool) -> None:
    # As in the reference: the job comes back delayed, charged, with the start and the timeline of the
    # attempt the restart cut short, whether the pull named an owner or not, whatever was written after it.
    data = tmp_path / "q.db"
    env = {"BUNQUEUE_DATA_PATH": str(data), "RATE_LIMIT_MAX_REQUESTS": "0", "SHUTDOWN_TIMEOUT_MS": "200"}
    proc = ServerProcess(env=env).start()
    try:
        c = RawClient(proc.addr)
        plain, leased, progressed = (push(c, "cut", name) for name in ("plain", "leased", "progressed"))
        assert c.call({"cmd": "PULL", "queue": "cut"})["job"]["id"] == plain
        assert c.call({"cmd": "PULL", "queue": "cut", "owner": "w", "lockTtl": 60_000})["job"]["id"] == leased
        assert c.call({"cmd": "PULL", "queue": "cut"})["job"]["id"] == progressed
        assert c.call({"cmd": "Progress", "id": progressed, "progress": 40})["ok"]
        # A durable push's reply waits for its commit, and batches commit in order: the pulls are on disk.
        push(c, "other", "marker", durable=True)
        before = {job_id: c.call({"cmd": "GetJob", "id": job_id})["job"] for job_id in (plain, leased, progressed)}
        # The worker stays connected: a graceful stop waits SHUTDOWN_TIMEOUT_MS for its jobs.
        proc = restart(proc, data, kill=kill)
        c = RawClient(proc.addr)
        for job_id, was in before.items():
            job = c.call({"cmd": "GetJob", "id": job_id})["job"]
            assert [e["state"] for e in was["timeline"]] == ["waiting", "active"]
            assert job["timeline"] == was["timeline"], job_id
            assert job["startedAt"] == was["startedAt"] == was["timeline"][1]["timestamp"], job_id
            assert (job["attempts"], job["stallCount"]) == (1, 1), job_id
            assert c.call({"cmd": "GetState", "id": job_id})["state"] == "delayed"
        c.close()
    finally:
        proc.stop()
