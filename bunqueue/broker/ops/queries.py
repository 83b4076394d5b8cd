"""Read-only queries over a queue's counters: GetJobCounts, Count and GetJobByCustomId (GetJob, GetState
and GetResult use the facade's ``find_job``/``find_result``)."""
from __future__ import annotations

from typing import Any

from bunqueue._core.jobs import Job
from bunqueue.broker.wiring import Wiring

NO_COUNTS = {
    "waiting": 0, "prioritized": 0, "delayed": 0, "active": 0, "completed": 0, "failed": 0,
    "waiting-children": 0, "paused": 0,
}


def job_counts(broker: Wiring, queue: str, split_paused: bool = True) -> dict[str, int]:
    """GetJobCounts' counts. Without ``split_paused`` a paused queue's ready jobs stay waiting or
    prioritized, as the original's `queue:counts` event counts them."""
    q = broker.queues.get(queue)
    if q is None:
        return dict(NO_COUNTS)
    broker.promote_due(q, broker.clock())
    paused = q.paused and split_paused
    return {
        "waiting": 0 if paused else q.n_waiting,
        "prioritized": 0 if paused else q.n_prioritized,
        "delayed": len(q.delayed),
        "active": q.n_active,
        "completed": q.n_completed,
        "failed": broker.dlq.count(queue),
        "waiting-children": q.n_waiting_children,
        "paused": q.n_ready if paused else 0,
    }


def count_queued(broker: Wiring, queue: str) -> int:
    """Count: the jobs of a queue not yet running or finished."""
    q = broker.queues.get(queue)
    return q.n_queued if q is not None else 0


def job_by_custom_id(broker: Wiring, custom_id: Any) -> Job | None:
    """The job in memory that was pushed with ``customId`` (its id), None for any other."""
    job = broker.jobs.get(custom_id) if type(custom_id) is str else None
    return job if job is not None and job.custom_id is not None else None
