"""SubscribeEvents: unsolicited event frames for one queue per connection."""
from __future__ import annotations

import asyncio
from typing import Any

from bunqueue._testbase.server import ServerProcess
from bunqueue.client import Connection, connect


async def next_events(conn: Connection, n: int) -> list[dict[str, Any]]:
    return [(await asyncio.wait_for(conn.events.get(), 3))["event"] for _ in range(n)]


async def test_job_lifecycle_events(conn: Connection, conn2: Connection, queue_name: str) -> None:
    assert (await conn.request({"cmd": "SubscribeEvents", "queue": queue_name}))["ok"]
    job_id = (await conn2.request({"cmd": "PUSH", "queue": queue_name, "name": "e", "data": {"n": 1}}))["id"]
    await conn2.request({"cmd": "PUSH", "queue": f"{queue_name}-other", "name": "x", "data": 1})
    await conn2.request({"cmd": "PULL", "queue": queue_name})
    await conn2.request({"cmd": "Progress", "id": job_id, "progress": 30, "message": "third"})
    await conn2.request({"cmd": "ACK", "id": job_id, "result": {"done": True}})
    got = await next_events(conn, 4)
    assert [e["eventType"] for e in got] == ["pushed", "pulled", "progress", "completed"]
    assert all(e["jobId"] == job_id and e["queue"] == queue_name for e in got)
    assert all(isinstance(e["timestamp"], float) for e in got)
    assert got[2]["progress"] == 30 and got[2]["data"] == {"progress": 30, "message": "third"}
    assert got[3]["data"] == {"done": True}
    await asyncio.sleep(0.2)
    assert conn.events.empty(), "another queue's jobs send nothing"


async def test_failures_retries_and_removal(conn: Connection, conn2: Connection, queue_name: str) -> None:
    await conn.request({"cmd": "SubscribeEvents", "queue": queue_name})
    job_id = (await conn2.request({"cmd": "PUSH", "queue": queue_name, "name": "f", "data": 7,
                                   "maxAttempts": 2, "backoff": 0}))["id"]
    await conn2.request({"cmd": "PULL", "queue": queue_name})
    await conn2.request({"cmd": "FAIL", "id": job_id, "error": "e1"})
    await conn2.request({"cmd": "PULL", "queue": queue_name})
    await conn2.request({"cmd": "FAIL", "id": job_id, "error": "e2"})
    other = (await conn2.request({"cmd": "PUSH", "queue": queue_name, "name": "c", "data": 1}))["id"]
    await conn2.request({"cmd": "Cancel", "id": other})
    got = await next_events(conn, 8)
    assert [e["eventType"] for e in got] == [
        "pushed", "pulled", "failed", "retried", "pulled", "failed", "pushed", "removed"]
    assert (got[2]["error"], got[2]["terminal"], got[2]["data"]) == ("e1", False, 7)
    assert got[3]["prev"] == "failed"
    assert (got[5]["error"], got[5]["terminal"]) == ("e2", True)
    assert (got[7]["jobId"], got[7]["prev"]) == (other, "waiting")


async def test_pause_resume_and_unsubscribe(conn: Connection, conn2: Connection, queue_name: str) -> None:
    await conn.request({"cmd": "SubscribeEvents", "queue": queue_name})
    await conn2.request({"cmd": "Pause", "queue": queue_name})
    await conn2.request({"cmd": "Resume", "queue": queue_name})
    got = await next_events(conn, 2)
    assert [(e["eventType"], e["jobId"]) for e in got] == [("paused", ""), ("resumed", "")]
    assert (await conn.request({"cmd": "UnsubscribeEvents"}))["ok"]
    await conn2.request({"cmd": "PUSH", "queue": queue_name, "name": "quiet", "data": 1})
    await asyncio.sleep(0.2)
    assert conn.events.empty()


async def test_a_new_subscription_replaces_the_old(conn: Connection, conn2: Connection, queue_name: str) -> None:
    await conn.request({"cmd": "SubscribeEvents", "queue": f"{queue_name}-a"})
    await conn.request({"cmd": "SubscribeEvents", "queue": f"{queue_name}-b"})
    await conn2.request({"cmd": "PUSH", "queue": f"{queue_name}-a", "name": "a", "data": 1})
    job_b = (await conn2.request({"cmd": "PUSH", "queue": f"{queue_name}-b", "name": "b", "data": 1}))["id"]
    got = await next_events(conn, 1)
    assert got[0]["jobId"] == job_b
    await asyncio.sleep(0.2)
    assert conn.events.empty()


async def test_subscription_validation_and_close(server: ServerProcess, conn: Connection) -> None:
    assert (await conn.request({"cmd": "SubscribeEvents", "queue": "bad queue"}))["error"] == (
        "Queue name contains invalid characters")
    assert (await conn.request({"cmd": "SubscribeEvents"}))["error"] == "Queue name is required"
    listener = await connect(*server.addr)
    await listener.request({"cmd": "SubscribeEvents", "queue": "closing-q"})
    await listener.close()
    # Events for a closed subscriber go nowhere, and the pusher never notices.
    assert (await conn.request({"cmd": "PUSH", "queue": "closing-q", "name": "x", "data": 1}))["ok"]


async def test_an_expired_lease_is_a_stalled_event(conn: Connection, conn2: Connection, queue_name: str) -> None:
    await conn.request({"cmd": "SubscribeEvents", "queue": queue_name})
    job_id = (await conn2.request({"cmd": "PUSH", "queue": queue_name, "name": "s", "data": 1}))["id"]
    await conn2.request({"cmd": "PULL", "queue": queue_name, "owner": "w", "lockTtl": 50})
    got = await next_events(conn, 3)
    assert [e["eventType"] for e in got] == ["pushed", "pulled", "stalled"]
    assert got[2]["jobId"] == job_id and got[2]["data"] == {"stallCount": 1, "action": "retry"}


async def test_delayed_and_duplicated(conn: Connection, conn2: Connection, queue_name: str) -> None:
    await conn.request({"cmd": "SubscribeEvents", "queue": queue_name})
    owner = (await conn2.request({"cmd": "PUSH", "queue": queue_name, "name": "u", "data": 1, "uniqueKey": "k"}))["id"]
    again = await conn2.request({"cmd": "PUSH", "queue": queue_name, "name": "u", "data": 2, "uniqueKey": "k"})
    assert again["id"] == owner
    await conn2.request({"cmd": "PULL", "queue": queue_name})
    moved = await conn2.request({"cmd": "MoveToDelayed", "id": owner, "delay": 5000})
    assert moved["ok"], moved
    got = await next_events(conn, 4)
    assert [e["eventType"] for e in got] == ["pushed", "duplicated", "pulled", "delayed"]
    assert all(e["jobId"] == owner for e in got)
    assert got[3]["delay"] == 5000
    state = await conn2.request({"cmd": "GetState", "id": owner})
    assert state["state"] == "delayed"
