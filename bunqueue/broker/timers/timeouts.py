"""Job ``timeout``: an active job past ``startedAt + timeout`` fails with "Job timeout exceeded".

Deadlines sit in one heap keyed by job id, entered when a job with a timeout is pulled and removed when
it leaves active, so an entry that comes due always belongs to the attempt still running. The server
arms one loop timer for the earliest deadline.

A timed-out attempt is retired: its generation (start time and lease token) is remembered, so that the
worker's late ACK or FAIL for it is answered as a no-op success ("already-finalized") instead of an error
or, worse, settling the job's next attempt. The record is bounded like the completed-job cache.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any

from bunqueue._core.jobs import Job
from bunqueue._core.leases import LeaseTable
from bunqueue._core.timers import TimerHeap
from bunqueue.broker import states
from bunqueue.broker.timers.deadlines import TIMEOUTS, Alarms


class RetiredGenerations:
    """Attempts that a timeout finalized: job id -> (startedAt, lease token or None)."""

    def __init__(self, jobs: dict[str, Job], capacity: int) -> None:
        self.jobs = jobs
        self.capacity = max(1, capacity)
        self.by_job: OrderedDict[str, tuple[float, str | None]] = OrderedDict()
        self.by_token: OrderedDict[str, str] = OrderedDict()

    def retire(self, job_id: str, started_at: float, token: str | None) -> None:
        self.forget(job_id)
        self.by_job[job_id] = (started_at, token)
        if token is not None:
            self.by_token[token] = job_id
        if len(self.by_job) > self.capacity:
            self.by_job.popitem(last=False)
        if len(self.by_token) > self.capacity:
            self.by_token.popitem(last=False)

    def forget(self, job_id: str) -> None:
        """A reused custom id starts a new job: no outcome of the old one may be mistaken for it."""
        generation = self.by_job.pop(job_id, None)
        if generation is not None and generation[1] is not None:
            self.by_token.pop(generation[1], None)

    def holds(self, job_id: Any, token: Any) -> bool:
        """Whether an ACK/FAIL of ``job_id`` with ``token`` settles an attempt a timeout already finalized.

        With a token, only that exact retired lease matches. Without one, the job's last timed-out attempt
        (if it had no lease) matches unless a later attempt is running, queued or completed.
        """
        if type(job_id) is not str:
            return False
        if token:
            return self.by_token.get(token) == job_id if type(token) is str else False
        generation = self.by_job.get(job_id)
        if generation is None or generation[1] is not None:
            return False
        job = self.jobs.get(job_id)
        if job is None:
            return True
        if job.state == states.ACTIVE:
            return False
        if job.state in (states.READY, states.DELAYED, states.COMPLETED):
            return _same_time(job.started_at, generation[0])
        return True


def _same_time(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


class JobTimeouts:
    """Finds timed-out attempts and retires them; failing them is ``Transitions.lose_attempt``'s business."""

    def __init__(self, jobs: dict[str, Job], leases: LeaseTable, alarms: Alarms, capacity: int) -> None:
        self.jobs = jobs
        self.leases = leases
        self.alarms = alarms
        self.deadlines = TimerHeap()
        self.retired = RetiredGenerations(jobs, capacity)

    def started(self, job: Job, now: float) -> None:
        """A job with a timeout became active at ``now``."""
        timeout = job.timeout
        if not timeout or timeout <= 0:
            return
        # Whole milliseconds, rounded up: the job never times out early.
        deadline = float(math.ceil(now + timeout))
        self.deadlines.push(job.id, deadline)
        self.alarms.arm(TIMEOUTS, deadline)

    def forget(self, job_id: str) -> None:
        self.deadlines.remove(job_id)

    def due(self, now: float) -> list[Job]:
        """The active jobs whose timeout came due at ``now``, their attempts retired."""
        jobs = self.jobs
        timed_out: list[Job] = []
        for job_id in self.deadlines.pop_due(now):
            job = jobs.get(job_id)
            if job is None or job.state != states.ACTIVE:
                continue
            self.retired.retire(job_id, job.started_at, self.leases.token(job_id))
            timed_out.append(job)
        return timed_out
