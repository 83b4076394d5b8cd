"""The queries of a PostgreSQL broker (GetJob, GetState, GetResult, GetJobCounts, Count, GetJobByCustomId,
GetProgress, WaitJob) answer as the memory engine does, and read what another broker of the namespace did."""
from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any

import asyncpg
import pytest

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.postgres import PostgresServer
from bunqueue._testbase.server import ServerProcess
from bunqueue._testbase.twins import Twins
from tests.storage.postgres.ops.conftest import postgres_broker

pytestmark = pytest.mark.usefixtures("postgres")

Reply = dict[str, Any]
LOCK = 60_000


def pause_in_database(postgres: PostgresServer, server: ServerProcess, queue: str) -> None:
    """The paused flag as the queue-control family keeps it, written straight to the database."""
    async def write() -> None:
        conn = await asyncpg.connect(postgres.url())
        try:
            await conn.execute(
                "INSERT INTO bunqueue_queues (namespace, queue, paused) VALUES ($1, $2, true)"
                " ON CONFLICT (namespace, queue) DO UPDATE SET paused = true",
                server.env["BUNQUEUE_POSTGRES_NAMESPACE"], queue,
            )
        finally:
            await conn.close()
    asyncio.run(write())


def pull(twins: Twins, queue: str) -> tuple[Reply, Reply]:
    """One leased PULL on each side, the replies asserted alike; each side's reply keeps its own token."""
    frame = {"cmd": "PULL", "queue": queue, "owner": "w1", "lockTtl": LOCK}
    memory, postgres = twins.both(frame)
    assert twins.postgres_names(postgres) == twins.memory_names(memory), (memory, postgres)
    assert memory["job"] is not None
    return memory, postgres


def settle(twins: Twins, pulled: tuple[Reply, Reply], frame: Reply) -> Reply:
    """``frame`` (an ACK or FAIL) for the job each side pulled, with that side's token; the replies alike."""
    memory_pull, postgres_pull = pulled
    memory = twins.memory.call({**frame, "id": memory_pull["job"]["id"], "token": memory_pull["token"]})
    postgres = twins.postgres.call({**frame, "id": postgres_pull["job"]["id"], "token": postgres_pull["token"]})
    assert twins.postgres_names(postgres) == twins.memory_names(memory), (memory, postgres)
    return postgres


def test_get_job_state_and_result_through_a_job_life(twins: Twins) -> None:
    q = "qr-life"
    twins.same({"cmd": "PUSH", "queue": q, "data": {"n": 1}, "name": "first"})
    twins.same({"cmd": "PUSH", "queue": q, "data": 2, "priority": 7})
    twins.same({"cmd": "PUSH", "queue": q, "data": 3, "delay": 60_000})
    twins.same({"cmd": "PUSH", "queue": q, "data": 4, "maxAttempts": 1})
    for k in range(4):
        twins.same({"cmd": "GetJob", "id": f"${k}"})
        twins.same({"cmd": "GetState", "id": f"${k}"})
    running = pull(twins, q)  # the prioritized job, $1
    twins.same({"cmd": "GetJob", "id": "$1"})
    twins.same({"cmd": "GetState", "id": "$1"})
    assert settle(twins, running, {"cmd": "ACK", "result": {"done": [1, "two"]}}) == {"ok": True}
    view = twins.same({"cmd": "GetJob", "id": "$1"})["job"]
    assert view["state"] == "completed" and view["returnvalue"] == {"done": [1, "two"]}
    assert [entry["state"] for entry in view["timeline"]] == ["prioritized", "active", "completed"]
    assert view["attempts"] == 0 and view["completedAt"] is not None
    assert twins.same({"cmd": "GetResult", "id": "$1"})["result"] == {"done": [1, "two"]}
    twins.same({"cmd": "GetState", "id": "$1"})
    pull(twins, q)  # $0, left running
    failing = pull(twins, q)  # $3, one attempt only
    settle(twins, failing, {"cmd": "FAIL", "error": "boom"})
    assert twins.same({"cmd": "GetState", "id": "$3"})["state"] == "failed"
    assert twins.same({"cmd": "GetJobCounts", "queue": q})["counts"] == {
        "waiting": 0, "prioritized": 0, "delayed": 1, "active": 1, "completed": 1, "failed": 1,
        "waiting-children": 0, "paused": 0,
    }
    assert twins.same({"cmd": "Count", "queue": q})["count"] == 1


def test_unknown_jobs_and_queues(twins: Twins) -> None:
    for frame in (
        {"cmd": "GetJob", "id": "qr-no-such-job"}, {"cmd": "GetJob", "id": 12}, {"cmd": "GetJob"},
        {"cmd": "GetState", "id": "qr-no-such-job"}, {"cmd": "GetState"},
        {"cmd": "GetResult", "id": "qr-no-such-job"}, {"cmd": "GetJobByCustomId", "customId": "qr-nothing"},
        {"cmd": "GetJobByCustomId", "customId": 5}, {"cmd": "GetJobCounts", "queue": "qr-never-used"},
        {"cmd": "Count", "queue": "qr-never-used"}, {"cmd": "GetJobCounts", "queue": "bad queue!"},
        {"cmd": "Count"}, {"cmd": "GetProgress", "id": "qr-no-such-job"}, {"cmd": "WaitJob", "id": "qr-nope"},
    ):
        twins.same(frame)


