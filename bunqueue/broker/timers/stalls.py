"""Stall detection: active jobs whose worker went silent are retried or dead-lettered.

A job is stalled when it has run at least ``gracePeriod`` ms and nothing was heard of it (pull, lock
renewal, job heartbeat) for more than its ``stallTimeout``, or the queue's ``stallInterval``. Detection is
two-phase, as in the reference: a job found stalled becomes a candidate and is acted on only if it is
still stalled ``STALL_CONFIRM_MS`` later (the reference's check period), so a heartbeat that was merely
late saves it.

Nothing scans the active jobs on a period. Every active job is checked at exact times:

* Its first check is at ``startedAt + max(gracePeriod, stallInterval)``. Jobs of one queue share that
  delay and are pulled in time order, so each queue keeps them in an insertion-ordered dict
  (``QueueState.stall_watch``: one dict store per pull, one pop when the job leaves active) and only the
  front of each queue is due first: one heap entry per queue (``queue_due``).
* A job still alive at its first check, a job with its own ``stallTimeout`` and a candidate go into a heap
  keyed by job id (``exact``). Heartbeats only move ``lastHeartbeat``; a job found alive is simply
  re-scheduled for its new deadline when its entry comes up, so heartbeats cost no heap work.
"""
from __future__ import annotations

import math
from typing import Any

from bunqueue._core.jobs import Job
from bunqueue._core.timers import TimerHeap
from bunqueue.broker import states
from bunqueue.broker.components.queues import Queues, QueueState
from bunqueue.broker.components.stallconfig import DEFAULT_STALL_CONFIG
from bunqueue.broker.timers.deadlines import STALLS, Alarms

# How long a stall must persist before it is acted on: the reference's stall check period.
STALL_CONFIRM_MS = 5000.0


def config_of(q: QueueState | None) -> dict[str, Any]:
    if q is None or q.stall_config is None:
        return DEFAULT_STALL_CONFIG
    return q.stall_config


def _ms(value: Any) -> float:
    # A null setting compares as 0, as it does in the reference's arithmetic.
    return 0.0 if value is None else float(value)


def first_check_delay(cfg: dict[str, Any]) -> float:
    """From startedAt to a job's first check, for jobs without their own stallTimeout."""
    return max(_ms(cfg["gracePeriod"]), _ms(cfg["stallInterval"]))


def max_stalls(q: QueueState | None) -> float:
    return _ms(config_of(q)["maxStalls"])


