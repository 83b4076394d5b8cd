"""Stats, Metrics (both forms), TrimEvents, Prometheus, CompactMemory and the dashboards over a real socket.

Counters are server-wide, so each test that checks exact figures starts a server of its own.
"""
from __future__ import annotations

import math
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bunqueue._testbase.frames import error_of, ok
from bunqueue._testbase.server import ServerProcess
from bunqueue.client import Connection, connect
from bunqueue.monitoring.prometheus import BACKUP_FAMILIES


@pytest.fixture
def own_server() -> Iterator[ServerProcess]:
    proc = ServerProcess(env={"RATE_LIMIT_MAX_REQUESTS": "0"}).start()
    yield proc
    proc.stop()


@pytest.fixture
async def c(own_server: ServerProcess) -> AsyncIterator[Connection]:
    conn = await connect(*own_server.addr)
    yield conn
    await conn.close()


async def known_sequence(c: Connection, queue: str) -> dict[str, str]:
    """5 pushes (one delayed), 5 pulls, 2 ACKs, a terminal FAIL and a retried one."""
    ids = (await ok(c, {"cmd": "PUSHB", "queue": queue, "jobs": [
        {"name": "a", "data": 1},
        {"name": "b", "data": 2, "maxAttempts": 1},
        {"name": "c", "data": 3, "maxAttempts": 2, "backoff": 0},
        {"name": "d", "data": 4},
        {"name": "e", "data": 5, "delay": 60_000},
    ]}))["ids"]
    names = dict(zip("abcde", ids))
    pulled = (await ok(c, {"cmd": "PULLB", "queue": queue, "count": 10}))["jobs"]
    assert [j["name"] for j in pulled] == ["a", "b", "c", "d"]
    await ok(c, {"cmd": "ACK", "id": names["a"]})
    await ok(c, {"cmd": "FAIL", "id": names["b"], "error": "terminal"})
    await ok(c, {"cmd": "FAIL", "id": names["c"], "error": "retried"})
    again = (await ok(c, {"cmd": "PULL", "queue": queue}))["job"]
    assert again["id"] == names["c"]
    await ok(c, {"cmd": "ACK", "id": names["c"]})
    return names


async def test_counters_after_a_known_sequence(c: Connection) -> None:
    stats = (await ok(c, {"cmd": "Stats"}))["stats"]
    assert {k: stats[k] for k in ("waiting", "active", "delayed", "dlq", "completed", "failed")} == dict.fromkeys(
        ("waiting", "active", "delayed", "dlq", "completed", "failed"), 0)
    await known_sequence(c, "mon")
    stats = (await ok(c, {"cmd": "Stats"}))["stats"]
    assert {k: stats[k] for k in ("waiting", "active", "delayed", "dlq", "completed", "failed")} == {
        "waiting": 0, "active": 1, "delayed": 1, "dlq": 1, "completed": 2, "failed": 1}
    assert stats["uptime"] >= 0 and stats["pushPerSec"] >= 0 and stats["pullPerSec"] >= 0
    metrics = (await ok(c, {"cmd": "Metrics"}))["metrics"]
    assert {k: metrics[k] for k in ("totalPushed", "totalPulled", "totalCompleted", "totalFailed")} == {
        "totalPushed": 5, "totalPulled": 5, "totalCompleted": 2, "totalFailed": 1}
    assert metrics["activeConnections"] == 1
    assert metrics["memoryUsageMb"] > 1 and metrics["sqliteSizeMb"] == 0
    assert metrics["avgLatencyMs"] > 0 and metrics["avgProcessingMs"] > 0


async def test_a_duplicate_push_is_not_counted(c: Connection) -> None:
    await ok(c, {"cmd": "PUSH", "queue": "dup", "name": "a", "data": 1, "jobId": "same"})
    await ok(c, {"cmd": "PUSH", "queue": "dup", "name": "a", "data": 1, "jobId": "same"})
    await ok(c, {"cmd": "PUSHB", "queue": "dup", "jobs": [{"name": "a", "data": 1, "uniqueKey": "k"}] * 3})
    assert (await ok(c, {"cmd": "Metrics"}))["metrics"]["totalPushed"] == 2


