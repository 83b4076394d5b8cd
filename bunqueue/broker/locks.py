"""Lease renewal and job heartbeats: ExtendLock(s), JobHeartbeat(B).

Renewing a lease also counts as hearing from the job (``lastHeartbeat``), which is what stall detection
looks at, and marks the lease as renewed, which keeps the job active when the connection that pulled it
closes (a pooled worker may heartbeat from another socket; lease expiry reclaims it if it really died).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from bunqueue import errors
from bunqueue.broker import states
from bunqueue.broker.clock import now_ms
from bunqueue.broker.deadlines import LEASES
from bunqueue.broker.stalls import max_stalls

if TYPE_CHECKING:
    from bunqueue.broker.broker import Broker


def extend_lock(
    broker: Broker, job_id: Any, token: Any, duration: float | None, now: float | None = None
) -> bool:
    """Renew the lease of ``job_id`` to now + duration (its current ttl when None).

    Any token that is given must be the lease's; an omitted one renews the current lease, as in the
    reference. False when there is no such lease.
    """
    if type(job_id) is not str:
        return False
    leases = broker.leases
    lease_token = leases.token(job_id)
    if lease_token is None or (token and token != lease_token):
        return False
    if now is None:
        now = now_ms()
    leases.renew(job_id, now, duration)
    job = broker.jobs.get(job_id)
    if job is not None:
        job.last_heartbeat = now
    if duration is not None:
        # A shorter lease (0 or less ends it now) may expire before anything the lease timer waits for.
        broker.wake_at(LEASES, now + max(duration, 0.0))
    return True


def job_heartbeat(broker: Broker, job_id: Any, token: Any, duration: float | None, now: float) -> bool:
    """An active job is alive. With a token the lease is renewed too (by ``duration`` if given)."""
    job = broker.jobs.get(job_id) if type(job_id) is str else None
    if job is None or job.state != states.ACTIVE:
        return False
    if token:
        return extend_lock(broker, job_id, token, duration, now)
    job.last_heartbeat = now
    return True


def settle_leases(broker: Broker, now: float) -> float | None:
    """Active jobs whose lease ran out go back to their queue at once (no backoff), charged an attempt
    and a stall; to the DLQ when the attempts or the queue's maxStalls run out."""
    for job_id in broker.leases.pop_expired(now):
        job = broker.jobs.get(job_id)
        if job is None or job.state != states.ACTIVE:
            continue
        q = broker._leave_active(job)
        job.attempts += 1
        job.stall_count += 1
        job.last_heartbeat = now
        stall_cap = max_stalls(q)
        attempts_out = job.attempts >= job.max_attempts
        to_dlq = attempts_out or (stall_cap > 0 and job.stall_count >= stall_cap)
        if broker.events.wanted:
            broker.events.stalled(job, to_dlq)
        if to_dlq:
            reason, error = "stalled", errors.LOCK_EXPIRED
            if attempts_out:
                reason = "max_attempts_exceeded"
                error = errors.lock_expired_at_max_attempts(job.max_attempts)
            job.started_at = math.nan
            broker._fail_terminally(job, reason, error, now, False)
        else:
            broker._record_failure(job, job.attempts, "stalled", errors.LOCK_EXPIRED, now)
            job.started_at = math.nan
            broker._enqueue(q, job, now)
            broker.store.job_changed(job)
    return broker.leases.next_deadline()
