"""Monitoring in PostgreSQL mode: the queue-scoped replies equal memory's, the namespace-wide ones have
memory's fields with the database's counts, and the HTTP streams' periodic and per-queue events arrive."""
from __future__ import annotations

import asyncio
import json
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.postgres import PostgresServer
from bunqueue._testbase.server import ServerProcess
from bunqueue._testbase.twins import Twins
from tests.storage.postgres.ops.conftest import postgres_broker
from tests.storage.postgres.ops.test_events import sse_event, sse_stream

pytestmark = pytest.mark.usefixtures("postgres")


def work(client: RawClient, queue: str) -> None:
    """Four jobs pushed (one delayed, one prioritized), three pulled: one completed, one failed for good."""
    client.ok({"cmd": "PUSHB", "queue": queue, "jobs": [
        {"name": "a", "data": 1}, {"name": "b", "data": 2, "maxAttempts": 1},
        {"name": "c", "data": 3, "priority": 3}, {"name": "d", "data": 4, "delay": 60_000},
    ]})
    first, _, third = (client.ok({"cmd": "PULL", "queue": queue, "owner": "w", "lockTtl": 60_000}) for _ in range(3))
    assert (first["job"]["name"], third["job"]["name"]) == ("c", "b")
    client.ok({"cmd": "ACK", "id": first["job"]["id"], "token": first["token"], "result": 1})
    client.ok({"cmd": "FAIL", "id": third["job"]["id"], "token": third["token"], "error": "x"})


def test_queue_metrics_trim_events_and_storage_status_answer_as_in_memory(twins: Twins) -> None:
    for client in (twins.memory, twins.postgres):
        work(client, "mon-series")
    twins.same({"cmd": "Metrics", "queue": "mon-series", "type": "completed"})
    twins.same({"cmd": "Metrics", "queue": "mon-series", "type": "failed", "start": 0, "end": -1})
    twins.same({"cmd": "Metrics", "queue": "mon-none", "type": "completed"})
    twins.same({"cmd": "Metrics", "queue": "mon-series"})
    twins.same({"cmd": "Metrics", "type": "completed"})
    twins.same({"cmd": "TrimEvents", "queue": "mon-series", "maxLength": 2})
    twins.same({"cmd": "TrimEvents", "queue": "mon-series", "maxLength": -1})
    assert twins.same({"cmd": "StorageStatus"}) == {"ok": True, "data": {"diskFull": False, "error": None,
                                                                          "since": None}}
    assert twins.same({"cmd": "CompactMemory"}) == {"ok": True}


def test_dashboard_queue_answers_as_in_memory(twins: Twins) -> None:
    for client in (twins.memory, twins.postgres):
        client.ok({"cmd": "PUSHB", "queue": "mon-dash", "jobs": [
            {"name": "a", "data": 1}, {"name": "b", "data": 2, "priority": 2},
            {"name": "c", "data": 3, "delay": 60_000}, {"name": "e", "data": 5, "priority": 1.5},
        ]})
        client.ok({"cmd": "PULL", "queue": "mon-dash", "owner": "w", "lockTtl": 60_000})
    twins.same({"cmd": "DashboardQueue", "queue": "mon-dash"})
    twins.same({"cmd": "DashboardQueue", "queue": "mon-dash", "includeJobs": True, "jobsLimit": 1})
    twins.same({"cmd": "DashboardQueue", "queue": "mon-dash", "includeJobs": True})
    twins.same({"cmd": "DashboardQueue", "queue": "mon-none"})
    twins.same({"cmd": "DashboardQueue", "queue": "bad queue"})
    memory, postgres = twins.both({"cmd": "DashboardQueues"})
    rows = [[row for row in reply["data"]["queues"] if row["name"] == "mon-dash"] for reply in (memory, postgres)]
    assert rows[0] == rows[1] and len(rows[0]) == 1


def shape(value: Any) -> Any:
    """Field names and value kinds, not values."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(v) for v in value[:1]]
    return "num" if isinstance(value, (int, float)) and not isinstance(value, bool) else type(value).__name__


@pytest.fixture(scope="module")
def lone(postgres: PostgresServer) -> Iterator[ServerProcess]:
    """A broker alone in its namespace: its counts are the test's own."""
    proc = postgres_broker(postgres, f"mon-{uuid.uuid4().hex[:12]}")
    yield proc
    proc.stop()


