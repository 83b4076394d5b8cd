"""ExtendLock, ExtendLocks, JobHeartbeat and JobHeartbeatB over a real socket, and how leases interact
with tokens that changed and connections that closed."""
from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bunqueue._testbase.frames import call
from bunqueue._testbase.server import ServerProcess
from bunqueue.client import Connection, connect

LOCK_NOT_FOUND = "Lock not found or invalid token"
NOT_ACTIVE = "Job not found or not active (or invalid token)"


async def push(conn: Connection, queue: str, name: str = "j", **opts: Any) -> str:
    reply = await conn.request({"cmd": "PUSH", "queue": queue, "name": name, "data": {}, **opts})
    assert reply["ok"], reply
    return reply["id"]


async def pull_owned(conn: Connection, queue: str, lock_ttl: float = 30000) -> tuple[str, str]:
    reply = await conn.request({"cmd": "PULL", "queue": queue, "owner": "w", "lockTtl": lock_ttl})
    return reply["job"]["id"], reply["token"]


async def state(conn: Connection, job_id: str) -> str:
    return (await conn.request({"cmd": "GetState", "id": job_id}))["state"]


async def wait_state(conn: Connection, job_id: str, wanted: str, seconds: float = 3.0) -> None:
    for _ in range(int(seconds / 0.02)):
        if await state(conn, job_id) == wanted:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{job_id} never became {wanted}: {await state(conn, job_id)}")


async def test_extend_lock_with_right_wrong_and_no_token(conn: Connection, queue_name: str) -> None:
    await push(conn, queue_name)
    job_id, token = await pull_owned(conn, queue_name)
    assert await call(conn, {"cmd": "ExtendLock", "id": job_id, "duration": 60000, "token": token}) == {
        "ok": True
    }
    wrong = await call(conn, {"cmd": "ExtendLock", "id": job_id, "duration": 60000, "token": "wrong"})
    assert wrong == {"ok": False, "error": LOCK_NOT_FOUND}
    # An omitted token renews the current lease, as in the reference.
    assert (await conn.request({"cmd": "ExtendLock", "id": job_id, "duration": 60000}))["ok"]
    for bad_id in ("nope", None, 5):
        reply = await conn.request({"cmd": "ExtendLock", "id": bad_id, "duration": 1000, "token": token})
        assert reply["error"] == LOCK_NOT_FOUND


async def test_extend_lock_needs_a_lease(conn: Connection, queue_name: str) -> None:
    await push(conn, queue_name)
    job_id = (await conn.request({"cmd": "PULL", "queue": queue_name}))["job"]["id"]
    assert (await conn.request({"cmd": "ExtendLock", "id": job_id, "duration": 1000}))[
        "error"
    ] == LOCK_NOT_FOUND


@pytest.mark.parametrize(
    ("duration", "error"),
    [
        (float("nan"), "duration must be a finite number"),
        (float("inf"), "duration must be a finite number"),
        ("soon", "duration must be a number"),
        # A numeric string is not a number for ExtendLock (job-commands page), unlike a ChangeDelay delay.
        ("30000", "duration must be a number"),
        ([1], "duration must be a number"),
    ],
)
async def test_extend_lock_rejects_bad_durations_and_keeps_the_lease(
    conn: Connection, queue_name: str, duration: Any, error: str
) -> None:
    await push(conn, queue_name)
    job_id, token = await pull_owned(conn, queue_name)
    reply = await call(conn, {"cmd": "ExtendLock", "id": job_id, "token": token, "duration": duration})
    assert reply == {"ok": False, "error": error}
    assert (await conn.request({"cmd": "ACK", "id": job_id, "token": token}))["ok"]


async def test_extend_lock_accepts_integers_fractions_and_omission(
    conn: Connection, queue_name: str
) -> None:
    await push(conn, queue_name)
    job_id, token = await pull_owned(conn, queue_name)
    for duration in (45000, 45000.5, None):
        cmd = {"cmd": "ExtendLock", "id": job_id, "token": token}
        if duration is not None:
            cmd["duration"] = duration
        assert (await conn.request(cmd))["ok"]
    job = (await conn.request({"cmd": "GetJob", "id": job_id}))["job"]
    assert job["state"] == "active"


