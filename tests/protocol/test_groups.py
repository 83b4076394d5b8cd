"""Job groups over a real socket: lane order, groupMaxSize, the group commands and their errors, pull-side
defaults with stored overrides, pause, manual deadlines, long-poll wake-ups and fairness."""
from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import pytest

from bunqueue._testbase.frames import call
from bunqueue.client import Connection, connect


async def data(conn: Connection, cmd: str, queue: str, **fields: Any) -> dict[str, Any]:
    reply = await call(conn, {"cmd": cmd, "queue": queue, **fields})
    assert reply["ok"] is True, reply
    return reply["data"]


async def push(conn: Connection, queue: str, name: str, group: str | None, **opts: Any) -> str:
    job = {"cmd": "PUSH", "queue": queue, "name": name, "data": name, **opts}
    if group is not None:
        job["groupId"] = group
    reply = await call(conn, job)
    assert reply["ok"] is True, reply
    return reply["id"]


async def pull_names(conn: Connection, queue: str, count: int = 10, **opts: Any) -> list[str]:
    reply = await call(conn, {"cmd": "PULLB", "queue": queue, "count": count, **opts})
    assert reply["ok"] is True, reply
    return [job["name"] for job in reply["jobs"]]


async def error(conn: Connection, cmd: dict[str, Any]) -> str:
    reply = await call(conn, cmd)
    assert reply["ok"] is False, reply
    return reply["error"]


async def test_ungrouped_first_then_lanes_round_robin(conn: Connection, queue_name: str) -> None:
    for name, group, prio in [("a3", "A", 3), ("a0", "A", 0), ("b0", "B", 0), ("b1", "B", 1), ("c0", "C", 0)]:
        await push(conn, queue_name, name, group, priority=prio)
    await push(conn, queue_name, "plain", None)
    assert await pull_names(conn, queue_name, 1) == ["plain"]
    assert await pull_names(conn, queue_name, 10) == ["a0", "b0", "c0", "a3", "b1"]


async def test_counts(conn: Connection, queue_name: str) -> None:
    await push(conn, queue_name, "d", "A", delay=60000)
    await push(conn, queue_name, "w", "A")
    await push(conn, queue_name, "x", "B", priority=2)
    await push(conn, queue_name, "plain", None)
    assert await data(conn, "GetGroupJobsCount", queue_name, groupId="A") == {"count": 2}
    assert await data(conn, "GetGroupsJobsCount", queue_name) == {"count": 3}
    assert await data(conn, "GetGroupsJobsCount", queue_name, maxCount=1) == {"count": 3}
    assert await pull_names(conn, queue_name, 3) == ["plain", "w", "x"]
    assert await data(conn, "GetGroupJobsCount", queue_name, groupId="A") == {"count": 1}
    assert await data(conn, "GetGroupActiveCount", queue_name, groupId="A") == {"count": 1}
    assert await data(conn, "GetGroupActiveCount", queue_name, groupId="B") == {"count": 1}
    assert await data(conn, "GetGroupsJobsCount", "never-seen-queue") == {"count": 0}
    assert await data(conn, "GetGroupActiveCount", "never-seen-queue", groupId="A") == {"count": 0}


async def test_active_count_falls_when_jobs_leave_active(conn: Connection, queue_name: str) -> None:
    await push(conn, queue_name, "a1", "A")
    await push(conn, queue_name, "a2", "A", maxAttempts=3)
    reply = await call(conn, {"cmd": "PULLB", "queue": queue_name, "count": 2, "owner": "w"})
    (j1, j2), (t1, t2) = reply["jobs"], reply["tokens"]
    assert await data(conn, "GetGroupActiveCount", queue_name, groupId="A") == {"count": 2}
    assert (await call(conn, {"cmd": "ACK", "id": j1["id"], "token": t1}))["ok"]
    assert (await call(conn, {"cmd": "FAIL", "id": j2["id"], "token": t2}))["ok"]
    assert await data(conn, "GetGroupActiveCount", queue_name, groupId="A") == {"count": 0}
    # The failed attempt is retried: back in the group's depth.
    assert await data(conn, "GetGroupJobsCount", queue_name, groupId="A") == {"count": 1}


async def test_group_max_size_admission(conn: Connection, queue_name: str) -> None:
    await push(conn, queue_name, "a1", "A", groupMaxSize=2)
    await push(conn, queue_name, "a2", "A", groupMaxSize=2)
    assert await error(
        conn, {"cmd": "PUSH", "queue": queue_name, "name": "a3", "data": 1, "groupId": "A", "groupMaxSize": 2}
    ) == "Group A has reached its maximum size of 2"
    jobs = [
        {"name": "b1", "data": 1, "groupId": "B", "groupMaxSize": 2},
        {"name": "b2", "data": 1, "groupId": "B", "groupMaxSize": 2},
        {"name": "b3", "data": 1, "groupId": "B", "groupMaxSize": 2},
    ]
    assert await error(conn, {"cmd": "PUSHB", "queue": queue_name, "jobs": jobs}) == (
        "Group B has reached its maximum size of 2"
    )
    # All or nothing: no member of the refused batch was admitted.
    assert await data(conn, "GetGroupJobsCount", queue_name, groupId="B") == {"count": 0}
    # Active jobs do not count toward the cap.
    assert await pull_names(conn, queue_name, 1) == ["a1"]
    await push(conn, queue_name, "a3", "A", groupMaxSize=2)


