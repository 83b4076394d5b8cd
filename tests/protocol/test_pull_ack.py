"""PULL, PULLB, ACK, ACKB and FAIL over a real socket: ordering, leases, retries, long polls, release."""
from __future__ import annotations

import asyncio

import pytest

from bunqueue._testbase.server import ServerProcess
from bunqueue.client import Connection, connect


async def push(conn: Connection, queue: str, name: str, **opts: object) -> str:
    reply = await conn.request({"cmd": "PUSH", "queue": queue, "name": name, "data": {"n": name}, **opts})
    assert reply["ok"], reply
    return reply["id"]


async def names(conn: Connection, queue: str, count: int = 100) -> list[str]:
    reply = await conn.request({"cmd": "PULLB", "queue": queue, "count": count})
    return [job["name"] for job in reply["jobs"]]


async def test_empty_queue_replies(conn: Connection, queue_name: str) -> None:
    assert await conn.request({"cmd": "PULL", "queue": queue_name, "reqId": "a"}) == {
        "ok": True, "job": None, "reqId": "a"}
    with_owner = await conn.request({"cmd": "PULL", "queue": queue_name, "owner": "w"})
    assert with_owner["job"] is None and "token" in with_owner and with_owner["token"] is None
    batch = await conn.request({"cmd": "PULLB", "queue": queue_name, "count": 5, "owner": "w"})
    assert batch["jobs"] == [] and batch["tokens"] == []


async def test_priority_then_fifo_then_lifo(conn: Connection, queue_name: str) -> None:
    for name, opts in [("p1", {"priority": 1}), ("p5a", {"priority": 5}), ("p5b", {"priority": 5}),
                       ("f0", {}), ("L1", {"lifo": True}), ("f1", {}), ("L2", {"lifo": True}),
                       ("neg", {"priority": -3}), ("p10", {"priority": 10})]:
        await push(conn, queue_name, name, **opts)
    assert await names(conn, queue_name) == ["p10", "p5a", "p5b", "p1", "L2", "L1", "f0", "f1", "neg"]


async def test_groups_run_lower_priority_first(conn: Connection, queue_name: str) -> None:
    for name, prio in [("pmax", 2097151), ("p7", 7), ("p0", 0)]:
        await push(conn, queue_name, name, groupId="G", priority=prio)
    assert await names(conn, queue_name) == ["p0", "p7", "pmax"]


async def test_ungrouped_first_then_groups_round_robin(conn: Connection, queue_name: str) -> None:
    for name, group in [("a1", "A"), ("a2", "A"), ("b1", "B"), ("plain", None), ("b2", "B")]:
        await push(conn, queue_name, name, **({"groupId": group} if group else {}))
    assert await names(conn, queue_name) == ["plain", "a1", "b1", "a2", "b2"]


async def test_lock_token_flow(conn: Connection, queue_name: str) -> None:
    job_id = await push(conn, queue_name, "j")
    pulled = await conn.request({"cmd": "PULL", "queue": queue_name, "owner": "w1", "lockTtl": 30000})
    token = pulled["token"]
    assert pulled["job"]["id"] == job_id and token != job_id
    no_token = await conn.request({"cmd": "ACK", "id": job_id})
    assert no_token["error"] == f"Lock token required for job {job_id}"
    wrong = await conn.request({"cmd": "ACK", "id": job_id, "token": "nope"})
    assert wrong["error"] == f"Invalid or expired lock token for job {job_id}"
    assert (await conn.request({"cmd": "GetState", "id": job_id}))["state"] == "active"
    assert (await conn.request({"cmd": "ACK", "id": job_id, "token": token, "result": {"s": 3}}))["ok"]
    again = await conn.request({"cmd": "ACK", "id": job_id, "token": token})
    assert again["error"] == f"Job not found or not in processing state: {job_id}"
    assert (await conn.request({"cmd": "GetResult", "id": job_id}))["result"] == {"s": 3}
    job = (await conn.request({"cmd": "GetJob", "id": job_id}))["job"]
    assert job["state"] == "completed" and job["returnvalue"] == {"s": 3}
    assert [e["state"] for e in job["timeline"]] == ["waiting", "active", "completed"]