async def test_zero_duration_ends_the_lease_now(conn: Connection, queue_name: str) -> None:
    await push(conn, queue_name)
    job_id, token = await pull_owned(conn, queue_name, lock_ttl=60000)
    assert (await conn.request({"cmd": "ExtendLock", "id": job_id, "token": token, "duration": 0}))["ok"]
    await wait_state(conn, job_id, "waiting")
    job = (await conn.request({"cmd": "GetJob", "id": job_id}))["job"]
    assert (job["attempts"], job["stallCount"], job["startedAt"]) == (1, 1, None)


async def test_a_lease_extended_past_its_ttl_outlives_it(conn: Connection, queue_name: str) -> None:
    await push(conn, queue_name)
    job_id, token = await pull_owned(conn, queue_name, lock_ttl=200)
    assert (await conn.request({"cmd": "ExtendLock", "id": job_id, "token": token, "duration": 30000}))["ok"]
    await asyncio.sleep(0.4)
    assert await state(conn, job_id) == "active"
    assert (await conn.request({"cmd": "ACK", "id": job_id, "token": token}))["ok"]


async def test_extend_locks_counts_and_validates_everything_first(conn: Connection, queue_name: str) -> None:
    a = await push(conn, queue_name, "a")
    b = await push(conn, queue_name, "b")
    pulled = await conn.request(
        {"cmd": "PULLB", "queue": queue_name, "count": 2, "owner": "o", "lockTtl": 5000}
    )
    ta, tb = pulled["tokens"]
    base = {"cmd": "ExtendLocks", "ids": [a, b], "tokens": [ta, tb]}
    assert await call(conn, {**base, "durations": [30000, 30000]}) == {"ok": True, "count": 2}
    assert (await conn.request({**base, "tokens": [ta, "bad"], "durations": [30000, 30000]}))["count"] == 1
    # One bad duration fails the command before any lease moves: the 100 ms would otherwise expire a's lease.
    bad = await call(conn, {**base, "durations": [100, float("nan")]})
    assert bad == {"ok": False, "error": "durations[1]: duration must be a finite number"}
    bad = await call(conn, {**base, "durations": [100, "30000"]})
    assert bad == {"ok": False, "error": "durations[1]: duration must be a number"}
    await asyncio.sleep(0.3)
    assert await state(conn, a) == "active"
    # Missing positions keep the current ttl; an empty call extends nothing.
    assert (await conn.request({"cmd": "ExtendLocks", "ids": [a, b], "tokens": [ta], "durations": []}))[
        "count"
    ] == 2
    assert await call(conn, {"cmd": "ExtendLocks", "ids": [], "tokens": [], "durations": []}) == {
        "ok": True,
        "count": 0,
    }
    for missing in ("ids", "tokens", "durations"):
        cmd = {"cmd": "ExtendLocks", "ids": [a], "tokens": [ta], "durations": [1000]}
        del cmd[missing]
        assert (await conn.request(cmd))["error"] == f"{missing} must be an array"
    assert (await conn.request({"cmd": "ACKB", "ids": [a, b], "tokens": [ta, tb]}))["ok"]