@pytest.mark.parametrize(
    ("cmd", "fields", "message"),
    [
        ("GetGroupJobsCount", {}, "groupId is required"),
        ("GetGroupJobsCount", {"groupId": ""}, "groupId must be a non-empty string"),
        ("GetGroupJobsCount", {"groupId": "g" * 257}, "groupId must be at most 256 characters"),
        ("GetGroupJobsCount", {"groupId": 7}, "groupId must be a string"),
        ("GetGroupActiveCount", {"groupId": "a\0b"}, "groupId must not contain NUL characters"),
        ("SetGroupRateLimit", {"groupId": "A", "max": 0, "duration": 1000}, "max must be a positive safe integer"),
        ("SetGroupRateLimit", {"groupId": "A", "max": 1.5, "duration": 1000}, "max must be a positive safe integer"),
        ("SetGroupRateLimit", {"groupId": "A", "max": 1}, "duration must be a positive safe integer"),
        (
            "SetGroupRateLimit", {"groupId": "A", "max": 1, "duration": 2**53},
            "duration must be a positive safe integer",
        ),
        ("SetGroupConcurrency", {"groupId": "A", "concurrency": "2"}, "concurrency must be a positive safe integer"),
        ("SetGroupConcurrency", {"groupId": "A", "concurrency": True}, "concurrency must be a positive safe integer"),
        ("RateLimitGroup", {"groupId": "A", "duration": 0}, "duration must be a positive safe integer"),
        ("PauseGroup", {}, "groupId is required"),
        ("ResumeGroup", {"groupId": ""}, "groupId must be a non-empty string"),
        ("IsGroupPaused", {"groupId": None}, "groupId must be a string"),
        ("GetGroupRateLimit", {"groupId": ["A"]}, "groupId must be a string"),
        ("RemoveGroupRateLimit", {}, "groupId is required"),
        ("GetGroupRateLimitTtl", {}, "groupId is required"),
        ("GetGroupConcurrency", {}, "groupId is required"),
        ("RemoveGroupConcurrency", {}, "groupId is required"),
    ],
)
async def test_command_validation(
    conn: Connection, queue_name: str, cmd: str, fields: dict[str, Any], message: str
) -> None:
    assert await error(conn, {"cmd": cmd, "queue": queue_name, **fields}) == message


@pytest.mark.parametrize("cmd", ["GetGroupJobsCount", "GetGroupsJobsCount", "PauseGroup"])
async def test_queue_name_is_checked_first(conn: Connection, cmd: str) -> None:
    assert await error(conn, {"cmd": cmd, "queue": "bad q", "groupId": ""}) == (
        "Queue name contains invalid characters"
    )


@pytest.mark.parametrize(
    ("group", "message"),
    [
        ("x", "group must be an object"),
        ([1], "group must be an object"),
        ({"concurrency": 0}, "group.concurrency must be a positive safe integer"),
        ({"concurrency": 2.5}, "group.concurrency must be a positive safe integer"),
        ({"limit": 5}, "group.limit must be an object"),
        ({"limit": {"duration": 10}}, "group.limit.max must be a positive safe integer"),
        ({"limit": {"max": 1}}, "group.limit.duration must be a positive safe integer"),
        ({"affinity": 3}, "group.affinity must be a string or null"),
    ],
)
async def test_pull_group_option_validation(conn: Connection, queue_name: str, group: Any, message: str) -> None:
    for cmd in ("PULL", "PULLB"):
        assert await error(conn, {"cmd": cmd, "queue": queue_name, "count": 1, "group": group}) == message


async def test_concurrency_override_needs_a_pull_default(conn: Connection, queue_name: str) -> None:
    assert await data(conn, "GetGroupConcurrency", queue_name, groupId="A") == {"concurrency": None}
    assert await call(conn, {"cmd": "SetGroupConcurrency", "queue": queue_name, "groupId": "A", "concurrency": 1}) == {
        "ok": True
    }
    assert await data(conn, "GetGroupConcurrency", queue_name, groupId="A") == {"concurrency": 1}
    for name, group in [("a1", "A"), ("a2", "A"), ("b1", "B"), ("b2", "B")]:
        await push(conn, queue_name, name, group)
    assert await pull_names(conn, queue_name, 10, group={"concurrency": 5}) == ["a1", "b1", "b2"]
    assert await data(conn, "RemoveGroupConcurrency", queue_name, groupId="A") == {"removed": 1}
    assert await data(conn, "RemoveGroupConcurrency", queue_name, groupId="A") == {"removed": 0}
    # The pull default of 1 now applies to A, which already runs one job.
    assert await pull_names(conn, queue_name, 10, group={"concurrency": 1}) == []
    assert await pull_names(conn, queue_name, 10) == ["a2"]


