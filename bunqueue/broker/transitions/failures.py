"""The paths of an attempt that does not end in an ACK: lost attempts, retries, terminal failure, the DLQ.

A FAIL, a job timeout, an expired lease, a confirmed stall and a restart all go through one door,
``lose_attempt``; the causes differ only in what they charge and where the job goes.
"""
from __future__ import annotations

import math
from typing import Any

from bunqueue import errors
from bunqueue._core.jobs import Job, wire_number
from bunqueue.broker import states
from bunqueue.broker.components import eventnames
from bunqueue.broker.components.backoff import retry_delay
from bunqueue.broker.components.deadletters import BLOCKED_RETRY_DELAY, Entry, can_auto_retry, is_expired
from bunqueue.broker.components.queues import QueueState
from bunqueue.broker.timers.cronregistry import is_spawned
from bunqueue.broker.timers.stalls import max_stalls
from bunqueue.broker.transitions.core import TransitionCore
from bunqueue.broker.transitions.moves import CHECKED, check_move

# maxStalls for attempts a restart interrupted (the queue's stall settings are not consulted).
DEFAULT_MAX_STALLS = 3

# Why an attempt was lost (``lose_attempt``). The first two are failures the worker or its timeout
# reported; the other three are stalls: the worker went silent, or the server did.
FAILED = "fail"
TIMED_OUT = "timeout"
LEASE_EXPIRED = "lease"
STALLED = "stall"
INTERRUPTED = "restart"
INTERRUPTED_ERROR = "Interrupted by a restart"


