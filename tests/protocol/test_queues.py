"""Queue-wide listings and removals over a real socket: GetJobs, GetCountsPerPriority, ListQueues, Drain,
Clean and Obliterate, including long-polling pulls that are waiting while the queue changes."""
from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bunqueue._testbase.frames import call
from bunqueue.client import Connection


async def push(conn: Connection, queue: str, name: str, **opts: Any) -> str:
    reply = await call(conn, {"cmd": "PUSH", "queue": queue, "name": name, "data": name, **opts})
    assert reply["ok"], reply
    return str(reply["id"])


async def counts(conn: Connection, queue: str) -> dict[str, int]:
    return dict((await call(conn, {"cmd": "GetJobCounts", "queue": queue}))["counts"])


async def listed(conn: Connection, queue: str, **opts: Any) -> list[tuple[str, str]]:
    reply = await call(conn, {"cmd": "GetJobs", "queue": queue, **opts})
    assert reply["ok"], reply
    return [(job["name"], job["state"]) for job in reply["jobs"]]


async def mixed_queue(conn: Connection, queue: str) -> None:
    """done (completed), bad (failed), busy (active), prio (prioritized), wait, later (delayed)."""
    for name, opts in [("done", {}), ("bad", {"maxAttempts": 1}), ("busy", {}), ("prio", {"priority": 2}),
                       ("wait", {}), ("later", {"delay": 60000})]:
        await push(conn, queue, name, **opts)
        await asyncio.sleep(0.002)
    pulled = (await call(conn, {"cmd": "PULLB", "queue": queue, "count": 4}))["jobs"]
    by_name = {job["name"]: job["id"] for job in pulled}
    assert set(by_name) == {"prio", "done", "bad", "busy"}
    await call(conn, {"cmd": "ACK", "id": by_name["done"], "result": "r"})
    await call(conn, {"cmd": "FAIL", "id": by_name["bad"], "error": "nope"})
    await call(conn, {"cmd": "MoveToWait", "id": by_name["prio"]})


async def test_get_jobs_lists_every_state_in_creation_order(conn: Connection, queue_name: str) -> None:
    await mixed_queue(conn, queue_name)
    assert await listed(conn, queue_name) == [
        ("done", "completed"), ("bad", "failed"), ("busy", "active"), ("prio", "prioritized"),
        ("wait", "waiting"), ("later", "delayed")]
    assert await listed(conn, queue_name, asc=False, limit=2, offset=1) == [
        ("wait", "waiting"), ("prio", "prioritized")]
    assert await listed(conn, queue_name, state=["failed", "completed"]) == [
        ("done", "completed"), ("bad", "failed")]
    assert await listed(conn, queue_name, state="completed") == [("done", "completed")]
    job = (await call(conn, {"cmd": "GetJobs", "queue": queue_name, "state": "failed"}))["jobs"][0]
    assert job["failedReason"] == "nope"
    done = (await call(conn, {"cmd": "GetJobs", "queue": queue_name, "state": "completed"}))["jobs"][0]
    assert done["returnvalue"] == "r"
    assert await listed(conn, queue_name, state="bogus") == []
    assert await listed(conn, queue_name, limit=0) == []
    assert await listed(conn, queue_name, offset=50) == []
    assert await listed(conn, queue_name, state=[]) == await listed(conn, queue_name)
    assert await listed(conn, "nobody-pushed-here") == []


async def test_get_jobs_on_a_paused_queue(conn: Connection, queue_name: str) -> None:
    await push(conn, queue_name, "a")
    await push(conn, queue_name, "d", delay=60000)
    await call(conn, {"cmd": "Pause", "queue": queue_name})
    assert await listed(conn, queue_name, state="waiting") == []
    assert await listed(conn, queue_name, state="paused") == [("a", "paused")]
    assert await listed(conn, queue_name, state=["paused", "delayed"]) == [("a", "waiting"), ("d", "delayed")]
    assert await listed(conn, queue_name) == [("a", "waiting"), ("d", "delayed")]


@pytest.mark.parametrize(
    ("opts", "error"),
    [
        ({"state": 5}, "state must be a string or an array of strings"),
        ({"state": ["waiting", 1]}, "state must be a string or an array of strings"),
        ({"limit": "10"}, "limit must be a number"),
        ({"offset": float("nan")}, "offset must be a finite number"),
        ({"asc": "yes"}, "asc must be a boolean"),
    ],
    ids=["state-type", "state-item", "limit", "offset", "asc"],
)
async def test_get_jobs_validation(conn: Connection, queue_name: str, opts: dict[str, Any], error: str) -> None:
    assert (await call(conn, {"cmd": "GetJobs", "queue": queue_name, **opts}))["error"] == error


