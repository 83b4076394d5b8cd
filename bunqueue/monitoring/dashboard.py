"""DashboardOverview, DashboardQueues and DashboardQueue: read-only snapshots built from the counters."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bunqueue._core.jobs import NO_DATA, Job
from bunqueue.broker.ops import listing
from bunqueue.monitoring.snapshot import MIB, Totals, process_memory, totals

if TYPE_CHECKING:
    from bunqueue.broker.wiring import Wiring

DLQ_PREVIEW = 10
DEFAULT_JOBS_LIMIT = 10
MAX_JOBS_LIMIT = 50
# What the overview shows of each cron (the reference's dashboard fields; CronGet has the rest).
CRON_FIELDS = ("name", "queue", "schedule", "repeatEvery", "nextRun", "executions")


def overview(broker: Wiring) -> dict[str, Any]:
    counters = broker.counters
    t = totals(broker)
    mem = process_memory()
    workers = broker.workers
    now = broker.clock()
    worker_list = [{
        "id": worker.id,
        "name": worker.name,
        "queues": worker.queues,
        "lastSeen": worker.last_seen,
        "activeJobs": worker.active_jobs,
        "processedJobs": worker.processed,
        "failedJobs": worker.failed,
    } for worker in workers.workers.values()]
    return {
        "stats": {
            **t.state_counts(),
            "totalPushed": counters.pushed,
            "totalPulled": counters.pulled,
            "totalCompleted": counters.completed,
            "totalFailed": counters.failed,
            "uptime": counters.uptime_ms(),
        },
        "throughput": counters.throughput(),
        "latency": {"averages": counters.latency_averages(), "percentiles": counters.latency_percentiles()},
        "memory": {
            "heapUsed": round(mem.heap_used / MIB),
            "heapTotal": round(mem.heap_total / MIB),
            "rss": round(mem.rss / MIB),
        },
        "collections": collections(broker, t),
        "workers": {"total": len(workers.workers), "active": workers.active_count(now), "list": worker_list},
        "crons": [{field: cron[field] for field in CRON_FIELDS} for cron in counters.list_crons()],
        "storage": dict(broker.store.status),
        "timestamp": now,
    }


def collections(broker: Wiring, t: Totals) -> dict[str, int]:
    """Sizes of the broker's structures, under the reference's names. Structures the reference has and
    this broker does not (a custom-id map: a custom id is the job id here; a temporal index; deferred
    dependency checks) read 0."""
    holders: set[int] = set()
    held = 0
    for q in broker.queues.values():
        for job_id in q.active:
            holder = broker.jobs[job_id].holder
            if holder is not None:
                holders.add(id(holder))
                held += 1
    return {
        "jobIndex": len(broker.jobs),
        "completedJobs": len(broker.records.completed),
        "jobResults": len(broker.records.results),
        "jobLogs": len(broker.records.logs),
        "customIdMap": 0,
        "jobLocks": len(broker.leases),
        "processingTotal": t.active,
        "queuedTotal": t.ready + t.delayed,
        "delayedHeapTotal": t.delayed,
        "temporalIndexTotal": 0,
        "waitingDepsTotal": t.waiting_children,
        "pendingDepChecks": 0,
        "stalledCandidates": len(broker.stalls.exact),
        "clientJobs": len(holders),
        "clientJobsTotal": held,
    }


def queues(broker: Wiring) -> dict[str, Any]:
    out = []
    for name in listing.list_queues(broker):
        q = broker.queues.get(name)
        if q is None:
            row = {"name": name, "waiting": 0, "prioritized": 0, "delayed": 0, "active": 0, "paused": False}
        else:
            row = {
                "name": name,
                "waiting": q.n_waiting,
                "prioritized": q.n_prioritized,
                "delayed": len(q.delayed),
                "active": q.n_active,
                "paused": q.paused,
            }
        row["dlq"] = broker.dlq.count(name)
        out.append({k: row[k] for k in ("name", "waiting", "prioritized", "delayed", "active", "dlq", "paused")})
    return {"queues": out, "timestamp": broker.clock()}


def queue(broker: Wiring, name: str, counts: dict[str, int], include_jobs: bool, jobs_limit: int) -> dict[str, Any]:
    """One queue: its counts (GetJobCounts, with lifetime totals), priorities, DLQ preview, maybe jobs."""
    q = broker.queues.get(name)
    paused = q is not None and q.paused
    qc = broker.counters.queues.get(name)
    counts = dict(counts)
    counts["totalCompleted"] = qc.completed.total if qc is not None else 0
    counts["totalFailed"] = qc.failed.total if qc is not None else 0
    preview = []
    for entry in broker.dlq.entries(name)[:DLQ_PREVIEW]:
        job: Job = entry["job"]
        item: dict[str, Any] = {"id": job.id}
        if job.data is not NO_DATA:
            item["data"] = job.data
        item["attempts"] = job.attempts
        item["createdAt"] = job.created_at
        preview.append(item)
    out: dict[str, Any] = {
        "name": name,
        "counts": counts,
        "paused": paused,
        "priorityCounts": listing.counts_per_priority(broker, name),
        "dlqPreview": preview,
    }
    if include_jobs:
        now = broker.clock()
        limit = min(jobs_limit, MAX_JOBS_LIMIT)

        def summaries(state: str) -> list[dict[str, Any]]:
            jobs = listing.page(listing.select_jobs(broker, name, [state], now), 0, limit, True)
            return [_summary(job) for job in jobs]

        out["jobs"] = {
            "waiting": summaries("waiting"),
            "active": summaries("active"),
            "delayed": summaries("delayed"),
            "paused": summaries("paused") if paused else [],
        }
    out["timestamp"] = broker.clock()
    return out


def _summary(job: Job) -> dict[str, Any]:
    return {
        "id": job.id,
        "priority": job.priority,
        "createdAt": job.created_at,
        "runAt": job.run_at,
        "attempts": job.attempts,
        "progress": job.progress,
    }
