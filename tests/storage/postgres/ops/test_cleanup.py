"""Drain, Obliterate and Clean in PostgreSQL mode: the memory engine's replies, ids and order."""
from __future__ import annotations

import time
from typing import Any

import pytest

from bunqueue._testbase.twins import Twins

pytestmark = pytest.mark.usefixtures("postgres")


def pull_both(twins: Twins, queue: str) -> tuple[dict[str, Any], dict[str, Any]]:
    memory, postgres = twins.both({"cmd": "PULL", "queue": queue, "owner": "w"})
    assert memory["job"]["name"] == postgres["job"]["name"], (memory, postgres)
    return memory, postgres


def ack_both(twins: Twins, pulled: tuple[dict[str, Any], dict[str, Any]]) -> None:
    memory, postgres = pulled
    assert twins.memory.call({"cmd": "ACK", "id": memory["job"]["id"], "token": memory["token"]}) == {"ok": True}
    assert twins.postgres.call({"cmd": "ACK", "id": postgres["job"]["id"], "token": postgres["token"]}) == {"ok": True}


def names(twins: Twins, queue: str) -> list[str]:
    pulled = twins.same({"cmd": "PULLB", "queue": queue, "count": 50, "owner": "w"})
    return [job["name"] for job in pulled["jobs"]]


def test_drain_removes_queued_jobs_and_leaves_running_and_finished_ones(twins: Twins) -> None:
    q = "cl-drain"
    twins.same({"cmd": "PUSHB", "queue": q, "jobs": [
        {"name": "a", "data": 1}, {"name": "b", "data": 2}, {"name": "c", "data": 3, "delay": 60000},
        {"name": "d", "data": 4},
    ]})
    twins.same({"cmd": "PUSH", "queue": "cl-drain-other", "name": "x", "data": 1})
    ack_both(twins, pull_both(twins, q))
    running = pull_both(twins, q)
    assert twins.same({"cmd": "Drain", "queue": q}) == {"ok": True, "count": 2}
    assert twins.same({"cmd": "Drain", "queue": q}) == {"ok": True, "count": 0}
    assert twins.same({"cmd": "Drain", "queue": "cl-never"}) == {"ok": True, "count": 0}
    assert names(twins, q) == []
    assert names(twins, "cl-drain-other") == ["x"]
    # The running job is still running: its worker acks it.
    ack_both(twins, running)


def test_clean_removes_the_oldest_queued_jobs_up_to_the_limit(twins: Twins) -> None:
    q = "cl-queued"
    twins.same({"cmd": "PUSHB", "queue": q, "jobs": [{"name": f"j{i}", "data": i} for i in range(3)]})
    time.sleep(0.05)
    twins.same({"cmd": "PUSHB", "queue": q, "jobs": [{"name": f"k{i}", "data": i, "delay": 60000} for i in range(2)]})
    time.sleep(0.05)
    cleaned = twins.same({"cmd": "Clean", "queue": q, "grace": 30, "state": "wait", "limit": 2})
    # The first PUSHB's jobs share their creation time: ties go by id.
    assert cleaned == {"ok": True, "count": 2, "ids": sorted(twins.postgres_ids[:3])[:2]}
    cleaned = twins.same({"cmd": "Clean", "queue": q, "grace": 30})
    assert cleaned["count"] == 3
    assert twins.same({"cmd": "Clean", "queue": q, "grace": 0}) == {"ok": True, "count": 0, "ids": []}
    assert names(twins, q) == []


def test_clean_of_completed_jobs_ages_them_from_completion(twins: Twins) -> None:
    q = "cl-completed"
    twins.same({"cmd": "PUSHB", "queue": q, "jobs": [{"name": f"j{i}", "data": i} for i in range(3)]})
    ack_both(twins, pull_both(twins, q))
    ack_both(twins, pull_both(twins, q))
    assert twins.same({"cmd": "Clean", "queue": q, "grace": 60000, "state": "completed"})["count"] == 0
    time.sleep(0.05)
    cleaned = twins.same({"cmd": "Clean", "queue": q, "grace": 10, "state": "completed", "limit": 1})
    assert cleaned == {"ok": True, "count": 1, "ids": [twins.postgres_ids[0]]}
    assert twins.same({"cmd": "Clean", "queue": q, "grace": 10, "state": "completed"})["count"] == 1
    assert names(twins, q) == ["j2"]


def test_clean_answers_bad_and_empty_requests_as_in_memory(twins: Twins) -> None:
    q = "cl-bad"
    twins.same({"cmd": "PUSH", "queue": q, "name": "a", "data": 1})
    for frame in (
        {"grace": 0, "state": "failed"}, {"grace": 0, "state": "bogus"}, {"grace": 0, "limit": 0},
        {"grace": "x"}, {}, {"grace": 0, "limit": -1}, {"grace": 0, "state": 3},
        {"grace": 60000, "limit": 1e308}, {"grace": 60000, "limit": 2**63}, {"grace": 1e308},
    ):
        twins.same({"cmd": "Clean", "queue": q, **frame})
    assert twins.same({"cmd": "Clean", "queue": "cl-never", "grace": 0}) == {"ok": True, "count": 0, "ids": []}
    # A grace far in the future makes every queued job old enough.
    assert twins.same({"cmd": "Clean", "queue": q, "grace": -1e308, "limit": 2**63})["count"] == 1
    assert names(twins, q) == []


def test_obliterate_removes_the_queue_and_its_controls(twins: Twins) -> None:
    q = "cl-gone"
    twins.same({"cmd": "PUSHB", "queue": q, "jobs": [{"name": f"j{i}", "data": i} for i in range(3)]})
    done = pull_both(twins, q)
    ack_both(twins, done)
    running = pull_both(twins, q)
    twins.same({"cmd": "Pause", "queue": q})
    twins.same({"cmd": "SetConcurrency", "queue": q, "limit": 1})
    twins.same({"cmd": "RateLimit", "queue": q, "limit": 5})
    assert twins.same({"cmd": "Obliterate", "queue": q}) == {"ok": True}
    assert twins.same({"cmd": "Obliterate", "queue": "cl-never"}) == {"ok": True}
    assert twins.same({"cmd": "IsPaused", "queue": q}) == {"ok": True, "paused": False}
    limits = twins.same({"cmd": "GetQueueLimits", "queue": q})["data"]["limits"]
    assert limits == {"rateLimit": None, "rateLimitTtl": -2, "concurrencyLimit": None, "maxed": False}
    # The running job's worker finds no job to ack.
    memory, postgres = running
    refused = twins.memory.call({"cmd": "ACK", "id": memory["job"]["id"], "token": memory["token"]})
    assert refused["ok"] is False
    assert twins.postgres.call({"cmd": "ACK", "id": postgres["job"]["id"], "token": postgres["token"]}) == {
        "ok": False, "error": refused["error"].replace(memory["job"]["id"], postgres["job"]["id"])}
    twins.same({"cmd": "PUSH", "queue": q, "name": "new", "data": 1})
    assert names(twins, q) == ["new"]