async def test_queue_metrics_minute_buckets(c: Connection) -> None:
    await known_sequence(c, "qm")
    completed = (await ok(c, {"cmd": "Metrics", "queue": "qm", "type": "completed"}))["data"]
    assert completed["data"] == [2] and completed["count"] == 1
    assert completed["meta"]["count"] == 2 and completed["meta"]["prevCount"] == 2
    assert completed["meta"]["prevTS"] > 1.7e12
    failed = (await ok(c, {"cmd": "Metrics", "queue": "qm", "type": "failed", "start": 0, "end": -1}))["data"]
    assert failed["data"] == [1] and failed["meta"]["count"] == 1
    past_end = (await ok(c, {"cmd": "Metrics", "queue": "qm", "type": "failed", "start": 1}))["data"]
    assert past_end == {"meta": failed["meta"], "data": [], "count": 1}
    assert "metrics" in await ok(c, {"cmd": "Metrics", "start": 0, "end": 3}), "only queue or type select the form"
    empty = (await ok(c, {"cmd": "Metrics", "queue": "other", "type": "completed"}))["data"]
    assert empty == {"meta": {"count": 0, "prevTS": 0, "prevCount": 0}, "data": [], "count": 0}


@pytest.mark.parametrize(("cmd", "error"), [
    ({"queue": "qm"}, "Metrics type must be 'completed' or 'failed'"),
    ({"queue": "qm", "type": "waiting"}, "Metrics type must be 'completed' or 'failed'"),
    ({"type": "completed"}, "Metrics queue is required"),
    ({"queue": 5, "type": "completed"}, "Metrics queue is required"),
    ({"queue": None}, "Metrics queue is required"),
    ({"queue": "bad q", "type": "completed"}, "Queue name contains invalid characters"),
    ({"queue": "qm", "type": "completed", "start": -1}, "start must be a non-negative safe integer"),
    ({"queue": "qm", "type": "completed", "start": 1.5}, "start must be a non-negative safe integer"),
    ({"queue": "qm", "type": "completed", "end": -2}, "end must be a non-negative safe integer"),
    ({"queue": "qm", "type": "completed", "end": "3"}, "end must be a non-negative safe integer"),
])
async def test_queue_metrics_validation(conn: Connection, cmd: dict[str, Any], error: str) -> None:
    assert await error_of(conn, {"cmd": "Metrics", **cmd}) == error


async def test_trim_events_reports_the_exact_removed_count(c: Connection) -> None:
    await known_sequence(c, "tr")
    # 5 pushed + 5 pulled + 2 completed + 1 terminal failure + a retried failure (failed, retried).
    assert (await ok(c, {"cmd": "TrimEvents", "queue": "tr", "maxLength": 10}))["data"] == {"removed": 5}
    assert (await ok(c, {"cmd": "TrimEvents", "queue": "tr", "maxLength": 10}))["data"] == {"removed": 0}
    await ok(c, {"cmd": "PUSH", "queue": "tr", "name": "x", "data": 1})
    assert (await ok(c, {"cmd": "TrimEvents", "queue": "tr", "maxLength": 0}))["data"] == {"removed": 11}
    assert (await ok(c, {"cmd": "TrimEvents", "queue": "never", "maxLength": 0}))["data"] == {"removed": 0}