async def test_rate_limit_override_and_ttl(conn: Connection, queue_name: str) -> None:
    assert await data(conn, "GetGroupRateLimit", queue_name, groupId="G") == {"limit": None}
    assert await data(conn, "GetGroupRateLimitTtl", queue_name, groupId="G") == {"ttl": -2}
    set_limit = {"cmd": "SetGroupRateLimit", "queue": queue_name, "groupId": "G", "max": 2, "duration": 60000}
    assert await call(conn, set_limit) == {"ok": True}
    assert await data(conn, "GetGroupRateLimit", queue_name, groupId="G") == {"limit": {"max": 2, "duration": 60000}}
    for i in range(4):
        await push(conn, queue_name, f"g{i}", "G")
    # No pull default: the override does not apply.
    assert await pull_names(conn, queue_name, 1) == ["g0"]
    limited = {"limit": {"max": 100, "duration": 1000}}
    assert await pull_names(conn, queue_name, 10, group=limited) == ["g1", "g2"]
    ttl = (await data(conn, "GetGroupRateLimitTtl", queue_name, groupId="G"))["ttl"]
    assert 59000 < ttl <= 60000
    assert await data(conn, "GetGroupRateLimitTtl", queue_name, groupId="G", maxJobs=3) == {"ttl": 0}
    assert await data(conn, "RemoveGroupRateLimit", queue_name, groupId="G") == {"removed": 1}
    assert await data(conn, "RemoveGroupRateLimit", queue_name, groupId="G") == {"removed": 0}
    assert await data(conn, "GetGroupRateLimitTtl", queue_name, groupId="G") == {"ttl": -2}
    assert await pull_names(conn, queue_name, 10, group=limited) == ["g3"]


async def test_pause_blocks_new_claims_only(conn: Connection, queue_name: str) -> None:
    await push(conn, queue_name, "g1", "G")
    await push(conn, queue_name, "g2", "G")
    await push(conn, queue_name, "h1", "H")
    assert await pull_names(conn, queue_name, 1) == ["g1"]
    assert await data(conn, "IsGroupPaused", queue_name, groupId="G") == {"paused": False}
    assert await data(conn, "PauseGroup", queue_name, groupId="G") == {"changed": True}
    assert await data(conn, "PauseGroup", queue_name, groupId="G") == {"changed": False}
    assert await data(conn, "IsGroupPaused", queue_name, groupId="G") == {"paused": True}
    assert await pull_names(conn, queue_name, 5) == ["h1"]
    assert await data(conn, "GetGroupActiveCount", queue_name, groupId="G") == {"count": 1}
    assert await data(conn, "ResumeGroup", queue_name, groupId="G") == {"changed": True}
    assert await data(conn, "ResumeGroup", queue_name, groupId="G") == {"changed": False}
    assert await pull_names(conn, queue_name, 5) == ["g2"]


async def test_rate_limit_group_sets_a_manual_deadline(conn: Connection, queue_name: str) -> None:
    await push(conn, queue_name, "g1", "G")
    assert await call(conn, {"cmd": "RateLimitGroup", "queue": queue_name, "groupId": "G", "duration": 5000}) == {
        "ok": True
    }
    ttl = (await data(conn, "GetGroupRateLimitTtl", queue_name, groupId="G"))["ttl"]
    assert 0 < ttl <= 5000
    assert await pull_names(conn, queue_name, 5) == []
    assert await data(conn, "GetGroupJobsCount", queue_name, groupId="G") == {"count": 1}


async def test_affinity(conn: Connection, queue_name: str) -> None:
    await push(conn, queue_name, "a", "A")
    await push(conn, queue_name, "b", "B")
    await push(conn, queue_name, "plain", None)
    assert await pull_names(conn, queue_name, 5, group={"affinity": "B"}) == ["b"]
    assert await pull_names(conn, queue_name, 5, group={"affinity": None}) == ["plain"]
    assert await pull_names(conn, queue_name, 5) == ["a"]