async def test_counts_per_priority(conn: Connection, queue_name: str) -> None:
    for name, priority in [("a", 3), ("b", -2), ("c", 1), ("d", 1.5), ("e", 3000000000), ("f", 0)]:
        await push(conn, queue_name, name, priority=priority)
    await push(conn, queue_name, "late", priority=-2, delay=60000)
    got = await call(conn, {"cmd": "GetCountsPerPriority", "queue": queue_name})
    # JS object key order: integer keys ascending, then the rest as they first appeared.
    assert list(got["counts"].items()) == [
        ("0", 1), ("1", 1), ("3", 1), ("3000000000", 1), ("-2", 2), ("1.5", 1)]
    await call(conn, {"cmd": "PULL", "queue": queue_name})
    assert "3000000000" not in (await call(conn, {"cmd": "GetCountsPerPriority", "queue": queue_name}))["counts"]
    empty = await call(conn, {"cmd": "GetCountsPerPriority", "queue": queue_name + "-none"})
    assert empty == {"ok": True, "queue": queue_name + "-none", "counts": {}}


async def test_list_queues_shows_queues_with_jobs_or_controls(conn: Connection, queue_name: str) -> None:
    names = [f"{queue_name}-{i}" for i in range(3)]
    await push(conn, names[0], "a")
    await call(conn, {"cmd": "Pause", "queue": names[1]})
    await call(conn, {"cmd": "PULL", "queue": names[2]})
    queues = (await call(conn, {"cmd": "ListQueues"}))["queues"]
    assert names[0] in queues and names[1] in queues and names[2] not in queues
    await call(conn, {"cmd": "Obliterate", "queue": names[0]})
    await call(conn, {"cmd": "Resume", "queue": names[1]})
    queues = (await call(conn, {"cmd": "ListQueues"}))["queues"]
    assert names[0] not in queues and names[1] not in queues


async def test_drain_removes_queued_jobs_only(conn: Connection, queue_name: str) -> None:
    await push(conn, queue_name, "a", uniqueKey="u")
    await push(conn, queue_name, "b", priority=5)
    await push(conn, queue_name, "c", delay=60000)
    dep = await push(conn, queue_name, "d", delay=60000)
    await call(conn, {"cmd": "PULL", "queue": queue_name})
    await push(conn, queue_name, "e", dependsOn=[dep])
    assert await call(conn, {"cmd": "Drain", "queue": queue_name}) == {"ok": True, "count": 3}
    c = await counts(conn, queue_name)
    assert (c["waiting"], c["prioritized"], c["delayed"], c["active"], c["waiting-children"]) == (0, 0, 0, 1, 1)
    # The unique key went with its job.
    assert (await call(conn, {"cmd": "PUSH", "queue": queue_name, "name": "again", "uniqueKey": "u"}))["ok"]
    assert (await call(conn, {"cmd": "Drain", "queue": "never-used-queue"}))["count"] == 0


async def test_obliterate_removes_everything(conn: Connection, conn2: Connection, queue_name: str) -> None:
    await mixed_queue(conn, queue_name)
    await call(conn, {"cmd": "AddLog", "id": (await listed_ids(conn, queue_name))[0], "message": "m"})
    await call(conn, {"cmd": "Pause", "queue": queue_name})
    await call(conn, {"cmd": "SetDlqConfig", "queue": queue_name, "config": {"maxEntries": 5}})
    ids = await listed_ids(conn, queue_name)
    assert await call(conn, {"cmd": "Obliterate", "queue": queue_name}) == {"ok": True}
    assert all(v == 0 for v in (await counts(conn, queue_name)).values())
    for job_id in ids:
        assert (await call(conn, {"cmd": "GetState", "id": job_id}))["state"] == "unknown"
    assert (await call(conn, {"cmd": "IsPaused", "queue": queue_name}))["paused"] is False
    config = (await call(conn, {"cmd": "GetDlqConfig", "queue": queue_name}))["config"]
    assert config["maxEntries"] == 10000
    assert (await call(conn, {"cmd": "GetLogs", "id": ids[0]}))["data"]["count"] == 0
    # The worker of the obliterated active job finds nothing to acknowledge.
    assert (await call(conn2, {"cmd": "ACK", "id": ids[2]}))["ok"] is False


