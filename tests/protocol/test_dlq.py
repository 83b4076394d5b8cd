"""The dead-letter queue over a real socket: Dlq (filter, count), GetDlqStats, RetryDlq, PurgeDlq,
RemoveDlqJob, RetryCompleted and Set/GetDlqConfig, with auto-retry, maxAge and maxEntries enforced."""
from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bunqueue._testbase.frames import call
from bunqueue.client import Connection


async def dead(conn: Connection, queue: str, *names: str, **opts: Any) -> list[str]:
    """Push jobs that fail straight into the DLQ (explicit FAIL with one attempt), in order."""
    jobs = [{"name": n, "data": n, "maxAttempts": 1, **opts} for n in names]
    ids = (await call(conn, {"cmd": "PUSHB", "queue": queue, "jobs": jobs}))["ids"]
    await call(conn, {"cmd": "PULLB", "queue": queue, "count": len(ids)})
    for job_id, name in zip(ids, names, strict=True):
        assert (await call(conn, {"cmd": "FAIL", "id": job_id, "error": f"e-{name}"}))["ok"]
    return list(ids)


async def dlq_names(conn: Connection, queue: str, **opts: Any) -> list[str]:
    reply = await call(conn, {"cmd": "Dlq", "queue": queue, **opts})
    assert reply["ok"], reply
    assert [e["job"]["id"] for e in reply["entries"]] == [j["id"] for j in reply["jobs"]]
    return [job["name"] for job in reply["jobs"]]


async def state(conn: Connection, job_id: str) -> str:
    return str((await call(conn, {"cmd": "GetState", "id": job_id}))["state"])


async def test_dlq_count_and_filter(conn: Connection, queue_name: str) -> None:
    await dead(conn, queue_name, "a", "b", "c")
    discarded = (await call(conn, {"cmd": "PUSH", "queue": queue_name, "name": "d"}))["id"]
    await call(conn, {"cmd": "Discard", "id": discarded})
    assert await dlq_names(conn, queue_name) == ["a", "b", "c", "d"]
    assert await dlq_names(conn, queue_name, count=2) == ["a", "b"]
    assert await dlq_names(conn, queue_name, count=-1) == []
    assert await dlq_names(conn, queue_name, filter={"reason": "unknown"}) == ["d"]
    assert await dlq_names(conn, queue_name, filter={"offset": 1, "limit": 2}) == ["b", "c"]
    assert await dlq_names(conn, queue_name, filter={"limit": 0}) == ["a", "b", "c", "d"]
    assert await dlq_names(conn, queue_name, filter={"olderThan": 1}) == []
    assert await dlq_names(conn, queue_name, filter={"newerThan": 1}, count=1) == ["a"]
    assert await dlq_names(conn, queue_name, filter={"retriable": True}) == []
    assert await dlq_names(conn, queue_name, filter={"expired": True}) == []


@pytest.mark.parametrize(
    ("cmd", "error"),
    [
        ({"cmd": "Dlq", "filter": 3}, "filter must be an object"),
        ({"cmd": "Dlq", "filter": {"reason": 1}}, "filter.reason must be a string"),
        ({"cmd": "Dlq", "filter": {"olderThan": "x"}}, "filter.olderThan must be a number"),
        ({"cmd": "Dlq", "filter": {"retriable": 1}}, "filter.retriable must be a boolean"),
        ({"cmd": "Dlq", "count": "2"}, "count must be a number"),
        ({"cmd": "RetryDlq", "jobId": 5}, "jobId must be a string"),
        ({"cmd": "RemoveDlqJob"}, "jobId must be a string"),
        ({"cmd": "RetryCompleted", "timestamp": float("nan")}, "timestamp must be a finite number"),
        ({"cmd": "SetDlqConfig"}, "config must be an object"),
        ({"cmd": "GetDlqStats"}, "Queue name is required"),
    ],
    ids=["filter", "reason", "olderThan", "retriable", "count", "jobId", "remove-jobId", "timestamp",
         "config", "queue"],
)
async def test_dlq_validation(conn: Connection, queue_name: str, cmd: dict[str, Any], error: str) -> None:
    if cmd["cmd"] != "GetDlqStats":
        cmd = {"queue": queue_name, **cmd}
    assert (await call(conn, cmd))["error"] == error


