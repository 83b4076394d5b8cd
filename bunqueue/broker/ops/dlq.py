"""Out of the DLQ and out of completion: RetryDlq, PurgeDlq, RemoveDlqJob, SetDlqConfig, RetryCompleted,
and the DLQ maintenance (automatic retries, expiry), one of the broker's deadline kinds.
"""
from __future__ import annotations

import math
from typing import Any

from bunqueue._core.jobs import Job
from bunqueue.broker import states
from bunqueue.broker.components.deadletters import (
    BLOCKED_RETRY_DELAY,
    DEFAULT_CONFIG,
    Entry,
    can_auto_retry,
    is_expired,
    merge_config,
)
from bunqueue.broker.components.queues import QueueState
from bunqueue.broker.transitions import Transitions


def retry_dead(t: Transitions, entry: Entry, now: float, automatic: bool) -> bool:
    """Move one DLQ entry's job back to waiting; False when its unique key is taken.

    A manual retry starts a new history; an automatic one keeps the entry's attempts and generation, so
    the job returns to the same DLQ entry lifetime (and retry count) if it fails again.
    """
    job: Job = entry["job"]
    if t.keys.taken_by_another(job, now):
        return False
    if automatic:
        t.dlq.keep_generation(entry, now)
        t.records.failures[job.id] = list(entry["attempts"])
    else:
        t.dlq.generations.pop(job.id, None)
        t.records.failures.pop(job.id, None)
    t.dlq.remove(job.queue, job.id)
    t.store.dlq_removed(job.queue, job.id)
    t.restart(job, now)
    return True


def retry_entries(t: Transitions, entries: list[Entry], now: float) -> int:
    return sum(1 for entry in entries if retry_dead(t, entry, now, False))


def purge(t: Transitions, queue: str) -> int:
    removed = t.dlq.clear(queue)
    t.drop_dead_letters(queue, [entry["job"].id for entry in removed])
    return len(removed)


def remove_entry(t: Transitions, queue: str, job_id: str) -> bool:
    if t.dlq.remove(queue, job_id) is None:
        return False
    t.drop_dead_letters(queue, [job_id])
    return True


def set_config(t: Transitions, queue: str, changes: dict[str, Any]) -> None:
    q = t.queues.of(queue)
    merged = merge_config(q.dlq_config or DEFAULT_CONFIG, changes)
    q.dlq_config = None if merged == DEFAULT_CONFIG else merged
    # A lower maxEntries applies at once; the new retry policy to every entry's next maintenance time.
    t.drop_dead_letters(queue, t.dlq.overflow(queue))
    t.dlq.reschedule_queue(queue)
    t.store.queue_changed(queue, q.settings())


def maintain(t: Transitions, now: float) -> float | None:
    """Run the DLQ work that is due (automatic retries first, then expiry); the next due time."""
    dlq = t.dlq
    for entry in dlq.pop_due(now):
        queue = entry["job"].queue
        config = dlq.config(queue)
        retry = can_auto_retry(entry, config, now)
        if retry and retry_dead(t, entry, now, True):
            continue
        expires_at = entry["expiresAt"]
        if is_expired(entry, now):
            dlq.remove(queue, entry["job"].id)
            t.drop_dead_letters(queue, [entry["job"].id])
        elif retry:
            # Its unique key is held by another live job: try again later (or expire first).
            retry_at = now + BLOCKED_RETRY_DELAY
            dlq.postpone(entry, retry_at if expires_at is None else min(retry_at, expires_at))
        else:
            dlq.schedule(entry, config)
    return dlq.next_due()


# -- completed jobs ------------------------------------------------------------------------------


def requeue_completed(t: Transitions, q: QueueState, job: Job, now: float) -> bool:
    if t.keys.taken_by_another(job, now):
        return False
    job_id = job.id
    t.records.completed.pop(job_id, None)
    q.forget_completed(job_id)
    t.records.results.pop(job_id, None)
    t.store.result_removed(job_id)
    t.records.failures.pop(job_id, None)
    t.dlq.generations.pop(job_id, None)
    job.completed_at = math.nan
    job.progress = 0
    job.progress_message = None
    t.restart(job, now)
    return True


def retry_completed(
    t: Transitions, queue: str, job_id: str | None, limit: float, cutoff: float, now: float
) -> int:
    """RetryCompleted: one job by id, or the oldest completions (up to ``limit``, at or before ``cutoff``)."""
    q = t.queues.get(queue)
    if q is None:
        return 0
    if job_id is not None:
        job = t.jobs.get(job_id)
        if job is None or job.queue != queue or job.state != states.COMPLETED:
            return 0
        return int(requeue_completed(t, q, job, now))
    count = 0
    jobs = t.jobs
    for completed_id in list(q.completed):
        if count >= limit:
            break
        job = jobs[completed_id]
        if job.completed_at <= cutoff:
            count += requeue_completed(t, q, job, now)
    return count