async def test_job_heartbeat(conn: Connection, queue_name: str) -> None:
    a = await push(conn, queue_name, "a")
    b = await push(conn, queue_name, "b")
    assert await call(conn, {"cmd": "JobHeartbeat", "id": a}) == {"ok": False, "error": NOT_ACTIVE}
    pulled = await conn.request({"cmd": "PULLB", "queue": queue_name, "count": 2, "owner": "o"})
    ta, tb = pulled["tokens"]
    assert await call(conn, {"cmd": "JobHeartbeat", "id": a, "token": ta}) == {
        "ok": True,
        "data": {"ok": True},
    }
    assert (await conn.request({"cmd": "JobHeartbeat", "id": a, "token": "bad"}))["error"] == NOT_ACTIVE
    assert (await conn.request({"cmd": "JobHeartbeat", "id": a, "token": ta, "duration": 5000}))["ok"]
    assert (await conn.request({"cmd": "JobHeartbeat", "id": a, "token": "bad", "duration": 5000}))[
        "ok"
    ] is False
    # Without a token a heartbeat only says the job is alive.
    assert (await conn.request({"cmd": "JobHeartbeat", "id": a}))["ok"]
    assert (await conn.request({"cmd": "JobHeartbeat", "id": a, "duration": "x"}))["error"] == (
        "duration must be a number"
    )
    before = (await conn.request({"cmd": "GetJob", "id": a}))["job"]["lastHeartbeat"]
    await asyncio.sleep(0.01)
    await conn.request({"cmd": "JobHeartbeat", "id": a, "token": ta})
    assert (await conn.request({"cmd": "GetJob", "id": a}))["job"]["lastHeartbeat"] > before
    batch = await call(conn, {"cmd": "JobHeartbeatB", "ids": [a, b], "tokens": [ta, tb]})
    assert batch == {"ok": True, "data": {"ok": True, "count": 2}}
    assert (await conn.request({"cmd": "JobHeartbeatB", "ids": [a, "nope"], "tokens": [ta, "x"]}))["data"][
        "count"
    ] == 1
    assert (await conn.request({"cmd": "JobHeartbeatB", "ids": [a, b]}))["data"]["count"] == 2
    assert (await conn.request({"cmd": "JobHeartbeatB", "ids": []}))["data"] == {"ok": True, "count": 0}
    assert (await conn.request({"cmd": "JobHeartbeatB"}))["error"] == "ids must be an array"
    assert (await conn.request({"cmd": "JobHeartbeat", "id": "nope"}))["error"] == NOT_ACTIVE


async def test_a_token_that_changed_is_refused_everywhere(conn: Connection, queue_name: str) -> None:
    job_id = await push(conn, queue_name)
    old_id, old = await pull_owned(conn, queue_name, lock_ttl=100)
    again = await conn.request({"cmd": "PULL", "queue": queue_name, "owner": "w2", "timeout": 3000})
    new = again["token"]
    assert again["job"]["id"] == old_id == job_id and new != old
    assert (await conn.request({"cmd": "ExtendLock", "id": job_id, "token": old, "duration": 1000}))[
        "error"
    ] == (LOCK_NOT_FOUND)
    assert (await conn.request({"cmd": "JobHeartbeat", "id": job_id, "token": old}))["error"] == NOT_ACTIVE
    assert (await conn.request({"cmd": "ACK", "id": job_id, "token": old}))["error"] == (
        f"Invalid or expired lock token for job {job_id}"
    )
    assert (await conn.request({"cmd": "FAIL", "id": job_id, "token": old}))["error"] == (
        f"Invalid or expired lock token for job {job_id}"
    )
    assert (await conn.request({"cmd": "ACK", "id": job_id, "token": new}))["ok"]


async def test_renewed_lease_survives_the_connection_closing(
    server: ServerProcess, conn: Connection, queue_name: str
) -> None:
    renewed = await push(conn, queue_name, "renewed")
    plain = await push(conn, queue_name, "plain")
    worker = await connect(*server.addr)
    pulled = await worker.request({"cmd": "PULLB", "queue": queue_name, "count": 2, "owner": "w"})
    tokens = dict(zip([j["id"] for j in pulled["jobs"]], pulled["tokens"]))
    # The heartbeat comes from another connection, as a pooled client sends it.
    assert (await conn.request({"cmd": "JobHeartbeat", "id": renewed, "token": tokens[renewed]}))["ok"]
    await worker.close()
    await wait_state(conn, plain, "waiting")
    assert await state(conn, renewed) == "active"
    assert (await conn.request({"cmd": "ACK", "id": renewed, "token": tokens[renewed]}))["ok"]