async def test_stats(conn: Connection, queue_name: str) -> None:
    await dead(conn, queue_name, "a", "b")
    stats = (await call(conn, {"cmd": "GetDlqStats", "queue": queue_name}))["data"]["stats"]
    assert stats["total"] == 2 and stats["byQueue"] == {queue_name: 2}
    assert stats["byReason"] == {"explicit_fail": 0, "max_attempts_exceeded": 2, "timeout": 0, "stalled": 0,
                                 "ttl_expired": 0, "worker_lost": 0, "unknown": 0}
    assert stats["oldestEntry"] <= stats["newestEntry"]
    assert (stats["pendingRetry"], stats["expired"]) == (0, 0)
    empty = (await call(conn, {"cmd": "GetDlqStats", "queue": queue_name + "-x"}))["data"]["stats"]
    assert (empty["total"], empty["oldestEntry"], empty["newestEntry"]) == (0, None, None)


async def test_retry_one_by_filter_and_capped(conn: Connection, queue_name: str) -> None:
    ids = await dead(conn, queue_name, "a", "b", "c", "d")
    assert await call(conn, {"cmd": "RetryDlq", "queue": queue_name, "jobId": ids[1]}) == {"ok": True, "count": 1}
    job = (await call(conn, {"cmd": "GetJob", "id": ids[1]}))["job"]
    assert (job["state"], job["attempts"], job["startedAt"], job["failedReason"]) == ("waiting", 0, None, "e-b")
    assert job["timeline"][-1]["state"] == "waiting"
    assert (await call(conn, {"cmd": "RetryDlq", "queue": queue_name, "jobId": ids[1]}))["count"] == 0
    assert (await call(conn, {"cmd": "RetryDlq", "queue": "other-" + queue_name, "jobId": ids[0]}))["count"] == 0
    capped = await call(conn, {"cmd": "RetryDlq", "queue": queue_name, "count": 1,
                               "filter": {"reason": "max_attempts_exceeded"}})
    assert capped["count"] == 1
    assert await dlq_names(conn, queue_name) == ["c", "d"]
    assert (await call(conn, {"cmd": "RetryDlq", "queue": queue_name}))["count"] == 2
    counts = (await call(conn, {"cmd": "GetJobCounts", "queue": queue_name}))["counts"]
    assert (counts["failed"], counts["waiting"]) == (0, 4)


async def test_retry_skips_a_job_whose_unique_key_was_taken(conn: Connection, queue_name: str) -> None:
    [job_id] = await dead(conn, queue_name, "a", uniqueKey="k")
    holder = (await call(conn, {"cmd": "PUSH", "queue": queue_name, "name": "new", "uniqueKey": "k"}))["id"]
    assert holder != job_id
    assert (await call(conn, {"cmd": "RetryDlq", "queue": queue_name}))["count"] == 0
    moved = await call(conn, {"cmd": "MoveToWait", "id": job_id})
    assert moved == {"ok": False, "error": "Failed job not in DLQ"}
    await call(conn, {"cmd": "Cancel", "id": holder})
    assert (await call(conn, {"cmd": "RetryDlq", "queue": queue_name}))["count"] == 1
    # The retried job owns the key again.
    again = (await call(conn, {"cmd": "PUSH", "queue": queue_name, "name": "dup", "uniqueKey": "k"}))["id"]
    assert again == job_id


