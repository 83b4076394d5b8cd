"""Completed-job retention by age: a completed job goes within a second or two of reaching its age, from
memory and from the SQLite file, and not before; a restart keeps to the same ages."""
from __future__ import annotations

import time
from pathlib import Path

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.server import ServerProcess

AGE_MS = 2500
# How late past its age a job may still be there: the deadline timer fires at the age itself.
SLACK_S = 1.5


def complete(c: RawClient, queue: str, result: object) -> str:
    job_id = c.call({"cmd": "PUSH", "queue": queue, "name": "n", "data": {"x": 1}, "durable": True})["id"]
    pulled = c.call({"cmd": "PULL", "queue": queue})
    assert pulled["job"]["id"] == job_id
    assert c.call({"cmd": "ACK", "id": job_id, "token": pulled.get("token"), "result": result})["ok"]
    return job_id


def gone(c: RawClient, job_id: str) -> bool:
    """Whether the job is answered as an id the server never had."""
    job = c.call({"cmd": "GetJob", "id": job_id})
    if job["ok"]:
        return False
    assert job == {"ok": False, "error": "Job not found"}
    assert c.call({"cmd": "GetResult", "id": job_id}) == {"ok": True, "id": job_id}
    assert c.call({"cmd": "GetState", "id": job_id}) == {"ok": True, "id": job_id, "state": "unknown"}
    return True


def wait_gone(c: RawClient, job_ids: list[str], deadline: float) -> float:
    while not all(gone(c, job_id) for job_id in job_ids):
        assert time.monotonic() < deadline, "a completed job outlived its retention"
        time.sleep(0.05)
    return time.monotonic()


def completed_count(c: RawClient, queue: str) -> int:
    reply = c.call({"cmd": "GetJobCounts", "queue": queue})
    count: int = reply["counts"]["completed"]
    return count


def test_memory_job_goes_at_its_age_not_before() -> None:
    proc = ServerProcess(env={"BUNQUEUE_COMPLETED_RETENTION_MS": str(AGE_MS)}).start()
    try:
        c = RawClient(proc.addr)
        done_at = time.monotonic()
        job_id = complete(c, "ret-mem", {"r": 1})
        kept = c.call({"cmd": "GetJob", "id": job_id})
        assert kept["ok"] and kept["job"]["id"] == job_id
        assert c.call({"cmd": "GetState", "id": job_id})["state"] == "completed"
        assert c.call({"cmd": "GetResult", "id": job_id})["result"] == {"r": 1}
        # Still there shortly before its age.
        time.sleep(max(0.0, done_at + AGE_MS / 1000 - 0.6 - time.monotonic()))
        assert not gone(c, job_id)
        left_at = wait_gone(c, [job_id], done_at + AGE_MS / 1000 + SLACK_S)
        assert left_at >= done_at + AGE_MS / 1000 - 0.6
        assert completed_count(c, "ret-mem") == 0
        c.close()
    finally:
        proc.stop()


def test_without_retention_completed_jobs_stay() -> None:
    proc = ServerProcess().start()
    try:
        c = RawClient(proc.addr)
        job_id = complete(c, "ret-none", {"r": 2})
        time.sleep(1.0)
        assert c.call({"cmd": "GetState", "id": job_id})["state"] == "completed"
        c.close()
    finally:
        proc.stop()


def test_sqlite_rows_go_too_and_a_restart_keeps_the_ages(tmp_path: Path) -> None:
    data = tmp_path / "q.db"
    # One completed job kept in memory: the others live only in the file until their age.
    env = {"BUNQUEUE_DATA_PATH": str(data), "BUNQUEUE_MAX_COMPLETED_JOBS": "1"}
    args = ["--completed-retention-ms", str(AGE_MS)]
    proc = ServerProcess(env=env, args=args).start()
    done_at = time.monotonic()
    try:
        c = RawClient(proc.addr)
        ids = [complete(c, "ret-disk", {"n": n}) for n in range(4)]
        assert completed_count(c, "ret-disk") == 4
        assert proc.stop() == 0
        proc = ServerProcess(env=env, args=args).start()
        c = RawClient(proc.addr)
        # Read back before their age, in memory or from the file.
        assert [c.call({"cmd": "GetState", "id": i})["state"] for i in ids] == ["completed"] * 4
        assert c.call({"cmd": "GetResult", "id": ids[0]})["result"] == {"n": 0}
        assert completed_count(c, "ret-disk") == 4
        wait_gone(c, ids, done_at + AGE_MS / 1000 + SLACK_S + 1.0)
        assert completed_count(c, "ret-disk") == 0
        assert proc.stop() == 0
        proc = ServerProcess(env=env, args=args).start()
        c = RawClient(proc.addr)
        assert all(gone(c, i) for i in ids)
        assert completed_count(c, "ret-disk") == 0
        c.close()
    finally:
        proc.stop()


def test_a_restart_after_the_age_removes_at_start(tmp_path: Path) -> None:
    data = tmp_path / "q.db"
    env = {"BUNQUEUE_DATA_PATH": str(data)}
    proc = ServerProcess(env=env).start()
    try:
        c = RawClient(proc.addr)
        job_id = complete(c, "ret-late", None)
        assert proc.stop() == 0
        time.sleep(1.2)
        # Retention turned on later: a job already older than the age goes at once.
        proc = ServerProcess(env={**env, "COMPLETED_RETENTION_MS": "1000"}).start()
        c = RawClient(proc.addr)
        wait_gone(c, [job_id], time.monotonic() + SLACK_S)
        assert completed_count(c, "ret-late") == 0
        c.close()
    finally:
        proc.stop()


def test_a_negative_retention_is_refused() -> None:
    proc = ServerProcess(args=["--completed-retention-ms", "-5"])
    try:
        proc.start(timeout=20)
    except RuntimeError as exc:
        assert "--completed-retention-ms must be at least 0" in str(exc)
    else:
        raise AssertionError("a negative retention started a server")
    finally:
        proc.stop()