def test_a_due_delayed_job_reads_as_waiting_and_becomes_claimable(twins: Twins) -> None:
    q = "qr-due"
    twins.same({"cmd": "PUSH", "queue": q, "data": 1, "delay": 150})
    twins.same({"cmd": "PUSH", "queue": q, "data": 2, "delay": 150, "priority": 3})
    assert twins.same({"cmd": "GetJobCounts", "queue": q})["counts"]["delayed"] == 2
    time.sleep(0.3)
    assert twins.same({"cmd": "GetState", "id": "$0"})["state"] == "waiting"
    assert twins.same({"cmd": "GetJob", "id": "$1"})["job"]["timeline"][-1]["state"] == "delayed"
    counts = twins.same({"cmd": "GetJobCounts", "queue": q})["counts"]
    assert (counts["waiting"], counts["prioritized"], counts["delayed"]) == (1, 1, 0)
    assert pull(twins, q)[1]["job"]["data"] == 2


def test_custom_ids_and_progress(twins: Twins) -> None:
    q = "qr-custom"
    custom = f"qr-custom-{uuid.uuid4().hex[:8]}"
    twins.same({"cmd": "PUSH", "queue": q, "data": 1, "jobId": custom})
    twins.same({"cmd": "PUSH", "queue": q, "data": 2})
    assert twins.same({"cmd": "GetJobByCustomId", "customId": custom})["job"]["customId"] == custom
    twins.same({"cmd": "GetJobByCustomId", "customId": "$1"})
    twins.same({"cmd": "GetProgress", "id": custom})
    twins.same({"cmd": "GetProgress", "id": "$1"})
    pull(twins, q)
    twins.same({"cmd": "GetProgress", "id": custom})
    twins.same({"cmd": "GetJobByCustomId", "customId": custom})


def test_counts_of_a_paused_queue(twins: Twins, postgres: PostgresServer, pg_server: ServerProcess) -> None:
    q = "qr-paused"
    twins.same({"cmd": "PUSH", "queue": q, "data": 1})
    twins.same({"cmd": "PUSH", "queue": q, "data": 2, "priority": 4})
    twins.same({"cmd": "PUSH", "queue": q, "data": 3, "delay": 60_000})
    twins.same({"cmd": "PUSH", "queue": q, "data": 4})
    pull(twins, q)
    twins.memory.call({"cmd": "Pause", "queue": q})
    pause_in_database(postgres, pg_server, q)
    assert twins.same({"cmd": "GetJobCounts", "queue": q})["counts"] == {
        "waiting": 0, "prioritized": 0, "delayed": 1, "active": 1, "completed": 0, "failed": 0,
        "waiting-children": 0, "paused": 2,
    }
    twins.same({"cmd": "Count", "queue": q})
    twins.same({"cmd": "GetJobs", "queue": q, "state": "paused"})
    twins.same({"cmd": "GetJobs", "queue": q, "state": ["waiting", "delayed"]})
    twins.same({"cmd": "GetJobs", "queue": q})


def test_wait_job_answers_as_in_memory(twins: Twins) -> None:
    q = "qr-wait"
    twins.same({"cmd": "PUSH", "queue": q, "data": 1})
    assert twins.same({"cmd": "WaitJob", "id": "$0", "timeout": 100}) == {"ok": True, "completed": False}
    settle(twins, pull(twins, q), {"cmd": "ACK", "result": [7]})
    assert twins.same({"cmd": "WaitJob", "id": "$0", "timeout": 100}) == {
        "ok": True, "completed": True, "result": [7]}
    twins.same({"cmd": "WaitJob", "id": "$0", "timeout": "soon"})


def test_another_broker_finds_counts_and_waits_on_the_jobs_of_the_namespace(postgres: PostgresServer) -> None:
    namespace = f"qr-two-{uuid.uuid4().hex[:10]}"
    first = postgres_broker(postgres, namespace)
    second = postgres_broker(postgres, namespace)
    a, b = RawClient(first.addr), RawClient(second.addr)
    try:
        pushed = a.ok({"cmd": "PUSH", "queue": "two", "data": {"x": 1}, "jobId": "two-custom"})["id"]
        delayed = a.ok({"cmd": "PUSH", "queue": "two", "data": 2, "delay": 200})["id"]
        assert b.ok({"cmd": "GetJob", "id": pushed})["job"]["data"] == {"x": 1}
        assert b.ok({"cmd": "GetJobByCustomId", "customId": "two-custom"})["job"]["id"] == pushed
        assert b.ok({"cmd": "GetState", "id": delayed})["state"] == "delayed"
        assert b.ok({"cmd": "Count", "queue": "two"})["count"] == 2
        waited: list[Reply] = []
        waiter = threading.Thread(target=lambda: waited.append(
            RawClient(second.addr, timeout=10).call({"cmd": "WaitJob", "id": pushed, "timeout": 5000})))
        waiter.start()
        job = a.ok({"cmd": "PULL", "queue": "two", "owner": "w", "lockTtl": LOCK})
        assert job["job"]["id"] == pushed
        a.ok({"cmd": "ACK", "id": pushed, "token": job["token"], "result": "from-a"})
        waiter.join(10)
        assert waited == [{"ok": True, "completed": True, "result": "from-a"}]
        # The delayed job comes due on the database's clock and is claimable on the other broker.
        claimed = b.ok({"cmd": "PULL", "queue": "two", "owner": "w", "lockTtl": LOCK, "timeout": 3000})
        assert claimed["job"]["id"] == delayed
        counts = a.ok({"cmd": "GetJobCounts", "queue": "two"})["counts"]
        assert (counts["active"], counts["completed"], counts["delayed"]) == (1, 1, 0)
    finally:
        a.close()
        b.close()
        first.stop()
        second.stop()