async def test_purge_and_remove(conn: Connection, queue_name: str) -> None:
    ids = await dead(conn, queue_name, "a", "b", "c")
    await call(conn, {"cmd": "AddLog", "id": ids[0], "message": "x"})
    removed = await call(conn, {"cmd": "RemoveDlqJob", "queue": queue_name, "jobId": ids[0]})
    assert removed == {"ok": True, "data": {"removed": True}}
    again = await call(conn, {"cmd": "RemoveDlqJob", "queue": queue_name, "jobId": ids[0]})
    assert again == {"ok": True, "data": {"removed": False}}
    assert (await call(conn, {"cmd": "GetJob", "id": ids[0]}))["error"] == "Job not found"
    assert (await call(conn, {"cmd": "GetLogs", "id": ids[0]}))["data"]["count"] == 0
    assert await call(conn, {"cmd": "PurgeDlq", "queue": queue_name}) == {"ok": True, "count": 2}
    assert await call(conn, {"cmd": "PurgeDlq", "queue": queue_name}) == {"ok": True, "count": 0}
    assert [await state(conn, i) for i in ids] == ["unknown"] * 3


async def test_retry_completed(conn: Connection, queue_name: str) -> None:
    ids = (await call(conn, {"cmd": "PUSHB", "queue": queue_name,
                             "jobs": [{"name": n, "data": n} for n in ("a", "b", "c")]}))["ids"]
    await call(conn, {"cmd": "PULLB", "queue": queue_name, "count": 3})
    await call(conn, {"cmd": "ACKB", "ids": ids, "results": [1, 2, 3]})
    await call(conn, {"cmd": "Progress", "id": ids[0], "progress": 1})
    assert (await call(conn, {"cmd": "RetryCompleted", "queue": queue_name, "count": 0}))["count"] == 0
    assert (await call(conn, {"cmd": "RetryCompleted", "queue": queue_name, "timestamp": 1e12}))["count"] == 0
    assert (await call(conn, {"cmd": "RetryCompleted", "queue": queue_name, "id": "nope"}))["count"] == 0
    assert (await call(conn, {"cmd": "RetryCompleted", "queue": queue_name + "x", "id": ids[1]}))["count"] == 0
    assert (await call(conn, {"cmd": "RetryCompleted", "queue": queue_name, "id": ids[1]}))["count"] == 1
    job = (await call(conn, {"cmd": "GetJob", "id": ids[1]}))["job"]
    assert (job["state"], job["completedAt"], job["startedAt"], job["attempts"]) == ("waiting", None, None, 0)
    assert "returnvalue" not in job and "result" not in await call(conn, {"cmd": "GetResult", "id": ids[1]})
    assert (await call(conn, {"cmd": "RetryCompleted", "queue": queue_name, "count": 1}))["count"] == 1
    assert await state(conn, ids[0]) == "waiting" and await state(conn, ids[2]) == "completed"
    counts = (await call(conn, {"cmd": "GetJobCounts", "queue": queue_name}))["counts"]
    assert (counts["completed"], counts["waiting"]) == (1, 2)


async def test_config_defaults_merge_and_coercion(conn: Connection, queue_name: str) -> None:
    defaults = {"autoRetry": False, "autoRetryInterval": 3600000, "maxAutoRetries": 3, "maxAge": 604800000,
                "maxEntries": 10000}
    assert (await call(conn, {"cmd": "GetDlqConfig", "queue": queue_name}))["config"] == defaults
    sent = {"autoRetry": "yes", "autoRetryInterval": "5000", "maxAutoRetries": "abc", "maxAge": None,
            "maxEntries": 2.9}
    assert await call(conn, {"cmd": "SetDlqConfig", "queue": queue_name, "config": sent}) == {"ok": True}
    got = (await call(conn, {"cmd": "GetDlqConfig", "queue": queue_name}))["config"]
    assert got == defaults | {"autoRetryInterval": 5000, "maxAge": None, "maxEntries": 2}
    await call(conn, {"cmd": "SetDlqConfig", "queue": queue_name, "config": {"maxEntries": -3, "maxAge": -1}})
    got = (await call(conn, {"cmd": "GetDlqConfig", "queue": queue_name}))["config"]
    assert (got["maxEntries"], got["maxAge"]) == (1, 0)


