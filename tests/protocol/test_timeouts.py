"""Job ``timeout`` and the outcomes that arrive after the attempt they settle was finalized or requeued."""
from __future__ import annotations

import asyncio
import time
from typing import Any

from bunqueue._testbase.frames import call
from bunqueue.client import Connection

FINALIZED = {"ok": True, "data": {"applied": False, "reason": "already-finalized"}}


async def push(conn: Connection, queue: str, name: str = "j", **opts: Any) -> str:
    reply = await conn.request({"cmd": "PUSH", "queue": queue, "name": name, "data": {}, **opts})
    assert reply["ok"], reply
    return reply["id"]


async def job_of(conn: Connection, job_id: str) -> dict[str, Any]:
    return (await conn.request({"cmd": "GetJob", "id": job_id}))["job"]


async def wait_until_not_active(conn: Connection, job_id: str, seconds: float = 3.0) -> dict[str, Any]:
    for _ in range(int(seconds / 0.01)):
        job = await job_of(conn, job_id)
        if job["state"] != "active":
            return job
        await asyncio.sleep(0.01)
    raise AssertionError(f"{job_id} stayed active")


async def test_timeout_fails_the_attempt_on_time_and_retries(conn: Connection, queue_name: str) -> None:
    job_id = await push(conn, queue_name, timeout=200, backoff=100000)
    pulled = await conn.request({"cmd": "PULL", "queue": queue_name})
    started = time.monotonic()
    job = await wait_until_not_active(conn, job_id)
    elapsed = time.monotonic() - started
    assert 0.15 < elapsed < 0.6, elapsed
    assert (job["state"], job["attempts"], job["startedAt"]) == ("delayed", 1, None)
    assert job["failedReason"] == "Job timeout exceeded"
    assert job["runAt"] > pulled["job"]["startedAt"] + 100000
    assert [e["state"] for e in job["timeline"]] == ["waiting", "active", "failed", "waiting"]


async def test_timeout_on_the_last_attempt_dead_letters_with_reason_timeout(conn: Connection,
                                                                             queue_name: str) -> None:
    job_id = await push(conn, queue_name, timeout=100, maxAttempts=1)
    await conn.request({"cmd": "PULL", "queue": queue_name})
    job = await wait_until_not_active(conn, job_id)
    assert job["state"] == "failed"
    entry = (await conn.request({"cmd": "Dlq", "queue": queue_name}))["entries"][0]
    assert (entry["reason"], entry["error"]) == ("timeout", "Job timeout exceeded")
    # Without a lease, the late outcome is recognised by the job's last timed-out attempt.
    assert await call(conn, {"cmd": "ACK", "id": job_id}) == FINALIZED
    assert await call(conn, {"cmd": "FAIL", "id": job_id}) == FINALIZED


async def test_ack_in_flight_when_the_timeout_won(conn: Connection, queue_name: str) -> None:
    job_id = await push(conn, queue_name, timeout=100, backoff=0)
    token = (await conn.request({"cmd": "PULL", "queue": queue_name, "owner": "w"}))["token"]
    await wait_until_not_active(conn, job_id)
    assert await call(conn, {"cmd": "ACK", "id": job_id, "token": token, "result": 1}) == FINALIZED
    assert await call(conn, {"cmd": "FAIL", "id": job_id, "token": token}) == FINALIZED
    # The next attempt runs under a new token; the old one still only finalizes nothing.
    again = await conn.request({"cmd": "PULL", "queue": queue_name, "owner": "w2", "timeout": 2000})
    assert again["job"]["id"] == job_id
    assert await call(conn, {"cmd": "ACK", "id": job_id, "token": token}) == FINALIZED
    assert await call(conn, {"cmd": "ACK", "id": job_id, "token": again["token"]}) == {"ok": True}
    assert (await job_of(conn, job_id))["state"] == "completed"
    assert "result" not in await conn.request({"cmd": "GetResult", "id": job_id})


