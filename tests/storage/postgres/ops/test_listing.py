"""The listings of a PostgreSQL broker (GetJobs, GetCountsPerPriority, ListQueues) answer as the memory
engine does, and list what another broker of the namespace pushed."""
from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.postgres import PostgresServer
from bunqueue._testbase.twins import Twins
from tests.storage.postgres.ops.conftest import postgres_broker
from tests.storage.postgres.ops.test_queries import pull, settle

pytestmark = pytest.mark.usefixtures("postgres")


def _mixed_queue(twins: Twins, q: str) -> None:
    """Waiting, prioritized, delayed, active and completed jobs on both sides, and a failed one (which only
    the job family's FAIL shows alike), with custom ids so that creation-time ties break alike (by id)."""
    prefix = uuid.uuid4().hex[:8]
    for n, extra in enumerate((
        {}, {"priority": 2}, {"delay": 60_000}, {}, {"priority": 9}, {"maxAttempts": 1, "priority": 10},
        {"lifo": True}, {"delay": 30_000, "priority": 1},
    )):
        twins.same({"cmd": "PUSH", "queue": q, "data": n, "jobId": f"{prefix}-{n}", **extra})
        time.sleep(0.002)
    settle(twins, pull(twins, q), {"cmd": "FAIL", "error": "no"})
    settle(twins, pull(twins, q), {"cmd": "ACK", "result": {"r": 1}})
    pull(twins, q)


def test_get_jobs_by_state_with_paging_and_order(twins: Twins) -> None:
    q = "ls-mixed"
    _mixed_queue(twins, q)
    for state in ("waiting", "prioritized", "delayed", "active", "completed", "paused", "waiting-children",
                  "unknown-state", ["waiting", "delayed"], ["completed", "active"], ["prioritized", "nothing"]):
        twins.same({"cmd": "GetJobs", "queue": q, "state": state})
    listed = twins.same({"cmd": "GetJobs", "queue": q, "state": "completed"})["jobs"]
    assert [job["returnvalue"] for job in listed] == [{"r": 1}]
    # Every job, and the failed one among them: compared by id, name, state and order.
    memory, postgres = twins.both({"cmd": "GetJobs", "queue": q})
    assert _outline(twins.postgres_names(postgres)) == _outline(twins.memory_names(memory))
    assert [job["state"] for job in _outline(postgres)].count("failed") == 1
    for state in ("failed", ["failed", "active"], []):
        memory, postgres = twins.both({"cmd": "GetJobs", "queue": q, "state": state})
        assert _outline(twins.postgres_names(postgres)) == _outline(twins.memory_names(memory)) != []
    for paging in (
        {"limit": 3}, {"limit": 3, "offset": 2}, {"limit": 3, "asc": False}, {"offset": 6, "limit": 5},
        {"offset": -3, "limit": 2}, {"offset": -20, "limit": 30}, {"offset": 2, "limit": -1}, {"limit": 0},
        {"offset": 100}, {"limit": 2.7, "offset": 1.5}, {"asc": False, "state": ["waiting", "prioritized"]},
        {"limit": "x"}, {"state": 5},
    ):
        memory, postgres = twins.both({"cmd": "GetJobs", "queue": q, **paging})
        assert _outline(twins.postgres_names(postgres)) == _outline(twins.memory_names(memory))


def _outline(reply: dict[str, Any]) -> list[dict[str, Any]] | dict[str, Any]:
    """A GetJobs reply by what the listing decides (which jobs, in which order, in which state); a
    refusal whole."""
    if not reply.get("ok"):
        return reply
    return [{key: job[key] for key in ("id", "name", "state", "data")} for job in reply["jobs"]]


def test_counts_per_priority_in_the_reference_key_order(twins: Twins) -> None:
    q = "ls-priorities"
    for priority in (5, 0, -2, 5, 2.5, 1, -2, 0, -0.5):
        twins.same({"cmd": "PUSH", "queue": q, "data": 1, "priority": priority})
    twins.same({"cmd": "PUSH", "queue": q, "data": 1, "priority": 7, "delay": 60_000})
    pull(twins, q)
    counts = twins.same({"cmd": "GetCountsPerPriority", "queue": q})["counts"]
    assert list(counts) == ["0", "1", "5", "7", "-2", "2.5", "-0.5"]
    twins.same({"cmd": "GetCountsPerPriority", "queue": "ls-never-used"})
    twins.same({"cmd": "GetCountsPerPriority"})


def test_list_queues_first_used_first(twins: Twins) -> None:
    prefix = f"ls-q-{uuid.uuid4().hex[:6]}"
    for name in ("b", "a", "c"):
        twins.same({"cmd": "PUSH", "queue": f"{prefix}-{name}", "data": 1})
    settle(twins, pull(twins, f"{prefix}-a"), {"cmd": "ACK"})
    memory, postgres = twins.both({"cmd": "ListQueues"})
    mine = [[name for name in reply["queues"] if name.startswith(prefix)] for reply in (memory, postgres)]
    assert mine[0] == mine[1] == [f"{prefix}-b", f"{prefix}-a", f"{prefix}-c"]


def test_another_broker_lists_the_jobs_of_the_namespace(postgres: PostgresServer) -> None:
    namespace = f"ls-two-{uuid.uuid4().hex[:10]}"
    first = postgres_broker(postgres, namespace)
    second = postgres_broker(postgres, namespace)
    a, b = RawClient(first.addr), RawClient(second.addr)
    try:
        jobs = [{"data": n, "priority": n % 2} for n in range(4)]
        ids = a.ok({"cmd": "PUSHB", "queue": "shared", "jobs": jobs})["ids"]
        a.ok({"cmd": "PUSH", "queue": "other", "data": 1, "delay": 60_000})
        assert [job["id"] for job in b.ok({"cmd": "GetJobs", "queue": "shared", "state": "waiting"})["jobs"]] \
            == [ids[0], ids[2]]
        assert b.ok({"cmd": "GetCountsPerPriority", "queue": "shared"})["counts"] == {"0": 2, "1": 2}
        assert b.ok({"cmd": "ListQueues"})["queues"] == ["shared", "other"]
        assert b.ok({"cmd": "GetJobs", "queue": "other", "state": "delayed"})["jobs"][0]["data"] == 1
    finally:
        a.close()
        b.close()
        first.stop()
        second.stop()
