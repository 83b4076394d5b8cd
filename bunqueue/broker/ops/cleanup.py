"""Queue-wide removals: Drain, Clean and Obliterate. Each costs O(jobs of the queue), never a scan of the
broker, through the per-queue heaps and id sets of ``QueueState``.
"""
from __future__ import annotations

from collections.abc import Callable

from bunqueue._core.jobs import Job
from bunqueue.broker.components import eventnames
from bunqueue.broker.components.queues import QueueState
from bunqueue.broker.timers.retention import completed_time
from bunqueue.broker.wiring import Wiring

# Clean's state names for queued jobs: all of them select every waiting, prioritized and delayed job.
QUEUED_STATES = frozenset(("waiting", "wait", "delayed", "prioritized", "paused"))


def drain(broker: Wiring, queue: str) -> int:
    """Remove every waiting, prioritized and delayed job; active and finished ones stay."""
    q = broker.queues.get(queue)
    if q is None:
        return 0
    jobs = broker.jobs
    remove = broker.transitions.remove
    ids = q.clear_queued()
    for job_id in ids:
        remove(jobs[job_id])
    if ids and broker.events.notices:
        broker.events.notify(eventnames.QUEUE_DRAINED, {"queue": queue, "count": len(ids)})
    return len(ids)


def obliterate(broker: Wiring, queue: str) -> None:
    """Remove the queue and everything in it: jobs in every state, DLQ, pause and DLQ policy."""
    _remove_queue(broker, queue)
    # Told of every Obliterate, of a queue never seen too, as the original tells it.
    if broker.events.notices:
        broker.events.notify(eventnames.QUEUE_OBLITERATED, {"queue": queue})
        broker.events.notify(eventnames.QUEUE_REMOVED, {"queue": queue})


def _remove_queue(broker: Wiring, queue: str) -> None:
    q = broker.queues.get(queue)
    if q is None:
        return
    jobs = broker.jobs
    t = broker.transitions
    for job_id in q.clear_queued():
        t.remove(jobs[job_id])
    for job_id in list(q.active):
        job = jobs[job_id]
        # Its worker's later ACK or FAIL finds no job, as after any removal.
        t.leave_active(job)
        t.remove(job)
    for job_id in list(q.waiting_children):
        job = jobs[job_id]
        t.take_out(job)
        t.remove(job)
    for job_id in list(q.completed):
        t.forget_completed(q, job_id)
        t.remove(jobs[job_id])
    t.drop_dead_letters(queue, [entry["job"].id for entry in broker.dlq.clear(queue)])
    broker.retention.forget_queue(queue)
    q.n_completed = 0
    broker.store.queue_changed(queue, None)
    # Completed jobs evicted from memory are still rows of a durable store.
    broker.store.queue_removed(queue)
    if q.waiters:
        # Long-polling pulls hold this state and keep waiting on it: it stays, with default controls.
        q.apply_settings({}, broker.clock())
        q.groups.forget_controls(broker.clock())
    else:
        del broker.queues[queue]


def clean(broker: Wiring, queue: str, grace: float, state: str | None, limit: int, now: float) -> list[str]:
    """Remove up to ``limit`` jobs older than ``grace`` ms, oldest first; the removed ids.

    Queued jobs age from creation, completed ones from completion, failed ones from entering the DLQ.
    Active jobs are never cleaned (their workers still hold them), as in the reference.
    """
    q = broker.queues.get(queue)
    if q is None or limit <= 0:
        return []
    threshold = now - grace
    if state is None or state in QUEUED_STATES:
        ids = _clean_queued(broker, q, threshold, limit)
    elif state == "completed":
        ids = _clean_completed(broker, q, threshold, limit)
    elif state == "failed":
        ids = _clean_failed(broker, queue, threshold, limit)
    else:
        return []
    if ids and broker.events.notices:
        cleaned: dict[str, object] = {"queue": queue, "count": len(ids)}
        if state is not None:
            cleaned = {"queue": queue, "state": state, "count": len(ids)}
        broker.events.notify(eventnames.QUEUE_CLEANED, cleaned)
    return ids


def _oldest(jobs: list[Job], limit: int, key: Callable[[Job], tuple[float, str]]) -> list[Job]:
    jobs.sort(key=key)
    return jobs[:limit]


def _clean_queued(broker: Wiring, q: QueueState, threshold: float, limit: int) -> list[str]:
    jobs = broker.jobs
    old = [job for job in map(jobs.__getitem__, q.queued_ids()) if job.created_at <= threshold]
    removed = []
    for job in _oldest(old, limit, lambda job: (job.created_at, job.id)):
        q.remove_queued(job)
        broker.transitions.remove(job)
        removed.append(job.id)
    return removed


def _clean_completed(broker: Wiring, q: QueueState, threshold: float, limit: int) -> list[str]:
    jobs = broker.jobs
    old = [job for job in map(jobs.__getitem__, q.completed) if completed_time(job) <= threshold]
    removed = []
    for job in _oldest(old, limit, lambda job: (completed_time(job), job.id)):
        broker.transitions.forget_completed(q, job.id)
        broker.transitions.remove(job)
        removed.append(job.id)
    return removed


def _clean_failed(broker: Wiring, queue: str, threshold: float, limit: int) -> list[str]:
    removed: list[str] = []
    for entry in broker.dlq.entries(queue):
        if len(removed) >= limit:
            break
        if entry["enteredAt"] <= threshold:
            job_id = entry["job"].id
            broker.dlq.remove(queue, job_id)
            removed.append(job_id)
    broker.transitions.drop_dead_letters(queue, removed)
    return removed
