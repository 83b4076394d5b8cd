"""Monitoring commands: Stats, Metrics, TrimEvents, Prometheus, CompactMemory and the dashboards."""
from __future__ import annotations

import math
from typing import Any

from bunqueue import errors, options
from bunqueue._core.jobs import validate_queue_name
from bunqueue.broker.engine import Session
from bunqueue.broker.facade import Broker
from bunqueue.commands.queries import job_counts
from bunqueue.errors import CommandError
from bunqueue.monitoring import compaction, dashboard
from bunqueue.monitoring.counters import MinuteSeries
from bunqueue.monitoring.snapshot import MIB, process_memory, storage_size_bytes, totals

Reply = dict[str, Any]
MAX_SAFE_INTEGER = 2**53 - 1
# Fields that select the queue-scoped form of Metrics (present, even as nil, as the reference reads them).
_QUEUE_METRICS_FIELDS = ("queue", "type")


def handle_stats(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    counters = broker.counters
    t = totals(broker)
    rates = counters.throughput()
    return {
        "ok": True,
        "stats": {
            "waiting": t.waiting + t.prioritized,
            "active": t.active,
            "delayed": t.delayed,
            "dlq": t.dlq,
            "completed": t.completed,
            "failed": counters.failed,
            "uptime": counters.uptime_ms(),
            "pushPerSec": rates["pushPerSec"],
            "pullPerSec": rates["pullPerSec"],
        },
    }


def handle_metrics(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    if any(field in cmd for field in _QUEUE_METRICS_FIELDS):
        return _queue_metrics(broker, cmd)
    counters = broker.counters
    lat = counters.latency
    size = storage_size_bytes(broker)
    return {
        "ok": True,
        "metrics": {
            "totalPushed": counters.pushed,
            "totalPulled": counters.pulled,
            "totalCompleted": counters.completed,
            "totalFailed": counters.failed,
            "avgLatencyMs": round((lat["push"].average + lat["pull"].average) / 2, 2),
            "avgProcessingMs": round(lat["ack"].average, 2),
            "memoryUsageMb": process_memory().rss / MIB,
            "sqliteSizeMb": (size or 0) / MIB,
            "activeConnections": counters.connections,
        },
    }


def _queue_metrics(broker: Broker, cmd: dict[str, Any]) -> Reply:
    queue = cmd.get("queue")
    if type(queue) is not str:
        raise CommandError(errors.METRICS_QUEUE_REQUIRED)
    validate_queue_name(queue)
    kind = cmd.get("type")
    if kind != "completed" and kind != "failed":
        raise CommandError(errors.METRICS_TYPE)
    start = _safe_integer(cmd, "start", 0)
    end = -1 if cmd.get("end") == -1 else _safe_integer(cmd, "end", -1)
    qc = broker.counters.queues.get(queue)
    series = (qc.completed if kind == "completed" else qc.failed) if qc is not None else MinuteSeries()
    return {"ok": True, "data": series.view(start, end)}


def _safe_integer(cmd: dict[str, Any], field: str, default: int) -> int:
    """A non-negative safe integer argument (an integral float counts), or ``default`` when absent."""
    value = cmd.get(field)
    if value is None:
        return default
    if (
        type(value) is bool
        or not isinstance(value, (int, float))
        or (type(value) is float and (not math.isfinite(value) or not value.is_integer()))
        or not 0 <= value <= MAX_SAFE_INTEGER
    ):
        raise CommandError(errors.non_negative_safe_integer(field))
    return int(value)


def handle_trim_events(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    queue = options.queue_name(cmd)
    if cmd.get("maxLength") is None:
        raise CommandError(errors.non_negative_safe_integer("maxLength"))
    max_length = _safe_integer(cmd, "maxLength", 0)
    qc = broker.counters.queues.get(queue)
    return {"ok": True, "data": {"removed": qc.trim_events(max_length) if qc is not None else 0}}


def handle_prometheus(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    # prometheus_client is loaded by the first scrape: a broker nobody scrapes does not carry it.
    from bunqueue.monitoring import prometheus

    return {"ok": True, "data": {"metrics": prometheus.render(broker, broker.counters.max_prometheus_queues)}}


def handle_compact_memory(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    compaction.compact(broker)
    return {"ok": True}


def handle_dashboard_overview(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    return {"ok": True, "data": dashboard.overview(broker)}


def handle_dashboard_queues(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    return {"ok": True, "data": dashboard.queues(broker)}


def handle_dashboard_queue(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    queue = options.queue_name(cmd)
    include_jobs = options.flag_or(cmd, "includeJobs", False)
    limit = options.count_arg(cmd, "jobsLimit", dashboard.DEFAULT_JOBS_LIMIT, finite=True)
    counts = job_counts(broker, queue)
    return {"ok": True, "data": dashboard.queue(broker, queue, counts, include_jobs, int(limit))}
