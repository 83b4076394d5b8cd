"""Rebuild the broker from what a durable store read at start-up."""
from __future__ import annotations

import math
from typing import Any

from bunqueue._core.jobs import Job
from bunqueue.broker import states
from bunqueue.broker.broker import DEFAULT_MAX_STALLS, Broker, now_ms
from bunqueue.broker.retry import retry_delay
from bunqueue.monitoring.webhooks import Webhook
from bunqueue.storage.schema import Snapshot


def restore(broker: Broker, snap: Snapshot) -> dict[str, int]:
    """Put every job back where it belongs; an interrupted attempt is charged like a stall.

    Returns how many jobs went where, for the start-up log line.
    """
    now = now_ms()
    counts = {"queued": 0, "active": 0, "waiting-children": 0, "completed": 0, "failed": 0}
    jobs = sorted(snap.jobs, key=lambda job: job.seq)
    for job in jobs:
        broker.jobs[job.id] = job
    failed: dict[str, Job] = {}
    for job in jobs:
        q = broker.queue(job.queue)
        if job.state == states.ACTIVE:
            _interrupted(broker, job, now)
            counts["active"] += 1
        elif job.state == states.READY or job.state == states.DELAYED:
            broker._enqueue(q, job, now)
            counts["queued"] += 1
        elif job.state == states.WAITING_CHILDREN:
            job.pending_deps = set(job.pending_deps or job.depends_on)
            broker._register_dependencies(q, job)
            if job.pending_deps is None:
                broker._enqueue(q, job, now)
                broker.store.job_changed(job)
            counts["waiting-children"] += 1
        elif job.state == states.COMPLETED:
            broker.completed[job.id] = None
            q.completed[job.id] = None
            counts["completed"] += 1
        elif job.state == states.FAILED:
            failed[job.id] = job
            counts["failed"] += 1
        if job.unique_key is not None and job.state in states.LIVE:
            ttl = job.deduplication_ttl
            broker.unique_keys[(job.queue, job.unique_key)] = (job.id, None if ttl is None else now + ttl)
    for queue, settings in snap.queues.items():
        broker.queue(queue).apply_settings(settings)
    for queue, count in snap.completed_counts.items():
        broker.queue(queue).n_completed = count
    broker.results.update(snap.results)
    _restore_dlq(broker, snap.dlq, failed)
    for record in snap.webhooks:
        broker.events.webhooks.add(Webhook.from_record(record))
    broker.events.refresh()
    if jobs:
        broker.factory.resume_after(max(job.seq for job in jobs))
    return counts


def _interrupted(broker: Broker, job: Job, now: float) -> None:
    """An attempt cut short by the restart: charged, then retried with backoff or dead-lettered."""
    q = broker.queue(job.queue)
    job.attempts += 1
    job.stall_count += 1
    job.started_at = math.nan
    if job.attempts >= job.max_attempts or job.stall_count >= DEFAULT_MAX_STALLS:
        reason = "max_attempts_exceeded" if job.attempts >= job.max_attempts else "stalled"
        broker._record_failure(job, job.attempts, reason, "Interrupted by a restart", now)
        broker._fail_terminally(job, reason, "Interrupted by a restart", now, False)
        return
    job.run_at = now + retry_delay(job.backoff, job.backoff_config, job.attempts)
    broker._enqueue(q, job, now)
    broker.store.job_changed(job)


def _restore_dlq(broker: Broker, rows: list[tuple[str, dict[str, Any]]], failed: dict[str, Job]) -> None:
    for queue, entry in sorted(rows, key=lambda row: row[1]["enteredAt"]):
        job = failed.get(entry["job"])
        if job is None:
            continue
        entry["job"] = job
        broker.dlq.restore(queue, entry)