async def test_long_poll_woken_when_a_concurrency_slot_frees(
    conn: Connection, conn2: Connection, queue_name: str
) -> None:
    await push(conn, queue_name, "a1", "A")
    await push(conn, queue_name, "a2", "A")
    first = await call(conn, {"cmd": "PULL", "queue": queue_name, "owner": "w", "group": {"concurrency": 1}})
    waiting = asyncio.ensure_future(
        call(conn2, {"cmd": "PULL", "queue": queue_name, "timeout": 10000, "group": {"concurrency": 1}})
    )
    await asyncio.sleep(0.2)
    assert not waiting.done()
    started = time.monotonic()
    assert (await call(conn, {"cmd": "ACK", "id": first["job"]["id"], "token": first["token"]}))["ok"]
    reply = await asyncio.wait_for(waiting, 5)
    assert reply["job"]["name"] == "a2"
    assert time.monotonic() - started < 2


async def test_long_poll_woken_on_resume(conn: Connection, conn2: Connection, queue_name: str) -> None:
    await push(conn, queue_name, "g1", "G")
    await data(conn, "PauseGroup", queue_name, groupId="G")
    waiting = asyncio.ensure_future(call(conn2, {"cmd": "PULL", "queue": queue_name, "timeout": 10000}))
    await asyncio.sleep(0.2)
    assert not waiting.done()
    await data(conn, "ResumeGroup", queue_name, groupId="G")
    assert (await asyncio.wait_for(waiting, 5))["job"]["name"] == "g1"


async def test_long_poll_woken_when_the_window_ends(conn: Connection, conn2: Connection, queue_name: str) -> None:
    limited = {"limit": {"max": 1, "duration": 600}}
    await push(conn, queue_name, "g1", "G")
    await push(conn, queue_name, "g2", "G")
    assert await pull_names(conn, queue_name, 5, group=limited) == ["g1"]
    started = time.monotonic()
    reply = await call(conn2, {"cmd": "PULL", "queue": queue_name, "timeout": 10000, "group": limited})
    waited = time.monotonic() - started
    assert reply["job"]["name"] == "g2"
    # Woken by the window's end (600 ms after it opened), not by the 10 s timeout.
    assert waited < 5


async def test_long_poll_woken_when_the_manual_deadline_ends(
    conn: Connection, conn2: Connection, queue_name: str
) -> None:
    await push(conn, queue_name, "g1", "G")
    await call(conn, {"cmd": "RateLimitGroup", "queue": queue_name, "groupId": "G", "duration": 500})
    started = time.monotonic()
    reply = await call(conn2, {"cmd": "PULL", "queue": queue_name, "timeout": 10000})
    assert reply["job"]["name"] == "g1"
    assert 0.3 < time.monotonic() - started < 5


async def test_obliterate_forgets_group_controls(conn: Connection, queue_name: str) -> None:
    await data(conn, "PauseGroup", queue_name, groupId="G")
    # A queue with group controls and no jobs is listed, as in the reference.
    assert queue_name in (await call(conn, {"cmd": "ListQueues"}))["queues"]
    await call(conn, {"cmd": "SetGroupConcurrency", "queue": queue_name, "groupId": "G", "concurrency": 2})
    assert (await call(conn, {"cmd": "Obliterate", "queue": queue_name}))["ok"]
    assert await data(conn, "IsGroupPaused", queue_name, groupId="G") == {"paused": False}
    assert await data(conn, "GetGroupConcurrency", queue_name, groupId="G") == {"concurrency": None}


async def test_fairness_across_groups_of_very_different_depths(server: Any, queue_name: str) -> None:
    depths = {"small": 60, "medium": 600, "large": 3000}
    producer = await connect(*server.addr)
    for group, depth in depths.items():
        jobs = [{"name": group, "data": i, "groupId": group} for i in range(depth)]
        for start in range(0, depth, 500):
            assert (await producer.request({"cmd": "PUSHB", "queue": queue_name, "jobs": jobs[start:start + 500]}))[
                "ok"
            ]
    await producer.close()
    order: list[str] = []

    async def worker(n: int) -> None:
        conn = await connect(*server.addr)
        try:
            while True:
                reply = await conn.request({"cmd": "PULL", "queue": queue_name, "owner": f"w{n}"})
                job = reply["job"]
                if job is None:
                    return
                order.append(job["name"])
                await conn.request({"cmd": "ACK", "id": job["id"], "token": reply["token"]})
        finally:
            await conn.close()

    await asyncio.gather(*(worker(n) for n in range(8)))
    assert Counter(order) == depths
    # While every group has work (until the smallest runs out), each takes a third of the claims.
    window = order[: _last(order, "small") + 1]
    shares = {group: window.count(group) / len(window) for group in depths}
    for share in shares.values():
        assert abs(share - 1 / 3) <= 0.1 / 3, shares
    # Then the two that still have work share equally.
    after = order[len(window):]
    window2 = after[: _last(after, "medium") + 1]
    assert abs(window2.count("medium") / len(window2) - 0.5) <= 0.05


def _last(order: list[str], name: str) -> int:
    return len(order) - 1 - order[::-1].index(name)
