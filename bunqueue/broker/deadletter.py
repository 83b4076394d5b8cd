"""Transitions out of the DLQ and out of completion: RetryDlq, PurgeDlq, RemoveDlqJob, SetDlqConfig,
RetryCompleted, and the DLQ maintenance (automatic retries, expiry) that the server runs on one timer.
"""
from __future__ import annotations

import math
from typing import Any

from bunqueue._core.jobs import Job
from bunqueue.broker import states
from bunqueue.broker.broker import Broker, _timeline
from bunqueue.broker.dlq import (
    BLOCKED_RETRY_DELAY,
    DEFAULT_CONFIG,
    Entry,
    can_auto_retry,
    drop_dead_letters,
    is_expired,
    merge_config,
)
from bunqueue.broker.queue import QueueState


def _key_taken(broker: Broker, job: Job, now: float) -> bool:
    """Whether the job's unique key now belongs to another live job: then it may not come back."""
    key = job.unique_key
    if key is None:
        return False
    owner = broker._unique_owner(job.queue, key, now)
    return owner is not None and owner != job.id


def _restart(broker: Broker, job: Job, now: float) -> None:
    """A finished job begins again from waiting: fresh attempts, its identity claimed anew."""
    job.attempts = 0
    job.stall_count = 0
    job.started_at = math.nan
    job.run_at = now
    job.last_heartbeat = now
    _timeline(job, {"state": states.WAITING, "timestamp": now})
    if job.unique_key is not None:
        ttl = job.deduplication_ttl
        broker.unique_keys[(job.queue, job.unique_key)] = (job.id, None if ttl is None else now + ttl)
    broker._enqueue(broker.queue(job.queue), job, now)
    broker.store.job_changed(job)


def retry_dead(broker: Broker, entry: Entry, now: float, automatic: bool) -> bool:
    """Move one DLQ entry's job back to waiting; False when its unique key is taken.

    A manual retry starts a new history; an automatic one keeps the entry's attempts and generation, so
    the job returns to the same DLQ entry lifetime (and retry count) if it fails again.
    """
    job: Job = entry["job"]
    if _key_taken(broker, job, now):
        return False
    if automatic:
        broker.dlq.keep_generation(entry, now)
        broker.failures[job.id] = list(entry["attempts"])
    else:
        broker.dlq.generations.pop(job.id, None)
        broker.failures.pop(job.id, None)
    broker.dlq.remove(job.queue, job.id)
    broker.store.dlq_removed(job.queue, job.id)
    _restart(broker, job, now)
    return True


def retry_entries(broker: Broker, entries: list[Entry], now: float) -> int:
    return sum(1 for entry in entries if retry_dead(broker, entry, now, False))


def purge(broker: Broker, queue: str) -> int:
    removed = broker.dlq.clear(queue)
    drop_dead_letters(broker, queue, [entry["job"].id for entry in removed])
    return len(removed)


def remove_entry(broker: Broker, queue: str, job_id: str) -> bool:
    if broker.dlq.remove(queue, job_id) is None:
        return False
    drop_dead_letters(broker, queue, [job_id])
    return True


def set_config(broker: Broker, queue: str, changes: dict[str, Any]) -> None:
    q = broker.queue(queue)
    merged = merge_config(q.dlq_config or DEFAULT_CONFIG, changes)
    q.dlq_config = None if merged == DEFAULT_CONFIG else merged
    # A lower maxEntries applies at once; the new retry policy to every entry's next maintenance time.
    drop_dead_letters(broker, queue, broker.dlq.overflow(queue))
    broker.dlq.reschedule_queue(queue)
    broker.store.queue_changed(queue, q.settings())


def maintain(broker: Broker, now: float) -> float | None:
    """Run the DLQ work that is due (automatic retries first, then expiry); the next due time."""
    dlq = broker.dlq
    for entry in dlq.pop_due(now):
        queue = entry["job"].queue
        config = dlq.config(queue)
        retry = can_auto_retry(entry, config, now)
        if retry and retry_dead(broker, entry, now, True):
            continue
        expires_at = entry["expiresAt"]
        if is_expired(entry, now):
            dlq.remove(queue, entry["job"].id)
            drop_dead_letters(broker, queue, [entry["job"].id])
        elif retry:
            # Its unique key is held by another live job: try again later (or expire first).
            retry_at = now + BLOCKED_RETRY_DELAY
            dlq.postpone(entry, retry_at if expires_at is None else min(retry_at, expires_at))
        else:
            dlq.schedule(entry, config)
    return dlq.next_due()


# -- completed jobs ------------------------------------------------------------------------------


def requeue_completed(broker: Broker, q: QueueState, job: Job, now: float) -> bool:
    if _key_taken(broker, job, now):
        return False
    job_id = job.id
    broker.completed.pop(job_id, None)
    q.forget_completed(job_id)
    broker.results.pop(job_id, None)
    broker.store.result_removed(job_id)
    broker.failures.pop(job_id, None)
    broker.dlq.generations.pop(job_id, None)
    job.completed_at = math.nan
    job.progress = 0
    job.progress_message = None
    _restart(broker, job, now)
    return True


def retry_completed(
    broker: Broker, queue: str, job_id: str | None, limit: float, cutoff: float, now: float
) -> int:
    """RetryCompleted: one job by id, or the oldest completions (up to ``limit``, at or before ``cutoff``)."""
    q = broker.queues.get(queue)
    if q is None:
        return 0
    if job_id is not None:
        job = broker.jobs.get(job_id)
        if job is None or job.queue != queue or job.state != states.COMPLETED:
            return 0
        return int(requeue_completed(broker, q, job, now))
    count = 0
    jobs = broker.jobs
    for completed_id in list(q.completed):
        if count >= limit:
            break
        job = jobs[completed_id]
        if job.completed_at <= cutoff:
            count += requeue_completed(broker, q, job, now)
    return count