async def test_ack_result_variants(conn: Connection, queue_name: str) -> None:
    ids = [await push(conn, queue_name, str(i)) for i in range(4)]
    await conn.request({"cmd": "PULLB", "queue": queue_name, "count": 4})
    await conn.request({"cmd": "ACK", "id": ids[0]})
    for job_id, result in zip(ids[1:], [0, False, ""]):
        await conn.request({"cmd": "ACK", "id": job_id, "result": result})
    results = [await conn.request({"cmd": "GetResult", "id": i}) for i in ids]
    assert "result" not in results[0]
    assert [r["result"] for r in results[1:]] == [0, False, ""]


async def test_ackb_checks_every_token_before_completing_any(conn: Connection, queue_name: str) -> None:
    await conn.request({"cmd": "PUSHB", "queue": queue_name, "jobs": [{"name": "a"}, {"name": "b"}]})
    pulled = await conn.request({"cmd": "PULLB", "queue": queue_name, "count": 2, "owner": "w"})
    ids = [j["id"] for j in pulled["jobs"]]
    tokens = pulled["tokens"]
    short = await conn.request({"cmd": "ACKB", "ids": ids, "tokens": tokens[:1]})
    assert short["error"] == "ACKB tokens length must match ids length"
    bad_results = await conn.request({"cmd": "ACKB", "ids": ids, "tokens": tokens, "results": [1]})
    assert bad_results["error"] == "ACKB results length must match ids length"
    wrong = await conn.request({"cmd": "ACKB", "ids": ids, "tokens": [tokens[0], "bad"], "results": [1, 2]})
    assert wrong["ok"] is False
    states = [(await conn.request({"cmd": "GetState", "id": i}))["state"] for i in ids]
    assert states == ["active", "active"]
    assert "result" not in await conn.request({"cmd": "GetResult", "id": ids[0]})
    assert (await conn.request({"cmd": "ACKB", "ids": ids, "tokens": tokens, "results": ["r0", "r1"]}))["ok"]
    assert (await conn.request({"cmd": "GetResult", "id": ids[1]}))["result"] == "r1"
    counts = (await conn.request({"cmd": "GetJobCounts", "queue": queue_name}))["counts"]
    assert counts["completed"] == 2 and counts["active"] == 0


async def test_fail_retries_with_backoff_then_dead_letters(conn: Connection, queue_name: str) -> None:
    job_id = await push(conn, queue_name, "flaky", maxAttempts=2, backoff=100)
    early = await conn.request({"cmd": "FAIL", "id": job_id, "error": "not active"})
    assert early["error"] == f"Job not found or not in processing state: {job_id}"
    await conn.request({"cmd": "PULL", "queue": queue_name})
    assert (await conn.request({"cmd": "FAIL", "id": job_id, "error": "boom", "stack": ["a", "b"]}))["ok"]
    job = (await conn.request({"cmd": "GetJob", "id": job_id}))["job"]
    assert (job["state"], job["attempts"], job["failedReason"]) == ("delayed", 1, "boom")
    assert job["stacktrace"] == ["a", "b"]
    assert [e["state"] for e in job["timeline"]] == ["waiting", "active", "failed", "waiting"]
    assert 100 <= job["runAt"] - job["timeline"][2]["timestamp"] <= 600
    assert (await conn.request({"cmd": "PULL", "queue": queue_name}))["job"] is None
    retried = await conn.request({"cmd": "PULL", "queue": queue_name, "timeout": 3000})
    assert retried["job"]["id"] == job_id and retried["job"]["attempts"] == 1
    await conn.request({"cmd": "FAIL", "id": job_id, "error": "boom2"})
    assert (await conn.request({"cmd": "GetState", "id": job_id}))["state"] == "failed"
    dlq = await conn.request({"cmd": "Dlq", "queue": queue_name})
    entry = dlq["entries"][0]
    assert dlq["jobs"][0]["id"] == job_id
    assert (entry["reason"], entry["error"], entry["retryCount"]) == ("max_attempts_exceeded", "boom2", 0)
    assert [(a["attempt"], a["reason"]) for a in entry["attempts"]] == [
        (1, "explicit_fail"), (2, "max_attempts_exceeded")]
    counts = (await conn.request({"cmd": "GetJobCounts", "queue": queue_name}))["counts"]
    assert counts["failed"] == 1 and counts["delayed"] == 0


