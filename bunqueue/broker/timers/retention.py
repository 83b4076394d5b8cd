"""Completed-job retention by age (``--completed-retention-ms``): a completed job goes, from memory and from
the store, once it has been completed that long.

Each completed job's removal time sits in one heap keyed by job id, entered when it completes (or is read
back at start-up); the server arms one loop timer for the earliest. An entry that comes due is checked
against the job as it is then: a job retried, removed or replaced since is left alone. Jobs whose memory
copy was evicted while a durable store keeps their row are remembered by queue until their time, so their
row (and the queue's completed count) goes too.
"""
from __future__ import annotations

import math
from collections.abc import Callable

from bunqueue._core.jobs import Job
from bunqueue._core.timers import TimerHeap
from bunqueue.broker import states
from bunqueue.broker.components.queues import Queues
from bunqueue.broker.components.records import JobRecords
from bunqueue.broker.timers.deadlines import RETENTION, Alarms
from bunqueue.storage import Store


class CompletedRetention:
    def __init__(self, records: JobRecords, queues: Queues, store: Store, alarms: Alarms) -> None:
        self.records = records
        self.queues = queues
        self.store = store
        self.alarms = alarms
        # How long a completed job is kept (ms); None keeps it (until evicted by count).
        self.age_ms: int | None = None
        self.deadlines = TimerHeap()
        # Completed jobs held only by the durable store (evicted from memory): job id -> queue.
        self.on_disk: dict[str, str] = {}
        # Removes an in-memory completed job as Clean does (set by the wiring: Transitions' removal).
        self.remove: Callable[[Job], None] = _unset

    def completed(self, job_id: str, completed_at: float) -> None:
        age = self.age_ms
        if age is None:
            return
        when = completed_at + age
        self.deadlines.push(job_id, when)
        self.alarms.arm(RETENTION, when)

    def evicted(self, job_id: str, queue: str) -> None:
        """A completed job's memory copy went while its row stays (a durable store)."""
        if self.age_ms is not None and self.deadlines.when(job_id) is not None:
            self.on_disk[job_id] = queue

    def restored_on_disk(self, job_id: str, queue: str, completed_at: float) -> None:
        """A completed row read at start-up but not brought into memory."""
        if self.age_ms is not None:
            self.on_disk[job_id] = queue
            # A row without a completion time is as old as can be: it goes at once.
            self.completed(job_id, 0.0 if math.isnan(completed_at) else completed_at)

    def forget_queue(self, queue: str) -> None:
        """Obliterate: the queue's rows are gone already."""
        if self.on_disk:
            for job_id in [k for k, v in self.on_disk.items() if v == queue]:
                del self.on_disk[job_id]
                self.deadlines.remove(job_id)

    def expire(self, now: float) -> float | None:
        """Remove the completed jobs whose age came due; the next removal time."""
        jobs = self.records.jobs
        for job_id in self.deadlines.pop_due(now):
            queue = self.on_disk.pop(job_id, None)
            job = jobs.get(job_id)
            if job is not None:
                if job.state == states.COMPLETED and completed_time(job) + (self.age_ms or 0) <= now:
                    self.remove(job)
                    self.records.add_proof(job_id)
            elif queue is not None:
                self.store.job_removed(job_id)
                q = self.queues.get(queue)
                if q is not None and q.n_completed > 0:
                    q.n_completed -= 1
        return self.deadlines.peek_time()


def completed_time(job: Job) -> float:
    """When a completed job completed (its creation for a record that lacks the time)."""
    when = job.completed_at
    return job.created_at if math.isnan(when) else when


def _unset(job: Job) -> None:  # pragma: no cover - the wiring always sets it
    raise RuntimeError("retention removal not wired")