class StallDetector:
    """Finds confirmed stalls; what happens to a stalled job is ``Transitions.lose_attempt``'s business."""

    def __init__(self, jobs: dict[str, Job], queues: Queues, alarms: Alarms) -> None:
        self.jobs = jobs
        self.queues = queues
        self.alarms = alarms
        # Queue name -> the first check of the job at the front of its stall_watch (or earlier).
        self.queue_due = TimerHeap()
        # Job id -> its next check: own stallTimeout, survivors of their first check, candidates.
        self.exact = TimerHeap()
        self.candidates: set[str] = set()

    # -- called by the pull path ----------------------------------------------------------------------

    def watch_queue(self, q: QueueState, now: float) -> None:
        """``q.stall_watch`` just went from empty to non-empty with jobs pulled at ``now``."""
        due = now + first_check_delay(config_of(q))
        self.queue_due.push(q.name, due)
        self.alarms.arm(STALLS, due)

    def watch_job(self, job: Job, now: float) -> None:
        """A job with its own stallTimeout started: its checks are scheduled one by one."""
        self._schedule(job.id, self._next_check(job, config_of(self.queues.get(job.queue)), now), True)

    def forget(self, job_id: str) -> None:
        """The job left active (its stall_watch entry is popped by the broker)."""
        self.exact.remove(job_id)
        self.candidates.discard(job_id)

    # -- the deadline handler -------------------------------------------------------------------------

    def due(self, now: float) -> list[Job]:
        """Run the checks due at ``now``: the jobs whose stall is confirmed (still active)."""
        jobs = self.jobs
        queues = self.queues
        stalled: list[Job] = []
        for name in self.queue_due.pop_due(now):
            q = queues.get(name)
            if q is not None and q.stall_watch:
                self._check_front(q, jobs, now, stalled)
        for job_id in self.exact.pop_due(now):
            job = jobs.get(job_id)
            if job is None or job.state != states.ACTIVE:
                self.candidates.discard(job_id)
                continue
            self._check(job, queues.get(job.queue), now, stalled)
        return stalled

    def next_check(self) -> float | None:
        return _earliest(self.queue_due.peek_time(), self.exact.peek_time())

    def _check_front(self, q: QueueState, jobs: dict[str, Job], now: float, stalled: list[Job]) -> None:
        watch = q.stall_watch
        assert watch is not None
        delay = first_check_delay(config_of(q))
        due: list[str] = []
        # One pass from the front: the dict is in pull order, so the first job not yet due ends it.
        for job_id in watch:
            job = jobs.get(job_id)
            if job is not None and job.state == states.ACTIVE:
                first = job.started_at + delay
                if first > now:
                    self.queue_due.push(q.name, first)
                    break
            due.append(job_id)
        for job_id in due:
            del watch[job_id]
            job = jobs.get(job_id)
            if job is not None and job.state == states.ACTIVE:
                self._check(job, q, now, stalled)

    def _check(self, job: Job, q: QueueState | None, now: float, stalled: list[Job]) -> None:
        cfg = config_of(q)
        job_id = job.id
        if not cfg["enabled"]:
            self.candidates.discard(job_id)
            return
        if not self._stalled(job, cfg, now):
            self.candidates.discard(job_id)
            self._schedule(job_id, self._next_check(job, cfg, now), False)
        elif job_id not in self.candidates:
            self.candidates.add(job_id)
            self._schedule(job_id, now + STALL_CONFIRM_MS, False)
        else:
            self.candidates.discard(job_id)
            stalled.append(job)

    @staticmethod
    def _interval(job: Job, cfg: dict[str, Any]) -> float:
        own = job.stall_timeout
        return _ms(cfg["stallInterval"]) if own is None else float(own)

    def _stalled(self, job: Job, cfg: dict[str, Any], now: float) -> bool:
        started = job.started_at
        if math.isnan(started) or now - started < _ms(cfg["gracePeriod"]):
            return False
        return now - job.last_heartbeat > self._interval(job, cfg)

    def _next_check(self, job: Job, cfg: dict[str, Any], now: float) -> float:
        due = max(job.started_at + _ms(cfg["gracePeriod"]), job.last_heartbeat + self._interval(job, cfg))
        # Stalled means silent for strictly longer than the interval: look again just after the boundary.
        return due if due > now else now + 1.0

    def _schedule(self, job_id: str, when: float, wake: bool) -> None:
        self.exact.push(job_id, when)
        if wake:
            self.alarms.arm(STALLS, when)

    # -- configuration -----------------------------------------------------------------------------

    def config_changed(self, q: QueueState, now: float) -> None:
        """SetStallConfig changed ``q``'s settings: re-schedule its active jobs under the new ones."""
        cfg = config_of(q)
        if not cfg["enabled"]:
            q.stall_watch = None
            return
        jobs = self.jobs
        active = [jobs[job_id] for job_id in q.active if job_id in jobs]
        if q.stall_watch is None:
            # Re-enabled: every running job of the queue is watched again, in pull order.
            q.stall_watch = {job.id: None for job in active if job.stall_timeout is None}
            for job in active:
                if job.stall_timeout is not None:
                    self.watch_job(job, now)
        else:
            for job in active:
                if job.id in self.exact and job.id not in self.candidates:
                    self._schedule(job.id, self._next_check(job, cfg, now), True)
        watch = q.stall_watch
        if watch:
            front = jobs.get(next(iter(watch)))
            started = front.started_at if front is not None else now
            due = started + first_check_delay(cfg)
            self.queue_due.push(q.name, due)
            self.alarms.arm(STALLS, due)


def _earliest(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)