async def listed_ids(conn: Connection, queue: str) -> list[str]:
    return [job["id"] for job in (await call(conn, {"cmd": "GetJobs", "queue": queue}))["jobs"]]


async def test_obliterate_with_a_long_poll_waiting(conn: Connection, conn2: Connection, queue_name: str) -> None:
    await push(conn, queue_name, "old")
    await call(conn, {"cmd": "Pause", "queue": queue_name})
    waiting = conn2.request_nowait({"cmd": "PULL", "queue": queue_name, "timeout": 5000})
    await asyncio.sleep(0.05)
    await call(conn, {"cmd": "Obliterate", "queue": queue_name})
    assert not waiting.done()
    new_id = await push(conn, queue_name, "new")
    reply = await asyncio.wait_for(waiting, 2)
    assert reply["job"]["id"] == new_id


async def test_clean_by_state_age_and_limit(conn: Connection, queue_name: str) -> None:
    await mixed_queue(conn, queue_name)
    await asyncio.sleep(0.05)
    fresh = await push(conn, queue_name, "fresh")
    assert (await call(conn, {"cmd": "Clean", "queue": queue_name, "grace": 10, "limit": 1}))["count"] == 1
    queued = await call(conn, {"cmd": "Clean", "queue": queue_name, "grace": 10, "state": "delayed"})
    assert queued["count"] == 2 and fresh not in queued["ids"]
    done = await call(conn, {"cmd": "Clean", "queue": queue_name, "grace": 10, "state": "completed"})
    failed = await call(conn, {"cmd": "Clean", "queue": queue_name, "grace": 10, "state": "failed"})
    active = await call(conn, {"cmd": "Clean", "queue": queue_name, "grace": 0, "state": "active"})
    assert (done["count"], failed["count"], active) == (1, 1, {"ok": True, "count": 0, "ids": []})
    c = await counts(conn, queue_name)
    assert (c["waiting"], c["active"], c["completed"], c["failed"], c["prioritized"], c["delayed"]) == (
        1, 1, 0, 0, 0, 0)
    for job_id in queued["ids"] + done["ids"] + failed["ids"]:
        assert (await call(conn, {"cmd": "GetState", "id": job_id}))["state"] == "unknown"


@pytest.mark.parametrize(
    ("opts", "error"),
    [
        ({}, "grace is required"),
        ({"grace": "abc"}, "grace must be a number"),
        ({"grace": 0, "limit": float("inf")}, "limit must be a finite number"),
        ({"grace": 0, "state": 3}, "state must be a string"),
    ],
    ids=["grace-missing", "grace-text", "limit", "state"],
)
async def test_clean_validation(conn: Connection, queue_name: str, opts: dict[str, Any], error: str) -> None:
    assert (await call(conn, {"cmd": "Clean", "queue": queue_name, **opts}))["error"] == error


async def test_clean_racing_a_long_poll_pull(conn: Connection, conn2: Connection, queue_name: str) -> None:
    """A pull waiting on an empty queue is not handed a cleaned job, and counts stay exact."""
    waiting = conn2.request_nowait({"cmd": "PULL", "queue": queue_name, "timeout": 3000})
    await asyncio.sleep(0.05)
    await call(conn, {"cmd": "Pause", "queue": queue_name})
    doomed = await push(conn, queue_name, "doomed")
    cleaned = await call(conn, {"cmd": "Clean", "queue": queue_name, "grace": -1000})
    assert cleaned["ids"] == [doomed]
    await call(conn, {"cmd": "Resume", "queue": queue_name})
    survivor = await push(conn, queue_name, "survivor")
    assert (await asyncio.wait_for(waiting, 2))["job"]["id"] == survivor
    c = await counts(conn, queue_name)
    assert (c["waiting"], c["active"]) == (0, 1)


async def test_pause_holds_long_polls_until_resume(conn: Connection, conn2: Connection, queue_name: str) -> None:
    waiting = conn2.request_nowait({"cmd": "PULLB", "queue": queue_name, "count": 5, "timeout": 5000})
    await asyncio.sleep(0.05)
    await call(conn, {"cmd": "Pause", "queue": queue_name})
    job_id = await push(conn, queue_name, "held")
    await asyncio.sleep(0.1)
    assert not waiting.done()
    assert (await counts(conn, queue_name))["paused"] == 1
    await call(conn, {"cmd": "Resume", "queue": queue_name})
    assert [j["id"] for j in (await asyncio.wait_for(waiting, 2))["jobs"]] == [job_id]