async def test_unrecoverable_skips_retries(conn: Connection, queue_name: str) -> None:
    job_id = await push(conn, queue_name, "x", maxAttempts=5)
    await conn.request({"cmd": "PULL", "queue": queue_name})
    await conn.request({"cmd": "FAIL", "id": job_id, "error": "fatal", "unrecoverable": True})
    assert (await conn.request({"cmd": "GetState", "id": job_id}))["state"] == "failed"


async def test_remove_on_complete_and_fail_per_call(conn: Connection, queue_name: str) -> None:
    done = await push(conn, queue_name, "d")
    dead = await push(conn, queue_name, "f", maxAttempts=1)
    await conn.request({"cmd": "PULLB", "queue": queue_name, "count": 2})
    await conn.request({"cmd": "ACK", "id": done, "result": 1, "removeOnComplete": True})
    await conn.request({"cmd": "FAIL", "id": dead, "error": "x", "removeOnFail": True})
    for job_id in (done, dead):
        assert (await conn.request({"cmd": "GetState", "id": job_id}))["state"] == "unknown"
        assert (await conn.request({"cmd": "GetJob", "id": job_id}))["error"] == "Job not found"
    assert (await conn.request({"cmd": "Dlq", "queue": queue_name}))["entries"] == []


async def test_delayed_job_becomes_pullable(conn: Connection, queue_name: str) -> None:
    job_id = await push(conn, queue_name, "later", delay=300)
    assert (await conn.request({"cmd": "GetState", "id": job_id}))["state"] == "delayed"
    assert (await conn.request({"cmd": "PULL", "queue": queue_name}))["job"] is None
    woken = await conn.request({"cmd": "PULL", "queue": queue_name, "timeout": 3000})
    assert woken["job"]["id"] == job_id


async def test_long_poll_is_woken_by_a_push(conn: Connection, conn2: Connection, queue_name: str) -> None:
    waiting = conn.request_nowait({"cmd": "PULLB", "queue": queue_name, "count": 3, "timeout": 5000})
    await asyncio.sleep(0.1)
    assert not waiting.done()
    job_id = await push(conn2, queue_name, "wake")
    reply = await asyncio.wait_for(waiting, 2)
    assert [j["id"] for j in reply["jobs"]] == [job_id]


async def test_long_poll_times_out_empty(conn: Connection, queue_name: str) -> None:
    reply = await conn.request({"cmd": "PULL", "queue": queue_name, "timeout": 200, "owner": "o"})
    assert reply["job"] is None and reply["token"] is None


async def test_replies_come_back_out_of_order(conn: Connection, queue_name: str) -> None:
    slow = conn.request_nowait({"cmd": "PULL", "queue": queue_name, "timeout": 2000, "reqId": "slow"})
    fast = await conn.request({"cmd": "Ping", "reqId": "fast"})
    assert fast["data"]["pong"] is True and not slow.done()
    await push(conn, queue_name, "j")
    assert (await slow)["reqId"] == "slow"


@pytest.mark.parametrize(
    ("cmd", "error"),
    [
        ({"cmd": "PULL"}, "Queue name is required"),
        ({"cmd": "PULL", "queue": "a b"}, "Queue name contains invalid characters"),
        ({"cmd": "PULL", "queue": "pv", "timeout": 60001}, "timeout must be at most 60000"),
        ({"cmd": "PULL", "queue": "pv", "timeout": -1}, "timeout must be at least 0"),
        ({"cmd": "PULL", "queue": "pv", "timeout": "1000"}, "timeout must be a number"),
        ({"cmd": "PULLB", "queue": "pv", "count": 0}, "count must be at least 1"),
        ({"cmd": "PULLB", "queue": "pv", "count": 1001}, "count must be at most 1000"),
        ({"cmd": "PULL", "queue": "pv", "owner": "w", "lockTtl": float("nan")}, "lockTtl must be a finite number"),
        ({"cmd": "PULLB", "queue": "pv", "count": 1, "owner": "w", "lockTtl": float("inf")},
         "lockTtl must be a finite number"),
        ({"cmd": "PULL", "queue": "pv", "owner": "w", "lockTtl": "abc"}, "lockTtl must be a number"),
        ({"cmd": "PULL", "queue": "pv", "owner": 5}, "owner must be a string"),
    ],
)
async def test_pull_validation(conn: Connection, cmd: dict, error: str) -> None:
    assert (await conn.request(cmd))["error"] == error


