"""Monitoring: Stats, Metrics, TrimEvents, Prometheus, CompactMemory and the dashboards, as plain values
read from the running totals (``monitoring.counters``), each queue's counters and the process; and what
the servers count (connections, the latency histograms of the timed commands).

The readings themselves are composed by ``bunqueue.monitoring`` (snapshot, dashboard, prometheus,
compaction) over this engine's components: a second engine answers these methods from its own state.
"""
from __future__ import annotations

from typing import Any

from bunqueue.broker.ops.queries import job_counts
from bunqueue.broker.wiring import Wiring
from bunqueue.monitoring import compaction, dashboard, snapshot, streamsnapshots
from bunqueue.monitoring.counters import Histogram, MinuteSeries
from bunqueue.monitoring.snapshot import MIB, Totals, process_memory, storage_size_bytes


def totals(broker: Wiring) -> Totals:
    """Job counts over every queue (O(queues)): the HTTP probes' and Stats' figures."""
    return snapshot.totals(broker)


def stats(broker: Wiring) -> dict[str, Any]:
    counters = broker.counters
    t = snapshot.totals(broker)
    rates = counters.throughput()
    return {
        "waiting": t.ready,
        "active": t.active,
        "delayed": t.delayed,
        "dlq": t.dlq,
        "completed": t.completed,
        "failed": counters.failed,
        "uptime": counters.uptime_ms(),
        "pushPerSec": rates["pushPerSec"],
        "pullPerSec": rates["pullPerSec"],
    }


def metrics(broker: Wiring) -> dict[str, Any]:
    counters = broker.counters
    lat = counters.latency
    size = storage_size_bytes(broker)
    return {
        "totalPushed": counters.pushed,
        "totalPulled": counters.pulled,
        "totalCompleted": counters.completed,
        "totalFailed": counters.failed,
        "avgLatencyMs": round((lat["push"].average + lat["pull"].average) / 2, 2),
        "avgProcessingMs": round(lat["ack"].average, 2),
        "memoryUsageMb": process_memory().rss / MIB,
        "sqliteSizeMb": (size or 0) / MIB,
        "activeConnections": counters.connections,
    }


def queue_metrics(broker: Wiring, queue: str, completed: bool, start: int, end: int) -> Any:
    """A queue's per-minute completions (or failures) from ``start`` to ``end`` (-1: the latest)."""
    qc = broker.counters.queues.get(queue)
    series = (qc.completed if completed else qc.failed) if qc is not None else MinuteSeries()
    return series.view(start, end)


def trim_events(broker: Wiring, queue: str, max_length: int) -> int:
    qc = broker.counters.queues.get(queue)
    return qc.trim_events(max_length) if qc is not None else 0


def prometheus_text(broker: Wiring) -> str:
    # prometheus_client is loaded by the first scrape: a broker nobody scrapes does not carry it.
    from bunqueue.monitoring import prometheus

    return prometheus.render(broker, broker.counters.max_prometheus_queues)


def compact_memory(broker: Wiring) -> None:
    compaction.compact(broker)


def dashboard_overview(broker: Wiring) -> dict[str, Any]:
    return dashboard.overview(broker)


def dashboard_queues(broker: Wiring) -> dict[str, Any]:
    return dashboard.queues(broker)


def dashboard_queue(broker: Wiring, queue: str, include_jobs: bool, jobs_limit: int) -> dict[str, Any]:
    return dashboard.queue(broker, queue, job_counts(broker, queue), include_jobs, jobs_limit)


# -- what the servers count ------------------------------------------------------------------------------


def connection_opened(broker: Wiring) -> None:
    broker.counters.connections += 1


def connection_closed(broker: Wiring) -> None:
    broker.counters.connections -= 1


def latency_histograms(broker: Wiring) -> dict[str, Histogram]:
    """The histograms the runner samples the timed commands into, by kind (push, pull, ack)."""
    return broker.counters.latency


def stats_snapshot(broker: Wiring) -> dict[str, Any]:
    """The periodic ``stats:snapshot`` event's data."""
    return streamsnapshots.stats_snapshot(broker)


def health_snapshot(broker: Wiring, transport: str, connections: int) -> dict[str, Any]:
    """The periodic ``health:status`` event's data, as one kind of stream client sees it."""
    return streamsnapshots.health_snapshot(broker, transport, connections)


def storage_snapshot(broker: Wiring) -> dict[str, Any]:
    """The periodic ``storage:status`` event's data."""
    return streamsnapshots.storage_snapshot(broker)