async def test_max_entries_evicts_the_oldest(conn: Connection, queue_name: str) -> None:
    ids = await dead(conn, queue_name, "a", "b", "c")
    await call(conn, {"cmd": "SetDlqConfig", "queue": queue_name, "config": {"maxEntries": 2}})
    assert await dlq_names(conn, queue_name) == ["b", "c"]
    assert await state(conn, ids[0]) == "unknown"
    await dead(conn, queue_name, "d")
    assert await dlq_names(conn, queue_name) == ["c", "d"]
    assert (await call(conn, {"cmd": "GetJobCounts", "queue": queue_name}))["counts"]["failed"] == 2


async def test_max_age_expires_entries_on_time(conn: Connection, queue_name: str) -> None:
    await call(conn, {"cmd": "SetDlqConfig", "queue": queue_name, "config": {"maxAge": 150}})
    [job_id] = await dead(conn, queue_name, "old")
    entry = (await call(conn, {"cmd": "Dlq", "queue": queue_name}))["entries"][0]
    assert entry["expiresAt"] - entry["enteredAt"] == 150
    await asyncio.sleep(0.4)
    assert await dlq_names(conn, queue_name) == []
    assert await state(conn, job_id) == "unknown"


async def test_auto_retry_with_growing_interval(conn: Connection, queue_name: str) -> None:
    config = {"autoRetry": True, "autoRetryInterval": 100, "maxAutoRetries": 2}
    await call(conn, {"cmd": "SetDlqConfig", "queue": queue_name, "config": config})
    [job_id] = await dead(conn, queue_name, "flaky")
    first = (await call(conn, {"cmd": "Dlq", "queue": queue_name}))["entries"][0]
    assert first["nextRetryAt"] - first["enteredAt"] == 100
    pulled = await call(conn, {"cmd": "PULL", "queue": queue_name, "timeout": 2000})
    assert pulled["job"]["id"] == job_id and pulled["job"]["attempts"] == 0
    await call(conn, {"cmd": "FAIL", "id": job_id, "error": "again"})
    second = (await call(conn, {"cmd": "Dlq", "queue": queue_name}))["entries"][0]
    # The same DLQ generation: first entry time and expiry kept, one retry counted. Each retry waits
    # interval * 2^(retries - 1) after the previous one, as in the reference.
    assert (second["enteredAt"], second["expiresAt"], second["retryCount"]) == (
        first["enteredAt"], first["expiresAt"], 1)
    assert second["nextRetryAt"] - second["lastRetryAt"] == 100
    assert [a["error"] for a in second["attempts"]] == ["e-flaky", "again"]
    await call(conn, {"cmd": "PULL", "queue": queue_name, "timeout": 2000})
    await call(conn, {"cmd": "FAIL", "id": job_id, "error": "last"})
    third = (await call(conn, {"cmd": "Dlq", "queue": queue_name}))["entries"][0]
    assert (third["retryCount"], third["nextRetryAt"]) == (2, None)
    assert (await call(conn, {"cmd": "PULL", "queue": queue_name, "timeout": 400}))["job"] is None
    stats = (await call(conn, {"cmd": "GetDlqStats", "queue": queue_name}))["data"]["stats"]
    assert (stats["total"], stats["pendingRetry"]) == (1, 0)


async def test_turning_auto_retry_on_applies_to_later_entries(conn: Connection, queue_name: str) -> None:
    [before] = await dead(conn, queue_name, "before")
    config = {"autoRetry": True, "autoRetryInterval": 50}
    await call(conn, {"cmd": "SetDlqConfig", "queue": queue_name, "config": config})
    [after] = await dead(conn, queue_name, "after")
    pulled = await call(conn, {"cmd": "PULL", "queue": queue_name, "timeout": 2000})
    assert pulled["job"]["id"] == after
    assert await state(conn, before) == "failed"