async def test_ackb_reports_positions_lost_to_a_timeout(conn: Connection, queue_name: str) -> None:
    slow = await push(conn, queue_name, "slow", timeout=100, backoff=100000)
    fast = await push(conn, queue_name, "fast")
    pulled = await conn.request({"cmd": "PULLB", "queue": queue_name, "count": 2, "owner": "w"})
    ts, tf = pulled["tokens"]
    await wait_until_not_active(conn, slow)
    reply = await call(conn, {"cmd": "ACKB", "ids": [slow, fast, slow], "tokens": [ts, tf, ts],
                              "results": ["a", "b", "c"]})
    assert reply == {"ok": True, "data": {"ignoredIndices": [0, 2], "ignoredIds": [slow, slow]}}
    assert (await conn.request({"cmd": "GetResult", "id": fast}))["result"] == "b"
    # Ordinary missing or completed jobs remain errors.
    again = await call(conn, {"cmd": "ACKB", "ids": [slow, fast], "tokens": [ts, tf]})
    assert again == {"ok": False, "error": f"Job not found or not in processing state: {fast}"}


async def test_ack_without_token_completes_a_job_requeued_by_its_timeout(conn: Connection,
                                                                         queue_name: str) -> None:
    job_id = await push(conn, queue_name, timeout=100, backoff=100000)
    await conn.request({"cmd": "PULL", "queue": queue_name})
    await wait_until_not_active(conn, job_id)
    failed = await call(conn, {"cmd": "FAIL", "id": job_id})
    assert failed == {"ok": False, "error": f"Job not found or not in processing state: {job_id}"}
    assert await call(conn, {"cmd": "ACK", "id": job_id, "result": "late"}) == {"ok": True}
    job = await job_of(conn, job_id)
    assert (job["state"], job["returnvalue"]) == ("completed", "late")
    counts = (await conn.request({"cmd": "GetJobCounts", "queue": queue_name}))["counts"]
    assert (counts["delayed"], counts["completed"]) == (0, 1)


async def test_ack_after_fail_completes_the_requeued_job(conn: Connection, queue_name: str) -> None:
    job_id = await push(conn, queue_name, backoff=100000)
    await conn.request({"cmd": "PULL", "queue": queue_name})
    assert (await conn.request({"cmd": "FAIL", "id": job_id, "error": "x"}))["ok"]
    assert (await job_of(conn, job_id))["startedAt"] is None
    assert (await conn.request({"cmd": "ACK", "id": job_id, "result": 5}))["ok"]
    assert (await conn.request({"cmd": "GetResult", "id": job_id}))["result"] == 5
    # A job never attempted is not in processing: no late outcome applies.
    fresh = await push(conn, queue_name, "fresh")
    assert (await conn.request({"cmd": "ACK", "id": fresh}))["error"] == (
        f"Job not found or not in processing state: {fresh}")


async def test_late_outcomes_after_a_lost_lease(conn: Connection, queue_name: str) -> None:
    job_id = await push(conn, queue_name)
    token = (await conn.request({"cmd": "PULL", "queue": queue_name, "owner": "w", "lockTtl": 50}))["token"]
    job = await wait_until_not_active(conn, job_id)
    assert (job["state"], job["attempts"], job["stallCount"]) == ("waiting", 1, 1)
    # The retry already counted the failure; the work itself may still be reported done.
    assert await call(conn, {"cmd": "FAIL", "id": job_id, "token": token}) == FINALIZED
    assert await call(conn, {"cmd": "ACK", "id": job_id, "token": token}) == {"ok": True}
    assert (await job_of(conn, job_id))["state"] == "completed"


async def test_timeout_with_zero_or_none_never_fires(conn: Connection, queue_name: str) -> None:
    job_id = await push(conn, queue_name, timeout=0)
    await conn.request({"cmd": "PULL", "queue": queue_name})
    await asyncio.sleep(0.1)
    assert (await job_of(conn, job_id))["state"] == "active"
    assert (await conn.request({"cmd": "ACK", "id": job_id}))["ok"]


async def test_a_reused_custom_id_forgets_the_old_timeout(conn: Connection, queue_name: str) -> None:
    custom = f"{queue_name}-cid"
    await push(conn, queue_name, jobId=custom, timeout=50, maxAttempts=1)
    await conn.request({"cmd": "PULL", "queue": queue_name})
    await wait_until_not_active(conn, custom)
    assert await push(conn, queue_name, "again", jobId=custom) == custom
    await conn.request({"cmd": "PULL", "queue": queue_name})
    assert await call(conn, {"cmd": "ACK", "id": custom}) == {"ok": True}
