"""The Prometheus text exposition (format 0.0.4) with the reference's metric names and types.

Rendered by ``prometheus_client`` from families built at scrape time, so names, label escaping and
number formatting are what a Prometheus server parses. Nothing is registered globally.
"""
from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from bunqueue import __version__
from bunqueue.monitoring.counters import LATENCY_BOUNDS_MS, Counters, Histogram
from bunqueue.monitoring.snapshot import Totals, process_memory, storage_size_bytes, totals
from bunqueue.webhooks.registry import WebhookRegistry

if TYPE_CHECKING:
    from bunqueue.broker.wiring import Wiring

DEFAULT_MAX_QUEUES = 100
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


# A queue's labelled gauges, by the key of their family name.
QUEUE_GAUGES = ("waiting", "prioritized", "delayed", "active", "dlq")


@dataclass
class Scrape:
    """What one exposition shows, read from an engine: any engine that can fill this can be scraped."""

    totals: Totals
    counters: Counters
    # Queue name -> its QUEUE_GAUGES values, for every queue (the first ``max_queues`` by name are shown).
    queue_values: Callable[[str], dict[str, int]]
    queue_names: list[str]
    # ListWorkers' "stats".
    workers: dict[str, Any]
    webhooks: WebhookRegistry
    storage_status: dict[str, Any]
    storage_size: int | None


def scrape(broker: Wiring) -> Scrape:
    """The memory engine's reading."""
    def values(name: str) -> dict[str, int]:
        q = broker.queues[name]
        return {"waiting": q.n_waiting, "prioritized": q.n_prioritized, "delayed": len(q.delayed),
                "active": q.n_active, "dlq": broker.dlq.count(name)}

    return Scrape(totals(broker), broker.counters, values, list(broker.queues), broker.workers.listing()["stats"],
                  broker.events.webhooks, broker.store.status, storage_size_bytes(broker))


def render(broker: Wiring, max_queues: int = DEFAULT_MAX_QUEUES) -> str:
    """The whole exposition as text."""
    return render_scrape(scrape(broker), max_queues)


def render_scrape(reading: Scrape, max_queues: int = DEFAULT_MAX_QUEUES) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_BrokerCollector(reading, max_queues))
    return generate_latest(registry).decode()


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    # prometheus_client writes a counter's samples (and its TYPE line) with the _total suffix.
    return CounterMetricFamily(name.removesuffix("_total"), doc, value=value)


def _histogram(name: str, doc: str, h: Histogram) -> HistogramMetricFamily:
    cumulative = h.cumulative()
    buckets = [(_le(bound / 1000), count) for bound, count in zip(LATENCY_BOUNDS_MS, cumulative)]
    buckets.append(("+Inf", cumulative[-1]))
    return HistogramMetricFamily(name, doc, buckets=buckets, sum_value=h.total_ms / 1000)


def _le(seconds: float) -> str:
    return repr(float(seconds))


