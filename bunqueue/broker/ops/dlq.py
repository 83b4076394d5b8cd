"""The DLQ and out of completion: Dlq, GetDlqStats, GetDlqConfig read it; RetryDlq, PurgeDlq, RemoveDlqJob,
SetDlqConfig and RetryCompleted change it.

The moves themselves (a retry, a restart of a completed job, the DLQ maintenance) are transitions
(``Transitions.retry_dead``, ``requeue_completed``, ``maintain_dlq``).
"""
from __future__ import annotations

from typing import Any

from bunqueue.broker import states
from bunqueue.broker.components import eventnames
from bunqueue.broker.components.deadletters import DEFAULT_CONFIG, Entry, merge_config
from bunqueue.broker.wiring import Wiring


def entries(broker: Wiring, queue: str, spec: dict[str, Any] | None) -> list[Entry]:
    """A queue's DLQ entries, oldest first: all of them, or those the checked ``filter`` selects."""
    if spec is None:
        return broker.dlq.entries(queue)
    return broker.dlq.select(queue, spec, broker.clock())


def entry(broker: Wiring, job_id: str) -> Entry | None:
    return broker.dlq.get(job_id)


def stats(broker: Wiring, queue: str) -> dict[str, Any]:
    return broker.dlq.stats(queue, broker.clock())


def config(broker: Wiring, queue: str) -> dict[str, Any]:
    return dict(broker.dlq.config(queue))


def retry_entries(broker: Wiring, entries: list[Entry], now: float, job_id: str | None = None) -> int:
    """Retry ``entries`` (of one queue); ``job_id`` when the command named one job."""
    t = broker.transitions
    count = sum(1 for entry in entries if t.retry_dead(entry, now, False))
    if count and broker.events.notices:
        retried: dict[str, Any] = {"queue": entries[0]["job"].queue, "count": count}
        if job_id is None:
            broker.events.notify(eventnames.DLQ_RETRY_ALL, retried)
        else:
            retried["jobId"] = job_id
            broker.events.notify(eventnames.DLQ_RETRIED, retried)
    return count


def purge(broker: Wiring, queue: str) -> int:
    t = broker.transitions
    removed = t.dlq.clear(queue)
    t.drop_dead_letters(queue, [entry["job"].id for entry in removed])
    if removed and broker.events.notices:
        broker.events.notify(eventnames.DLQ_PURGED, {"queue": queue, "count": len(removed)})
    return len(removed)


def remove_entry(broker: Wiring, queue: str, job_id: str) -> bool:
    t = broker.transitions
    if t.dlq.remove(queue, job_id) is None:
        return False
    t.drop_dead_letters(queue, [job_id])
    return True


def set_config(broker: Wiring, queue: str, changes: dict[str, Any]) -> None:
    t = broker.transitions
    q = t.queues.of(queue)
    merged = merge_config(q.dlq_config or DEFAULT_CONFIG, changes)
    q.dlq_config = None if merged == DEFAULT_CONFIG else merged
    # A lower maxEntries applies at once; the new retry policy to every entry's next maintenance time.
    t.drop_dead_letters(queue, t.dlq.overflow(queue))
    t.dlq.reschedule_queue(queue)
    t.store.queue_changed(queue, q.settings())
    if broker.events.notices:
        broker.events.notify(eventnames.CONFIG_DLQ_CHANGED, {"queue": queue, "config": changes})


# -- completed jobs ------------------------------------------------------------------------------


def retry_completed(
    broker: Wiring, queue: str, job_id: str | None, limit: float, cutoff: float, now: float
) -> int:
    """RetryCompleted: one job by id, or the oldest completions (up to ``limit``, at or before ``cutoff``)."""
    t = broker.transitions
    q = t.queues.get(queue)
    if q is None:
        return 0
    if job_id is not None:
        job = t.jobs.get(job_id)
        if job is None or job.queue != queue or job.state != states.COMPLETED:
            return 0
        return int(t.requeue_completed(q, job, now))
    count = 0
    jobs = t.jobs
    for completed_id in list(q.completed):
        if count >= limit:
            break
        job = jobs[completed_id]
        if job.completed_at <= cutoff:
            count += t.requeue_completed(q, job, now)
    return count
