"""Unique keys (uniqueKey with dedup ttl/extend/replace), the deduplication introspection commands and
custom job ids."""
from __future__ import annotations

import asyncio
from typing import Any

from bunqueue.client import Connection


async def push(conn: Connection, queue: str, name: str, **opts: Any) -> dict[str, Any]:
    reply = await conn.request({"cmd": "PUSH", "queue": queue, "name": name, "data": {"n": name}, **opts})
    reply.pop("reqId", None)
    return reply


async def owner(conn: Connection, queue: str, key: str) -> str | None:
    reply = await conn.request({"cmd": "GetDeduplicationJobId", "queue": queue, "deduplicationId": key})
    return reply["data"]["jobId"]


async def count(conn: Connection, queue: str) -> int:
    return (await conn.request({"cmd": "Count", "queue": queue}))["count"]


async def test_introspection_commands(conn: Connection, queue_name: str) -> None:
    a = (await push(conn, queue_name, "a", uniqueKey="K1"))["id"]
    assert await owner(conn, queue_name, "K1") == a
    assert await owner(conn, queue_name, "K2") is None
    assert await owner(conn, f"{queue_name}-other", "K1") is None
    remove = {"cmd": "RemoveDeduplicationKey", "queue": queue_name, "deduplicationId": "K1"}
    assert (await conn.request(remove))["data"] == {"count": 1}
    assert (await conn.request(remove))["data"] == {"count": 0}
    b = (await push(conn, queue_name, "b", uniqueKey="K1"))["id"]
    assert b != a
    # The job-owned form only releases a key its job still owns.
    assert (await conn.request({"cmd": "RemoveJobDeduplicationKey", "id": a}))["data"] == {"removed": False}
    assert (await conn.request({"cmd": "RemoveJobDeduplicationKey", "id": b}))["data"] == {"removed": True}
    assert (await conn.request({"cmd": "RemoveJobDeduplicationKey", "id": b}))["data"] == {"removed": False}
    assert (await conn.request({"cmd": "RemoveJobDeduplicationKey", "id": "nope"}))["data"] == {
        "removed": False
    }
    assert (await push(conn, queue_name, "c", uniqueKey="K1"))["id"] not in (a, b)
    assert await count(conn, queue_name) == 3


async def test_introspection_validates_the_queue(conn: Connection) -> None:
    for cmd in ("GetDeduplicationJobId", "RemoveDeduplicationKey"):
        assert (await conn.request({"cmd": cmd, "deduplicationId": "k"}))["error"] == "Queue name is required"
    assert (await conn.request({"cmd": "GetDeduplicationJobId", "queue": "q", "deduplicationId": 5}))[
        "data"
    ] == {"jobId": None}


async def test_key_is_released_whenever_the_owner_leaves_active(conn: Connection, queue_name: str) -> None:
    a = (await push(conn, queue_name, "a", uniqueKey="k", backoff=100000))["id"]
    await conn.request({"cmd": "PULL", "queue": queue_name})
    assert (await push(conn, queue_name, "dup", uniqueKey="k"))["id"] == a, "an active owner keeps its key"
    await conn.request({"cmd": "FAIL", "id": a, "error": "x"})
    # As in the reference, a retried owner no longer holds the key.
    assert await owner(conn, queue_name, "k") is None
    assert (await push(conn, queue_name, "b", uniqueKey="k"))["id"] != a


async def test_key_ttl_expires(conn: Connection, queue_name: str) -> None:
    a = (await push(conn, queue_name, "a", uniqueKey="t", dedup={"ttl": 150}))["id"]
    assert (await push(conn, queue_name, "b", uniqueKey="t"))["id"] == a
    await asyncio.sleep(0.2)
    assert await owner(conn, queue_name, "t") is None
    assert (await push(conn, queue_name, "c", uniqueKey="t"))["id"] != a
    assert await count(conn, queue_name) == 2


async def test_extend(conn: Connection, queue_name: str) -> None:
    a = (await push(conn, queue_name, "a", uniqueKey="e", dedup={"ttl": 100}))["id"]
    extended = await push(conn, queue_name, "b", uniqueKey="e", dedup={"ttl": 60000, "extend": True})
    assert extended["id"] == a
    await asyncio.sleep(0.15)
    assert await owner(conn, queue_name, "e") == a, "the ttl was extended"
    await conn.request({"cmd": "PULL", "queue": queue_name})
    late = await push(conn, queue_name, "c", uniqueKey="e", dedup={"ttl": 60000, "extend": True})
    assert late == {"ok": False, "error": "Duplicate unique_key (extended TTL)"}
    assert (await push(conn, queue_name, "d", uniqueKey="e"))["id"] == a
    await conn.request({"cmd": "ACK", "id": a})
    assert (await push(conn, queue_name, "e", uniqueKey="e", dedup={"ttl": 1000, "extend": True}))["id"] != a