async def test_trim_events_counts_every_lifecycle_event(c: Connection) -> None:
    """Each event the reference journals counts once, whether anyone listens or not."""

    async def removed(queue: str) -> int:
        reply = await ok(c, {"cmd": "TrimEvents", "queue": queue, "maxLength": 0})
        return int(reply["data"]["removed"])

    async def push(queue: str, **options: Any) -> str:
        return str((await ok(c, {"cmd": "PUSH", "queue": queue, "name": "n", "data": {}, **options}))["id"])

    await push("te-progress")
    job = (await ok(c, {"cmd": "PULL", "queue": "te-progress"}))["job"]["id"]
    await ok(c, {"cmd": "Progress", "id": job, "progress": 50})
    assert await removed("te-progress") == 3  # pushed, pulled, progress
    await ok(c, {"cmd": "Cancel", "id": await push("te-cancel")})
    assert await removed("te-cancel") == 2  # pushed, removed
    await push("te-dup", uniqueKey="k")
    await push("te-dup", uniqueKey="k")
    assert await removed("te-dup") == 2  # pushed, duplicated
    await push("te-delay")
    job = (await ok(c, {"cmd": "PULL", "queue": "te-delay"}))["job"]["id"]
    await ok(c, {"cmd": "MoveToDelayed", "id": job, "delay": 10000})
    assert await removed("te-delay") == 3  # pushed, pulled, delayed
    for cmd in ("Pause", "Pause", "Resume", "Resume"):
        await ok(c, {"cmd": cmd, "queue": "te-pause"})
    assert await removed("te-pause") == 4  # a repeated pause or resume is an event too


async def test_a_repeated_pause_is_heard_again(c: Connection, own_server: ServerProcess) -> None:
    listener = await connect(*own_server.addr)
    try:
        await ok(listener, {"cmd": "SubscribeEvents", "queue": "te-heard"})
        for cmd in ("Pause", "Pause", "Resume", "Resume"):
            await ok(c, {"cmd": cmd, "queue": "te-heard"})
        # Written to the listener before the answer to its later Ping.
        await ok(listener, {"cmd": "Ping"})
        heard = []
        while not listener.events.empty():
            frame = listener.events.get_nowait()
            heard.append((frame["event"]["eventType"], frame["event"]["jobId"]))
        assert heard == [("paused", ""), ("paused", ""), ("resumed", ""), ("resumed", "")]
        assert (await ok(c, {"cmd": "IsPaused", "queue": "te-heard"}))["paused"] is False
    finally:
        await listener.close()


@pytest.mark.parametrize(("cmd", "error"), [
    ({"queue": "tr"}, "maxLength must be a non-negative safe integer"),
    ({"queue": "tr", "maxLength": -1}, "maxLength must be a non-negative safe integer"),
    ({"queue": "tr", "maxLength": math.inf}, "maxLength must be a non-negative safe integer"),
    ({"queue": "bad q", "maxLength": 1}, "Queue name contains invalid characters"),
    ({"maxLength": 1}, "Queue name is required"),
])
async def test_trim_events_validation(conn: Connection, cmd: dict[str, Any], error: str) -> None:
    assert await error_of(conn, {"cmd": "TrimEvents", **cmd}) == error


# The reference's metric families (npm bunqueue 2.9.5, /prometheus); the S3 backup families report backups
# off. The SQLite size appears with a data file only.
REFERENCE_FAMILIES = {
    "bunqueue_jobs_waiting": "gauge", "bunqueue_jobs_prioritized": "gauge", "bunqueue_jobs_delayed": "gauge",
    "bunqueue_jobs_active": "gauge", "bunqueue_jobs_dlq": "gauge", "bunqueue_jobs_completed": "gauge",
    "bunqueue_jobs_pushed_total": "counter", "bunqueue_jobs_pulled_total": "counter",
    "bunqueue_jobs_completed_total": "counter", "bunqueue_jobs_failed_total": "counter",
    "bunqueue_uptime_seconds": "gauge", "bunqueue_cron_jobs_registered": "gauge",
    "bunqueue_workers_registered": "gauge", "bunqueue_workers_active": "gauge", "bunqueue_worker_active_jobs": "gauge",
    "bunqueue_worker_concurrency_slots": "gauge", "bunqueue_workers_processed_total": "counter",
    "bunqueue_workers_failed_total": "counter", "bunqueue_webhooks_registered": "gauge",
    "bunqueue_webhooks_enabled": "gauge", "bunqueue_storage_degraded": "gauge", "bunqueue_storage_disk_full": "gauge",
    "bunqueue_process_heap_used_bytes": "gauge", "bunqueue_process_heap_total_bytes": "gauge",
    "bunqueue_process_resident_memory_bytes": "gauge", "bunqueue_queue_jobs_waiting": "gauge",
    "bunqueue_queue_jobs_prioritized": "gauge", "bunqueue_queue_jobs_delayed": "gauge",
    "bunqueue_queue_jobs_active": "gauge", "bunqueue_queue_jobs_dlq": "gauge", "bunqueue_build_info": "gauge",
    "process_cpu_seconds_total": "counter", "process_start_time_seconds": "gauge",
    "process_resident_memory_bytes": "gauge", "process_heap_bytes": "gauge", "bunqueue_connections": "gauge",
    "bunqueue_queue_metrics_exported": "gauge", "bunqueue_queue_metrics_omitted": "gauge",
    "bunqueue_push_duration_seconds": "histogram", "bunqueue_pull_duration_seconds": "histogram",
    "bunqueue_ack_duration_seconds": "histogram",
    **{name: kind for name, kind, _ in BACKUP_FAMILIES},
}