class _BrokerCollector(Collector):
    def __init__(self, reading: Scrape, max_queues: int) -> None:
        self.reading = reading
        self.max_queues = max_queues

    def collect(self) -> Iterator[Metric]:
        reading = self.reading
        counters = reading.counters
        t = reading.totals
        yield _gauge("bunqueue_jobs_waiting", "Number of jobs waiting in queue", t.waiting)
        yield _gauge("bunqueue_jobs_prioritized", "Number of prioritized jobs (priority > 0)", t.prioritized)
        yield _gauge("bunqueue_jobs_delayed", "Number of delayed jobs", t.delayed)
        yield _gauge("bunqueue_jobs_active", "Number of jobs being processed", t.active)
        yield _gauge("bunqueue_jobs_dlq", "Number of jobs in dead letter queue", t.dlq)
        yield _gauge("bunqueue_jobs_completed", "Number of completed jobs", t.completed)
        yield _counter("bunqueue_jobs_pushed_total", "Total jobs pushed", counters.pushed)
        yield _counter("bunqueue_jobs_pulled_total", "Total jobs pulled", counters.pulled)
        yield _counter("bunqueue_jobs_completed_total", "Total jobs completed", counters.completed)
        yield _counter("bunqueue_jobs_failed_total", "Total jobs failed", counters.failed)
        yield _gauge("bunqueue_uptime_seconds", "Server uptime in seconds", counters.uptime_ms() // 1000)
        yield _gauge("bunqueue_cron_jobs_registered", "Number of registered cron jobs", len(counters.list_crons()))
        yield from self.workers()
        hooks = reading.webhooks
        yield _gauge("bunqueue_webhooks_registered", "Number of registered webhooks", len(hooks.hooks))
        yield _gauge("bunqueue_webhooks_enabled", "Number of enabled webhooks", hooks.enabled_count)
        if hooks.hooks:
            yield from self.webhook_deliveries()
        yield from self.storage()
        yield from self.queues()
        yield from self.process()
        yield from backups(counters.backup_metrics())
        lat = counters.latency
        yield _histogram("bunqueue_push_duration_seconds", "Push operation latency in seconds", lat["push"])
        yield _histogram("bunqueue_pull_duration_seconds", "Pull operation latency in seconds", lat["pull"])
        yield _histogram("bunqueue_ack_duration_seconds", "Ack operation latency in seconds", lat["ack"])

    def workers(self) -> Iterator[Metric]:
        listing = self.reading.workers
        yield _gauge("bunqueue_workers_registered", "Number of registered workers", listing["total"])
        yield _gauge("bunqueue_workers_active", "Number of active workers", listing["active"])
        yield _gauge(
            "bunqueue_worker_active_jobs", "Number of jobs currently processed by workers", listing["activeJobs"]
        )
        yield _gauge(
            "bunqueue_worker_concurrency_slots", "Configured worker concurrency capacity", listing["concurrencySlots"]
        )
        yield _counter(
            "bunqueue_workers_processed_total", "Total jobs processed by workers", listing["totalProcessed"]
        )
        yield _counter("bunqueue_workers_failed_total", "Total jobs failed by workers", listing["totalFailed"])

    def webhook_deliveries(self) -> Iterator[Metric]:
        """Per webhook (present only while webhooks are registered): delivery outcomes and backlog."""
        outcomes = CounterMetricFamily(
            "bunqueue_webhook_deliveries", "Webhook deliveries by outcome (dropped: the outbox was full)",
            labels=["webhook", "outcome"],
        )
        backlog = GaugeMetricFamily(
            "bunqueue_webhook_outbox_events", "Events waiting for delivery per webhook", labels=["webhook"]
        )
        for hook in self.reading.webhooks.hooks.values():
            outcomes.add_metric([hook.id, "success"], hook.success_count)
            outcomes.add_metric([hook.id, "failure"], hook.failure_count)
            outcomes.add_metric([hook.id, "dropped"], hook.dropped)
            backlog.add_metric([hook.id], len(hook.outbox))
        yield outcomes
        yield backlog

    def storage(self) -> Iterator[Metric]:
        status = self.reading.storage_status
        yield _gauge(
            "bunqueue_storage_degraded", "Whether persistent storage is degraded", int(status["error"] is not None)
        )
        yield _gauge(
            "bunqueue_storage_disk_full", "Whether persistent storage reported a full disk", int(status["diskFull"])
        )
        size = self.reading.storage_size
        if size is not None:
            yield _gauge("bunqueue_sqlite_database_size_bytes", "SQLite database file size in bytes", size)

    def queues(self) -> Iterator[Metric]:
        """Per-queue gauges for the first ``max_queues`` queues (by name), and how many were left out."""
        reading = self.reading
        names = sorted(reading.queue_names)
        chosen = names[: self.max_queues]
        families: dict[str, GaugeMetricFamily] = {}
        for key, doc in zip(QUEUE_GAUGES, (
            "Number of waiting jobs per queue",
            "Number of prioritized jobs per queue",
            "Number of delayed jobs per queue",
            "Number of active jobs per queue",
            "Number of DLQ jobs per queue",
        )):
            families[key] = GaugeMetricFamily(f"bunqueue_queue_jobs_{key}", doc, labels=["queue"])
        for name in chosen:
            values = reading.queue_values(name)
            for key, family in families.items():
                family.add_metric([name], values[key])
        if chosen:
            yield from families.values()
        yield _gauge(
            "bunqueue_queue_metrics_exported", "Queue names included in labelled Prometheus series", len(chosen)
        )
        yield _gauge(
            "bunqueue_queue_metrics_omitted", "Queue names omitted by the Prometheus cardinality limit",
            len(names) - len(chosen),
        )

    def process(self) -> Iterator[Metric]:
        mem = process_memory()
        usage = resource.getrusage(resource.RUSAGE_SELF)
        connections = self.reading.counters.connections
        # The original's series, labels included, so dashboards built on it keep working. No Bun runs
        # here: its version is empty, which Prometheus reads as the label being absent.
        build = GaugeMetricFamily(
            "bunqueue_build_info", "Build and runtime identity", labels=["bun_version", "version"]
        )
        build.add_metric(["", __version__], 1)
        yield build
        yield _gauge("bunqueue_process_heap_used_bytes", "Process heap bytes currently used", mem.heap_used)
        yield _gauge("bunqueue_process_heap_total_bytes", "Total process heap bytes", mem.heap_total)
        yield _gauge("bunqueue_process_resident_memory_bytes", "Process resident memory size in bytes", mem.rss)
        yield _counter(
            "process_cpu_seconds_total", "Total process CPU time in seconds", usage.ru_utime + usage.ru_stime
        )
        yield _gauge(
            "process_start_time_seconds", "Start time of the process since the Unix epoch in seconds",
            _process_start_time(),
        )
        yield _gauge("process_resident_memory_bytes", "Resident memory size in bytes", mem.rss)
        yield _gauge("process_heap_bytes", "Process heap size in bytes", mem.heap_total)
        conns = GaugeMetricFamily(
            "bunqueue_connections", "Current server connections by bounded transport", labels=["transport"]
        )
        conns.add_metric(["tcp"], connections)
        conns.add_metric(["websocket"], 0)
        conns.add_metric(["sse"], 0)
        yield conns


def _process_start_time() -> float:
    """From /proc when it is there (the kernel's own record), else the broker module's import time."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        ticks = int(fields[19])
        with open("/proc/stat", "rb") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith(b"btime"))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return _IMPORTED_AT


_IMPORTED_AT = time.time()


# The reference's S3 backup families, always present (zero with backups off, as the reference reports them):
# dashboards and alerts written for the reference find the series they expect.
BACKUP_FAMILIES = (
    ("bunqueue_backup_enabled", "gauge", "Whether scheduled S3 backup is enabled"),
    ("bunqueue_backup_scheduler_running", "gauge", "Whether the scheduled S3 backup timer is running"),
    ("bunqueue_backup_in_progress", "gauge", "Whether an S3 backup is in progress"),
    ("bunqueue_backup_interval_seconds", "gauge", "Configured S3 backup interval in seconds"),
    ("bunqueue_backup_retention", "gauge", "Configured number of S3 backups to retain"),
    ("bunqueue_backup_attempts_total", "counter", "S3 backup attempts started"),
    ("bunqueue_backup_successes_total", "counter", "Successful S3 backup attempts"),
    ("bunqueue_backup_failures_total", "counter", "Failed S3 backup attempts"),
    (
        "bunqueue_backup_overlap_rejections_total", "counter",
        "S3 backup requests rejected because another backup was active",
    ),
    ("bunqueue_backup_consecutive_failures", "gauge", "Consecutive failed S3 backup attempts"),
    (
        "bunqueue_backup_last_success_timestamp_seconds", "gauge",
        "Unix timestamp of the last successful S3 backup, or zero",
    ),
    (
        "bunqueue_backup_last_failure_timestamp_seconds", "gauge",
        "Unix timestamp of the last failed S3 backup, or zero",
    ),
    ("bunqueue_backup_last_duration_seconds", "gauge", "Duration of the last S3 backup attempt"),
    ("bunqueue_backup_last_size_bytes", "gauge", "Compressed size of the last successful S3 backup"),
)


def backups(values: dict[str, float]) -> Iterator[Metric]:
    for name, kind, doc in BACKUP_FAMILIES:
        value = values.get(name, 0.0)
        yield _counter(name, doc, value) if kind == "counter" else _gauge(name, doc, value)