async def test_closed_connection_releases_its_jobs(server: ServerProcess, conn: Connection,
                                                   queue_name: str) -> None:
    job_id = await push(conn, queue_name, "held")
    kept = await push(conn, queue_name, "detached")
    worker = await connect(*server.addr)
    assert (await worker.request({"cmd": "PULL", "queue": queue_name}))["job"]["id"] == job_id
    assert (await worker.request({"cmd": "PULL", "queue": queue_name, "detach": True}))["job"]["id"] == kept
    await worker.close()
    for _ in range(50):
        if (await conn.request({"cmd": "GetState", "id": job_id}))["state"] == "waiting":
            break
        await asyncio.sleep(0.02)
    job = (await conn.request({"cmd": "GetJob", "id": job_id}))["job"]
    assert (job["state"], job["attempts"], job["startedAt"]) == ("waiting", 0, None)
    assert (await conn.request({"cmd": "GetState", "id": kept}))["state"] == "active"


async def test_expired_lease_requeues_and_charges_an_attempt(conn: Connection, queue_name: str) -> None:
    job_id = await push(conn, queue_name, "slow-worker")
    first = await conn.request({"cmd": "PULL", "queue": queue_name, "owner": "w", "lockTtl": 100})
    again = await conn.request({"cmd": "PULL", "queue": queue_name, "owner": "w2", "timeout": 3000})
    assert again["job"]["id"] == job_id and again["job"]["attempts"] == 1
    assert again["job"]["stallCount"] == 1
    late = await conn.request({"cmd": "ACK", "id": job_id, "token": first["token"]})
    assert late["error"] == f"Invalid or expired lock token for job {job_id}"
    assert (await conn.request({"cmd": "ACK", "id": job_id, "token": again["token"]}))["ok"]


async def test_ttl_expired_job_is_never_delivered(conn: Connection, queue_name: str) -> None:
    await push(conn, queue_name, "stale", ttl=1, timestamp=1000)
    fresh = await push(conn, queue_name, "fresh")
    assert (await conn.request({"cmd": "PULL", "queue": queue_name}))["job"]["id"] == fresh


async def test_count_counts_only_queued_jobs(conn: Connection, queue_name: str) -> None:
    await push(conn, queue_name, "act")
    await conn.request({"cmd": "PULL", "queue": queue_name})
    await push(conn, queue_name, "w")
    await push(conn, queue_name, "p", priority=5)
    await push(conn, queue_name, "d", delay=60000)
    assert (await conn.request({"cmd": "Count", "queue": queue_name}))["count"] == 3


async def test_paused_queue_counts_ready_jobs_as_paused(conn: Connection, queue_name: str) -> None:
    await push(conn, queue_name, "w")
    await push(conn, queue_name, "p", priority=4)
    await push(conn, queue_name, "d", delay=60000)
    await conn.request({"cmd": "Pause", "queue": queue_name})
    assert (await conn.request({"cmd": "IsPaused", "queue": queue_name}))["paused"] is True
    counts = (await conn.request({"cmd": "GetJobCounts", "queue": queue_name}))["counts"]
    assert (counts["waiting"], counts["prioritized"], counts["paused"], counts["delayed"]) == (0, 0, 2, 1)
    assert (await conn.request({"cmd": "PULL", "queue": queue_name}))["job"] is None
    waiting = conn.request_nowait({"cmd": "PULL", "queue": queue_name, "timeout": 3000})
    await asyncio.sleep(0.05)
    await conn.request({"cmd": "Resume", "queue": queue_name})
    assert (await asyncio.wait_for(waiting, 2))["job"]["name"] == "p"