def families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def sample(fams: dict[str, Any], family: str, name: str | None = None, **labels: str) -> float:
    for s in fams[family].samples:
        if s.name == (name or family) and all(s.labels.get(k) == v for k, v in labels.items()):
            return float(s.value)
    raise AssertionError(f"no sample {name or family} {labels}")


async def test_prometheus_exposition_parses(c: Connection) -> None:
    await known_sequence(c, "prom:q.1")
    await ok(c, {"cmd": "PUSH", "queue": "prom-2", "name": "p", "data": 1, "priority": 3})
    text = (await ok(c, {"cmd": "Prometheus"}))["data"]["metrics"]
    fams = families(text)
    declared = dict(line.split()[2:4] for line in text.splitlines() if line.startswith("# TYPE "))
    assert declared == REFERENCE_FAMILIES
    assert "# TYPE bunqueue_jobs_pushed_total counter" in text
    assert sample(fams, "bunqueue_jobs_pushed", "bunqueue_jobs_pushed_total") == 6
    assert sample(fams, "bunqueue_jobs_failed", "bunqueue_jobs_failed_total") == 1
    assert sample(fams, "bunqueue_queue_jobs_dlq", queue="prom:q.1") == 1
    assert sample(fams, "bunqueue_queue_jobs_prioritized", queue="prom-2") == 1
    assert sample(fams, "bunqueue_queue_metrics_exported") == 2
    assert sample(fams, "bunqueue_connections", transport="tcp") == 1
    assert sample(fams, "bunqueue_push_duration_seconds", "bunqueue_push_duration_seconds_count") >= 1


async def test_prometheus_caps_labelled_queues() -> None:
    proc = ServerProcess(env={"METRICS_MAX_QUEUES": "2"}).start()
    try:
        conn = await connect(*proc.addr)
        for name in ("c", "a", "b"):
            await ok(conn, {"cmd": "PUSH", "queue": name, "name": "x", "data": 1})
        fams = families((await ok(conn, {"cmd": "Prometheus"}))["data"]["metrics"])
        assert sorted(s.labels["queue"] for s in fams["bunqueue_queue_jobs_waiting"].samples) == ["a", "b"]
        assert sample(fams, "bunqueue_queue_metrics_omitted") == 1
        await conn.close()
    finally:
        proc.stop()