async def test_replace_a_pending_owner(conn: Connection, queue_name: str) -> None:
    a = (await push(conn, queue_name, "a", uniqueKey="r", delay=60000))["id"]
    b = (await push(conn, queue_name, "b", uniqueKey="r", dedup={"replace": True}))["id"]
    assert b != a
    assert (await conn.request({"cmd": "GetJob", "id": a}))["error"] == "Job not found"
    assert await owner(conn, queue_name, "r") == b
    counts = (await conn.request({"cmd": "GetJobCounts", "queue": queue_name}))["counts"]
    assert (counts["waiting"], counts["delayed"]) == (1, 0)


async def test_replace_an_active_owner_moves_the_key(conn: Connection, queue_name: str) -> None:
    a = (await push(conn, queue_name, "a", uniqueKey="r"))["id"]
    await conn.request({"cmd": "PULL", "queue": queue_name})
    b = (await push(conn, queue_name, "b", uniqueKey="r", dedup={"replace": True}))["id"]
    assert (await conn.request({"cmd": "GetState", "id": a}))["state"] == "active"
    assert await owner(conn, queue_name, "r") == b
    await conn.request({"cmd": "ACK", "id": a})
    assert await owner(conn, queue_name, "r") == b


async def test_replace_is_refused_while_jobs_depend_on_the_owner(conn: Connection, queue_name: str) -> None:
    a = (await push(conn, queue_name, "a", uniqueKey="r"))["id"]
    await push(conn, queue_name, "child", dependsOn=[a])
    refused = await push(conn, queue_name, "b", uniqueKey="r", dedup={"replace": True})
    assert refused == {
        "ok": False,
        "error": f"Cannot replace deduplicated job {a} because live jobs depend on it",
    }
    # All or nothing in a batch too.
    batch = await conn.request(
        {
            "cmd": "PUSHB",
            "queue": queue_name,
            "jobs": [
                {"name": "x", "data": 1},
                {"name": "y", "data": 2, "uniqueKey": "r", "dedup": {"replace": True}},
            ],
        }
    )
    assert batch["error"] == f"jobs[1]: Cannot replace deduplicated job {a} because live jobs depend on it"
    assert await count(conn, queue_name) == 1


async def test_batch_keys_dedup_within_the_batch(conn: Connection, queue_name: str) -> None:
    jobs = [{"name": n, "data": 1, "uniqueKey": "same"} for n in "abc"]
    ids = (await conn.request({"cmd": "PUSHB", "queue": queue_name, "jobs": jobs}))["ids"]
    assert ids[0] == ids[1] == ids[2]
    assert await count(conn, queue_name) == 1


async def test_custom_ids(conn: Connection, queue_name: str) -> None:
    live = f"{queue_name}-live"
    assert (await push(conn, queue_name, "first", jobId=live))["id"] == live
    assert (await push(conn, queue_name, "second", jobId=live))["id"] == live
    assert (await conn.request({"cmd": "GetJob", "id": live}))["job"]["name"] == "first"
    await conn.request({"cmd": "PULL", "queue": queue_name})
    assert (await push(conn, queue_name, "while-active", jobId=live))["id"] == live
    await conn.request({"cmd": "ACK", "id": live})
    assert (await push(conn, queue_name, "after", jobId=live))["id"] == live
    job = (await conn.request({"cmd": "GetJob", "id": live}))["job"]
    assert (job["name"], job["state"]) == ("after", "waiting")
    dead = f"{queue_name}-dead"
    await push(conn, f"{queue_name}-d", "doomed", jobId=dead, maxAttempts=1)
    await conn.request({"cmd": "PULL", "queue": f"{queue_name}-d"})
    await conn.request({"cmd": "FAIL", "id": dead})
    assert (await conn.request({"cmd": "GetState", "id": dead}))["state"] == "failed"
    assert (await push(conn, f"{queue_name}-d", "reborn", jobId=dead))["id"] == dead
    assert (await conn.request({"cmd": "Dlq", "queue": f"{queue_name}-d"}))["jobs"] == []
    assert (await conn.request({"cmd": "GetState", "id": dead}))["state"] == "waiting"