def test_stats_metrics_and_overview_count_the_namespaces_jobs(server: ServerProcess, lone: ServerProcess) -> None:
    memory, client = RawClient(server.addr), RawClient(lone.addr)
    try:
        work(client, "mon-stats")
        stats = client.ok({"cmd": "Stats"})["stats"]
        assert {k: stats[k] for k in ("waiting", "active", "delayed", "completed", "failed")} == {
            "waiting": 0, "active": 1, "delayed": 1, "completed": 1, "failed": 1,
        }
        assert shape(stats) == shape(memory.ok({"cmd": "Stats"})["stats"])
        metrics = client.ok({"cmd": "Metrics"})["metrics"]
        assert {k: metrics[k] for k in ("totalPushed", "totalPulled", "totalCompleted", "totalFailed")} == {
            "totalPushed": 4, "totalPulled": 3, "totalCompleted": 1, "totalFailed": 1,
        }
        assert shape(metrics) == shape(memory.ok({"cmd": "Metrics"})["metrics"])
        overview = client.ok({"cmd": "DashboardOverview"})["data"]
        assert overview["stats"]["active"] == 1 and overview["stats"]["totalPushed"] == 4
        assert overview["collections"]["jobIndex"] == 4 and overview["collections"]["jobResults"] == 1
        expected = shape(memory.ok({"cmd": "DashboardOverview"})["data"])
        assert set(shape(overview)) == set(expected)
        assert shape(overview)["collections"] == expected["collections"]
        # The DLQ figures are left out: a job failed for good reaches the DLQ with the DLQ family.
        (row,) = client.ok({"cmd": "DashboardQueues"})["data"]["queues"]
        assert row == {"name": "mon-stats", "waiting": 0, "prioritized": 0, "delayed": 1, "active": 1,
                       "dlq": row["dlq"], "paused": False}
        text = client.ok({"cmd": "Prometheus"})["data"]["metrics"]
        assert 'bunqueue_queue_jobs_active{queue="mon-stats"} 1.0' in text
        assert "bunqueue_jobs_pushed_total 4.0" in text
        with urllib.request.urlopen(f"http://127.0.0.1:{lone.http_port}/health") as answer:
            health = json.load(answer)
        assert health["queues"] == {"waiting": 0, "active": 1, "delayed": 1, "completed": 1,
                                    "dlq": health["queues"]["dlq"]}
    finally:
        memory.close()
        client.close()


def test_a_stream_hears_queue_counts_read_from_the_database(lone: ServerProcess) -> None:
    client = RawClient(lone.addr)
    stream = sse_stream(lone, "/events")
    try:
        client.ok({"cmd": "PUSH", "queue": "mon-counts", "data": 1, "priority": 4})
        counts = sse_event(stream, "queue:counts")
        assert counts == {"queue": "mon-counts", "waiting": 0, "prioritized": 1, "active": 0, "completed": 0,
                          "failed": 0, "delayed": 0}
    finally:
        stream.close()
        client.close()


async def stats_snapshot(server: ServerProcess) -> dict[str, Any]:
    """The first ``stats:snapshot`` a subscribed WebSocket of ``server`` gets (the streams send one every 5 s)."""
    async with aiohttp.ClientSession(f"http://127.0.0.1:{server.http_port}") as http, http.ws_connect("/ws") as ws:
        await ws.send_str(json.dumps({"cmd": "Subscribe", "events": ["stats:snapshot"]}))
        assert json.loads(await ws.receive_str())["ok"] is True
        message: dict[str, Any] = json.loads(await asyncio.wait_for(ws.receive_str(), 8))
        assert message["event"] == "stats:snapshot"
        data: dict[str, Any] = message["data"]
        return data


async def test_the_periodic_stats_snapshot_reads_the_database(server: ServerProcess, lone: ServerProcess) -> None:
    client = RawClient(lone.addr)
    client.ok({"cmd": "PUSH", "queue": "mon-snap", "data": 1, "delay": 60_000})
    client.close()
    memory, postgres = await asyncio.gather(stats_snapshot(server), stats_snapshot(lone))
    assert postgres["queues"]["mon-snap"] == {"waiting": 0, "active": 0, "delayed": 1, "dlq": 0, "paused": False}
    assert shape(postgres) == {**shape(memory), "queues": shape(postgres["queues"])}