async def test_dashboards(c: Connection) -> None:
    await ok(c, {"cmd": "PUSHB", "queue": "dash", "jobs": [
        {"name": "a", "data": 1}, {"name": "b", "data": 2, "priority": 2}, {"name": "c", "data": 3, "delay": 60000},
    ] + [{"name": f"w{i}", "data": i} for i in range(55)]})
    assert (await ok(c, {"cmd": "PULL", "queue": "dash"}))["job"]["name"] == "b"
    data = (await ok(c, {"cmd": "DashboardOverview"}))["data"]
    assert {k: data["stats"][k] for k in ("waiting", "active", "delayed", "totalPushed", "totalPulled")} == {
        "waiting": 56, "active": 1, "delayed": 1, "totalPushed": 58, "totalPulled": 1}
    assert set(data) == {"stats", "throughput", "latency", "memory", "collections", "workers", "crons", "storage",
                         "timestamp"}
    assert data["collections"]["jobIndex"] == 58 and data["collections"]["processingTotal"] == 1
    assert data["collections"]["clientJobs"] == 1 and data["collections"]["clientJobsTotal"] == 1
    assert data["workers"] == {"total": 0, "active": 0, "list": []} and data["crons"] == []
    assert data["memory"]["rss"] > 0
    await ok(c, {"cmd": "Cron", "name": "dash-every", "queue": "dash", "repeatEvery": 60000, "priority": 3,
                 "maxLimit": 5})
    await ok(c, {"cmd": "Cron", "name": "dash-at", "queue": "dash", "schedule": "0 0 1 1 *", "timezone": "UTC"})
    crons = {cron["name"]: cron for cron in (await ok(c, {"cmd": "CronList"}))["crons"]}
    # The overview shows six fields of each cron, as the reference does; CronGet has the rest.
    listed = (await ok(c, {"cmd": "DashboardOverview"}))["data"]["crons"]
    assert listed == [
        {field: crons[name][field] for field in ("name", "queue", "schedule", "repeatEvery", "nextRun", "executions")}
        for name in ("dash-every", "dash-at")
    ]
    assert [(cron["schedule"], cron["repeatEvery"], cron["executions"]) for cron in listed] == [
        (None, 60000, 0), ("0 0 1 1 *", None, 0)]
    assert all(type(cron["nextRun"]) is float for cron in listed)
    await ok(c, {"cmd": "CronDelete", "name": "dash-every"})
    await ok(c, {"cmd": "CronDelete", "name": "dash-at"})
    queues = (await ok(c, {"cmd": "DashboardQueues"}))["data"]["queues"]
    assert queues == [{"name": "dash", "waiting": 56, "prioritized": 0, "delayed": 1, "active": 1, "dlq": 0,
                       "paused": False}]
    one = (await ok(c, {"cmd": "DashboardQueue", "queue": "dash"}))["data"]
    assert one["counts"]["waiting"] == 56 and one["counts"]["totalCompleted"] == 0 and "jobs" not in one
    assert one["priorityCounts"] == {"0": 57}
    capped = (await ok(c, {"cmd": "DashboardQueue", "queue": "dash", "includeJobs": True, "jobsLimit": 500}))
    jobs = capped["data"]["jobs"]
    assert (len(jobs["waiting"]), len(jobs["active"]), len(jobs["delayed"]), jobs["paused"]) == (50, 1, 1, [])
    assert set(jobs["active"][0]) == {"id", "priority", "createdAt", "runAt", "attempts", "progress"}
    first = (await ok(c, {"cmd": "DashboardQueue", "queue": "dash", "includeJobs": True, "jobsLimit": 1}))
    assert [j["priority"] for j in first["data"]["jobs"]["waiting"]] == [0]
    assert await error_of(c, {"cmd": "DashboardQueue"}) == "Queue name is required"
    bad = await error_of(c, {"cmd": "DashboardQueue", "queue": "dash", "includeJobs": "yes"})
    assert bad == "includeJobs must be a boolean"


async def test_compact_memory_keeps_every_job(own_server: ServerProcess, c: Connection) -> None:
    await ok(c, {"cmd": "PUSH", "queue": "keep", "name": "x", "data": 1})
    await ok(c, {"cmd": "Pause", "queue": "idle"})
    await ok(c, {"cmd": "Resume", "queue": "idle"})
    reply = await c.request({"cmd": "CompactMemory"})
    assert reply.pop("reqId") and reply == {"ok": True}
    assert (await ok(c, {"cmd": "Count", "queue": "keep"}))["count"] == 1
    assert (await ok(c, {"cmd": "PULL", "queue": "keep"}))["job"]["name"] == "x"
    await c.close()
    own_server.stop()
    assert "compacted memory: queues 1," in own_server.stderr()