class Transitions(TransitionCore):
    """The broker's transitions: ``TransitionCore``'s moves and the failure paths."""

    __slots__ = ()

    # -- lost attempts -------------------------------------------------------------------------------

    def lose_attempt(
        self,
        job: Job,
        cause: str,
        now: float,
        error: Any = None,
        stack: Any = None,
        unrecoverable: bool = False,
        remove: bool = False,
    ) -> None:
        """An attempt that will not be ACKed: charged, then retried or failed terminally (the DLQ).

        ``cause`` is FAILED (``error``, ``stack``, ``unrecoverable`` and ``remove`` come from the FAIL),
        TIMED_OUT, LEASE_EXPIRED, STALLED or INTERRUPTED (the job was active when the server stopped; it
        is no longer in its queue's active set).
        """
        q = self.queues.of(job.queue) if cause is INTERRUPTED else self.leave_active(job)
        if cause is not FAILED and cause is not TIMED_OUT and is_spawned(job):
            self.drop_spawned(job)
            return
        job.attempts += 1
        if cause is FAILED or cause is TIMED_OUT:
            self._failed_attempt(q, job, cause, now, error, stack, unrecoverable, remove)
        else:
            self._stalled_attempt(q, job, cause, now)

    def _failed_attempt(
        self, q: QueueState, job: Job, cause: str, now: float, error: Any, stack: Any, unrecoverable: bool,
        remove: bool,
    ) -> None:
        """A reported failure: recorded, then retried with backoff unless it was the last attempt."""
        attempts = job.attempts
        if stack is not None:
            job.stacktrace = cap_stack(stack, job.stack_trace_limit)
        terminal = unrecoverable or attempts >= job.max_attempts
        if cause is TIMED_OUT:
            reason = "timeout"
        else:
            reason = "max_attempts_exceeded" if terminal else "explicit_fail"
        self.record_failure(job, reason, error, now)
        entry: dict[str, Any] = {"state": states.FAILED_NAME, "timestamp": now}
        if error is not None:
            entry["error"] = error
        entry["attempt"] = attempts
        job.note(entry)
        if terminal:
            self.fail_terminally(job, reason, error, now, remove)
        else:
            self.retry(q, job, now)
            self.counters.on_failed(job.queue, now, False)
        if self.events.wanted:
            self.events.failed(job, error, terminal)

    def _stalled_attempt(self, q: QueueState, job: Job, cause: str, now: float) -> None:
        """A silent worker (or server): a stall is charged too; the DLQ when attempts or stalls run out.

        An expired lease goes back at once (no backoff) and a queue's maxStalls of 0 means no limit for
        it; a confirmed stall and an interrupted attempt wait their backoff.
        """
        job.stall_count += 1
        attempts_out = job.attempts >= job.max_attempts
        if cause is LEASE_EXPIRED:
            cap = max_stalls(q)
            to_dlq = attempts_out or (cap > 0 and job.stall_count >= cap)
        elif cause is STALLED:
            to_dlq = attempts_out or job.stall_count >= max_stalls(q)
        else:
            to_dlq = attempts_out or job.stall_count >= DEFAULT_MAX_STALLS
        if cause is not INTERRUPTED:
            job.last_heartbeat = now
            self.counters.on_event(job.queue)
            if self.events.wanted:
                self.events.stalled(job, to_dlq)
        if to_dlq:
            reason = "max_attempts_exceeded" if attempts_out else "stalled"
            error = stall_error(job, cause, attempts_out)
            job.started_at = math.nan
            if cause is INTERRUPTED:
                self.record_failure(job, reason, error, now)
            self.fail_terminally(job, reason, error, now, False)
        elif cause is LEASE_EXPIRED:
            self.record_failure(job, "stalled", errors.LOCK_EXPIRED, now)
            job.started_at = math.nan
            self.requeue(q, job, job.run_at, now)
        elif cause is STALLED:
            self.record_failure(job, "stalled", errors.STALLED, now)
            job.started_at = math.nan
            job.note({"state": states.FAILED_NAME, "timestamp": now, "error": errors.STALLED,
                               "attempt": job.attempts})
            self.retry(q, job, now)
        else:
            # The interrupted attempt keeps its start time until the next pull, as in the reference.
            self.requeue(q, job, now + retry_delay(job.backoff, job.backoff_config, job.attempts), now)

    def retry(self, q: QueueState, job: Job, now: float) -> None:
        """Back to waiting after a lost attempt, with backoff."""
        attempts = job.attempts
        # The attempt's start time goes, as in the reference (GetJob shows null).
        job.started_at = math.nan
        job.note({"state": states.WAITING, "timestamp": now, "attempt": attempts + 1})
        self.requeue(q, job, now + retry_delay(job.backoff, job.backoff_config, attempts), now)

    def record_failure(self, job: Job, reason: str, error: Any, now: float) -> None:
        """One entry of the job's failure history (its DLQ entry's ``attempts``)."""
        started = None if math.isnan(job.started_at) else job.started_at
        self.records.failures.setdefault(job.id, []).append(
            {
                "attempt": job.attempts,
                # A job that never ran (a discarded waiting job) reports its creation time.
                "startedAt": job.created_at if started is None else started,
                "failedAt": now,
                "reason": reason,
                "error": error,
                "duration": wire_number(now - started) if started is not None else 0,
            }
        )

    def fail_terminally(self, job: Job, reason: str, error: Any, now: float, remove: bool) -> None:
        if job.unique_key is not None:
            self.keys.release(job)
        self.counters.on_failed(job.queue, now, True)
        if remove or job.remove_on_fail:
            self.records.delete(job)
        else:
            self.dead_letter(job, reason, error, now)
        if job.parent_id is not None and self.events.notices:
            self.events.notify(eventnames.FLOW_FAILED, {
                "parentJobId": job.parent_id, "failedChildId": job.id, "queue": job.queue,
                "error": errors.MAX_ATTEMPTS_EXCEEDED if error is None else error,
            })
        if self.flows is not None:
            if job.parent_id is not None:
                self.flows.child_failed(job, error, now)
            if job.children_ids:
                self.flows.forget_parent(job.id)

    # -- the DLQ -------------------------------------------------------------------------------------

    def dead_letter(self, job: Job, reason: str, error: Any, now: float) -> None:
        """File a job in its queue's DLQ; the oldest entries beyond maxEntries are deleted."""
        if CHECKED:
            check_move(job, states.FAILED)
        job.state = states.FAILED
        entry, evicted = self.dlq.add(job, reason, error, self.records.failures.pop(job.id, []), now)
        self.store.job_changed(job)
        self.store.dlq_changed(job.queue, entry)
        self.drop_dead_letters(job.queue, evicted)
        if self.events.notices:
            self.events.notify(eventnames.DLQ_ADDED, {"queue": job.queue, "jobId": job.id, "reason": reason})

    def drop_dead_letters(self, queue: str, job_ids: list[str]) -> None:
        """Delete jobs whose entries already left the DLQ (evicted, expired, purged, cleaned)."""
        for job_id in job_ids:
            self.store.dlq_removed(queue, job_id)
            dropped = self.jobs.get(job_id)
            if dropped is not None:
                self.records.delete(dropped)

    def discard(self, job: Job, error: str | None, now: float, announce: bool) -> None:
        """Straight to the DLQ (reason unknown), no attempt charged, from waiting, delayed, waiting-children
        or active: Discard (``announce`` False) and failParentOnFailure (``announce``: a ``failed`` event)."""
        if job.state == states.ACTIVE:
            self.leave_active(job)
        else:
            self.take_out(job)
        if job.unique_key is not None:
            self.keys.release(job)
        self.record_failure(job, "unknown", error, now)
        self.dead_letter(job, "unknown", error, now)
        if announce and self.events.wanted:
            self.events.failed(job, error, True)

    def retry_dead(self, entry: Entry, now: float, automatic: bool) -> bool:
        """Move one DLQ entry's job back to waiting; False when its unique key is taken.

        A manual retry starts a new history; an automatic one keeps the entry's attempts and generation, so
        the job returns to the same DLQ entry lifetime (and retry count) if it fails again.
        """
        job: Job = entry["job"]
        if self.keys.taken_by_another(job, now):
            return False
        if automatic:
            self.dlq.keep_generation(entry, now)
            self.records.failures[job.id] = list(entry["attempts"])
        else:
            self.dlq.generations.pop(job.id, None)
            self.records.failures.pop(job.id, None)
        self.dlq.remove(job.queue, job.id)
        self.store.dlq_removed(job.queue, job.id)
        self.restart(job, now)
        return True

    def maintain_dlq(self, now: float) -> float | None:
        """Run the DLQ work that is due (automatic retries first, then expiry); the next due time."""
        dlq = self.dlq
        # Queue -> [entries retried, entries expired], counted only while a stream listens.
        told: dict[str, list[int]] | None = {} if self.events.notices else None
        for entry in dlq.pop_due(now):
            queue = entry["job"].queue
            config = dlq.config(queue)
            retry = can_auto_retry(entry, config, now)
            if retry and self.retry_dead(entry, now, True):
                if told is not None:
                    told.setdefault(queue, [0, 0])[0] += 1
                continue
            expires_at = entry["expiresAt"]
            if is_expired(entry, now):
                dlq.remove(queue, entry["job"].id)
                self.drop_dead_letters(queue, [entry["job"].id])
                if told is not None:
                    told.setdefault(queue, [0, 0])[1] += 1
            elif retry:
                # Its unique key is held by another live job: try again later (or expire first).
                retry_at = now + BLOCKED_RETRY_DELAY
                dlq.postpone(entry, retry_at if expires_at is None else min(retry_at, expires_at))
            else:
                dlq.schedule(entry, config)
        if told:
            self._dlq_maintained(told)
        return dlq.next_due()

    def _dlq_maintained(self, told: dict[str, list[int]]) -> None:
        """dlq:auto-retried, then dlq:expired, for each queue with any, as the original's maintenance."""
        for queue, (retried, expired) in told.items():
            if retried:
                self.events.notify(eventnames.DLQ_AUTO_RETRIED, {"queue": queue, "count": retried})
            if expired:
                self.events.notify(eventnames.DLQ_EXPIRED, {"queue": queue, "count": expired})

    # -- deadlines -----------------------------------------------------------------------------------

    def expire_leases(self, now: float) -> float | None:
        """Active jobs whose lease ran out lose their attempt; the next lease deadline."""
        jobs = self.jobs
        renewals: list[int] | None = [] if self.events.notices else None
        for i, job_id in enumerate(self.leases.pop_expired(now, renewals)):
            job = jobs.get(job_id)
            if job is not None and job.state == states.ACTIVE:
                self.lose_attempt(job, LEASE_EXPIRED, now)
                if renewals is not None and self.events.notices:
                    self.events.notify(eventnames.JOB_LOCK_EXPIRED, {
                        "jobId": job_id, "queue": job.queue, "renewalCount": renewals[i]})
        return self.leases.next_deadline()

    def expire_timeouts(self, now: float) -> float | None:
        for job in self.timeouts.due(now):
            if job.state == states.ACTIVE:
                self.lose_attempt(job, TIMED_OUT, now, errors.JOB_TIMEOUT_EXCEEDED)
                if self.events.notices:
                    self.events.notify(
                        eventnames.JOB_TIMEOUT, {"jobId": job.id, "queue": job.queue, "timeout": job.timeout})
        return self.timeouts.deadlines.peek_time()

    def expire_stalls(self, now: float) -> float | None:
        for job in self.stalls.due(now):
            if job.state == states.ACTIVE:
                self.lose_attempt(job, STALLED, now)
        return self.stalls.next_check()


def stall_error(job: Job, cause: str, attempts_out: bool) -> str:
    """The DLQ error of a stall that ran out of attempts or stalls."""
    if cause is LEASE_EXPIRED:
        return errors.lock_expired_at_max_attempts(job.max_attempts) if attempts_out else errors.LOCK_EXPIRED
    if cause is STALLED:
        return (
            errors.stalled_at_max_attempts(job.max_attempts) if attempts_out
            else errors.stalled_times(job.stall_count)
        )
    return INTERRUPTED_ERROR


def cap_stack(stack: Any, limit: Any) -> list[str] | None:
    if type(stack) is not list:
        return None
    lines = [line for line in stack[:100] if type(line) is str]
    cap = int(limit) if limit is not None else 10
    if cap <= 0:
        return None
    return lines[:cap]
