"""Monitoring in PostgreSQL mode: Stats, Metrics, TrimEvents, Prometheus, CompactMemory, the dashboards and
the streams' periodic snapshots, with the memory engine's shapes (``broker.ops.monitoring``,
``bunqueue.monitoring``).

Job counts are the namespace's, read from the database in one statement (``figures``); what was pushed,
pulled, completed and failed, the rates, latencies and per-minute series are what this broker served (its
``Counters``), as each broker is a server of its own. Workers, crons and the DLQ preview are their families'
answers (``list_workers``, ``list_crons``, ``dlq_entries``).
"""
from __future__ import annotations

import inspect
from typing import Any

from bunqueue._core.jobs import NO_DATA, Job
from bunqueue.broker import states
from bunqueue.broker.components import eventnames
from bunqueue.broker.components.eventhub import EventHub
from bunqueue.monitoring import compaction
from bunqueue.monitoring.counters import Counters, MinuteSeries
from bunqueue.monitoring.dashboard import CRON_FIELDS, DLQ_PREVIEW, MAX_JOBS_LIMIT
from bunqueue.monitoring.snapshot import MIB, Totals, process_memory
from bunqueue.storage.postgres.figures import FigureReader, Figures, QueueFigures
from bunqueue.storage.postgres.ops.family import Family
from bunqueue.storage.schema import unpack

# The storage status a PostgreSQL broker reports: the database is the store, and a failed statement is
# the command's own error, so the broker never reads as degraded.
STORAGE_OK: dict[str, Any] = {"diskFull": False, "error": None, "since": None}

# Queued jobs per priority, and a page of one state's jobs, for DashboardQueue.
PRIORITY_COUNTS = f"""
SELECT priority, count(*) FROM bunqueue_jobs
WHERE namespace = $1 AND queue = $2 AND state IN ({states.READY}, {states.DELAYED})
GROUP BY priority ORDER BY min(seq)
"""
# $4: whether prioritized ready jobs are wanted, $5: whether unprioritized ones are (a state name splits
# ready jobs so, as ``states.state_name`` does).
JOBS_OF_STATE = """
SELECT id, priority, created_at, run_at, attempts, record FROM bunqueue_jobs
WHERE namespace = $1 AND queue = $2 AND state = $3 AND (CASE WHEN priority > 0 THEN $4::bool ELSE $5::bool END)
ORDER BY created_at, id COLLATE "C" LIMIT $6
"""


class MonitoringFamily(Family):
    counters: Counters
    events: EventHub
    figure_reader: FigureReader

    async def figures(self) -> Figures:
        """The namespace's counts; the probes' totals (``totals``) are kept from them."""
        return await self.figure_reader.read()

    async def stats(self) -> dict[str, Any]:
        t = (await self.figures()).totals()
        counters = self.counters
        rates = counters.throughput()
        return {
            "waiting": t.ready, "active": t.active, "delayed": t.delayed, "dlq": t.dlq, "completed": t.completed,
            "failed": counters.failed, "uptime": counters.uptime_ms(),
            "pushPerSec": rates["pushPerSec"], "pullPerSec": rates["pullPerSec"],
        }

    async def metrics(self) -> dict[str, Any]:
        counters = self.counters
        lat = counters.latency
        return {
            "totalPushed": counters.pushed,
            "totalPulled": counters.pulled,
            "totalCompleted": counters.completed,
            "totalFailed": counters.failed,
            "avgLatencyMs": round((lat["push"].average + lat["pull"].average) / 2, 2),
            "avgProcessingMs": round(lat["ack"].average, 2),
            "memoryUsageMb": process_memory().rss / MIB,
            "sqliteSizeMb": 0.0,
            "activeConnections": counters.connections,
        }

    async def queue_metrics(self, queue: str, completed: bool, start: int, end: int) -> Any:
        qc = self.counters.queues.get(queue)
        series = (qc.completed if completed else qc.failed) if qc is not None else MinuteSeries()
        return series.view(start, end)

    async def trim_events(self, queue: str, max_length: int) -> int:
        qc = self.counters.queues.get(queue)
        return qc.trim_events(max_length) if qc is not None else 0

    async def prometheus_text(self) -> str:
        from bunqueue.monitoring import prometheus

        figures = await self.figures()

        def values(name: str) -> dict[str, int]:
            q = figures.queues[name]
            return {"waiting": q.waiting, "prioritized": q.prioritized, "delayed": q.delayed, "active": q.active,
                    "dlq": q.dlq}

        workers = await self.family_answer("list_workers", {"workers": [], "stats": _NO_WORKER_STATS})
        reading = prometheus.Scrape(
            figures.totals(), self.counters, values, list(figures.queues), workers["stats"],
            self.events.webhooks, dict(STORAGE_OK), None,
        )
        return prometheus.render_scrape(reading, self.counters.max_prometheus_queues)

    async def compact_memory(self) -> None:
        """This process's memory only: the database keeps no structure a broker could drop."""
        compaction.release_heap()
        if self.events.notices:
            self.events.notify(eventnames.MEMORY_COMPACTED, {})

    async def dashboard_overview(self) -> dict[str, Any]:
        figures = await self.figures()
        t = figures.totals()
        counters = self.counters
        mem = process_memory()
        listing = await self.family_answer("list_workers", {"workers": [], "stats": _NO_WORKER_STATS})
        crons = await self.family_answer("list_crons", [])
        worker_list = [{key: worker.get(key) for key in _OVERVIEW_WORKER_FIELDS} for worker in listing["workers"]]
        return {
            "stats": {
                **t.state_counts(),
                "totalPushed": counters.pushed, "totalPulled": counters.pulled,
                "totalCompleted": counters.completed, "totalFailed": counters.failed,
                "uptime": counters.uptime_ms(),
            },
            "throughput": counters.throughput(),
            "latency": {"averages": counters.latency_averages(), "percentiles": counters.latency_percentiles()},
            "memory": {"heapUsed": round(mem.heap_used / MIB), "heapTotal": round(mem.heap_total / MIB),
                       "rss": round(mem.rss / MIB)},
            "collections": _collections(figures, t),
            "workers": {"total": listing["stats"]["total"], "active": listing["stats"]["active"], "list": worker_list},
            "crons": [{field: cron.get(field) for field in CRON_FIELDS} for cron in crons],
            "storage": dict(STORAGE_OK),
            "timestamp": self.clock(),
        }

    async def dashboard_queues(self) -> dict[str, Any]:
        figures = await self.figures()
        rows = [{
            "name": name, "waiting": q.waiting, "prioritized": q.prioritized, "delayed": q.delayed,
            "active": q.active, "dlq": q.dlq, "paused": q.paused,
        } for name, q in sorted(figures.queues.items())]
        return {"queues": rows, "timestamp": self.clock()}

    async def dashboard_queue(self, queue: str, include_jobs: bool, jobs_limit: int) -> dict[str, Any]:
        q = (await self.figures()).queues.get(queue) or QueueFigures()
        counts: dict[str, Any] = q.job_counts()
        qc = self.counters.queues.get(queue)
        counts["totalCompleted"] = qc.completed.total if qc is not None else 0
        counts["totalFailed"] = qc.failed.total if qc is not None else 0
        priorities = _priority_counts(await self.pool.fetch(PRIORITY_COUNTS, self.namespace, queue))
        entries = await self.family_answer("dlq_entries", [], queue, None)
        out: dict[str, Any] = {
            "name": queue, "counts": counts, "paused": q.paused, "priorityCounts": priorities,
            "dlqPreview": [_dlq_item(entry["job"]) for entry in entries[:DLQ_PREVIEW]],
        }
        if include_jobs:
            limit = min(jobs_limit, MAX_JOBS_LIMIT)
            out["jobs"] = {
                "waiting": [] if q.paused else await self._summaries(queue, states.READY, limit, False),
                "active": await self._summaries(queue, states.ACTIVE, limit),
                "delayed": await self._summaries(queue, states.DELAYED, limit),
                "paused": await self._summaries(queue, states.READY, limit) if q.paused else [],
            }
        out["timestamp"] = self.clock()
        return out

    async def _summaries(
        self, queue: str, state: int, limit: int, prioritized: bool = True
    ) -> list[dict[str, Any]]:
        rows = await self.pool.fetch(JOBS_OF_STATE, self.namespace, queue, state, prioritized, True, limit)
        # Numbers as the memory engine's jobs carry them (floats).
        return [{
            "id": row["id"], "priority": row["priority"], "createdAt": float(row["created_at"]),
            "runAt": float(row["run_at"]),
            # The row counts a running attempt; the wire counts the attempts before it, as claimed jobs do.
            "attempts": row["attempts"] - 1 if state == states.ACTIVE else row["attempts"],
            "progress": Job.from_record(unpack(row["record"])).progress,
        } for row in rows]

    async def stats_snapshot(self) -> dict[str, Any]:
        figures = await self.figures()
        counters = self.counters
        rates = counters.throughput()
        listing = await self.family_answer("list_workers", {"workers": [], "stats": _NO_WORKER_STATS})
        crons = await self.family_answer("list_crons", [])
        return {
            **figures.totals().state_counts(),
            "totalPushed": counters.pushed, "totalCompleted": counters.completed, "totalFailed": counters.failed,
            "pushPerSec": rates["pushPerSec"], "pullPerSec": rates["pullPerSec"],
            "uptime": counters.uptime_ms(),
            "queues": {name: {"waiting": q.ready, "active": q.active, "delayed": q.delayed, "dlq": q.dlq,
                              "paused": q.paused} for name, q in figures.queues.items()},
            "workers": {"total": listing["stats"]["total"], "active": listing["stats"]["active"]},
            "cronJobs": len(crons),
        }

    async def health_snapshot(self, transport: str, connections: int) -> dict[str, Any]:
        mem = process_memory()
        return {
            "ok": True,
            "uptime": int(self.counters.uptime_ms() // 1000),
            "memory": {"rss": round(mem.rss / MIB), "heapUsed": round(mem.heap_used / MIB)},
            "connections": {transport: connections},
        }

    async def storage_snapshot(self) -> dict[str, Any]:
        figures = await self.figures()
        return {"collections": _collections(figures, figures.totals()), "diskFull": False}

    async def family_answer(self, method: str, absent: Any, *args: Any) -> Any:
        """What another family's method answers (ListWorkers, ListCrons, the DLQ); ``absent`` while that
        family is not part of the engine."""
        call = getattr(self, method, None)
        if call is None:
            return absent
        answer = call(*args)
        return await answer if inspect.isawaitable(answer) else answer


_NO_WORKER_STATS = {"total": 0, "active": 0, "totalProcessed": 0, "totalFailed": 0, "activeJobs": 0,
                    "concurrencySlots": 0}
_OVERVIEW_WORKER_FIELDS = ("id", "name", "queues", "lastSeen", "activeJobs", "processedJobs", "failedJobs")


def _collections(figures: Figures, t: Totals) -> dict[str, int]:
    """The reference's structure sizes, as ``monitoring.dashboard.collections`` names them, from the
    namespace's rows: the job index is every job row, the locks the leased (active) ones."""
    return {
        "jobIndex": figures.jobs,
        "completedJobs": t.completed,
        "jobResults": figures.results,
        "jobLogs": figures.logs,
        "customIdMap": 0,
        "jobLocks": t.active,
        "processingTotal": t.active,
        "queuedTotal": t.ready + t.delayed,
        "delayedHeapTotal": t.delayed,
        "temporalIndexTotal": 0,
        "waitingDepsTotal": t.waiting_children,
        "pendingDepChecks": 0,
        "stalledCandidates": 0,
        "clientJobs": 0,
        "clientJobsTotal": 0,
    }


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


def _priority_counts(rows: list[Any]) -> dict[str, int]:
    """Keyed and ordered as the reference's JS object is (``listing.counts_per_priority``): whole
    non-negative priorities ascending, then the others in the order they first appear."""
    whole = sorted((p, n) for p, n in rows if float(p).is_integer() and p >= 0)
    other = [(p, n) for p, n in rows if not (float(p).is_integer() and p >= 0)]
    return {str(_number(p)): n for p, n in whole + other}


def _dlq_item(job: Job) -> dict[str, Any]:
    item: dict[str, Any] = {"id": job.id}
    if job.data is not NO_DATA:
        item["data"] = job.data
    item["attempts"] = job.attempts
    item["createdAt"] = job.created_at
    return item
