"""Lease renewal and job heartbeats: ExtendLock(s), JobHeartbeat(B).

Renewing a lease also counts as hearing from the job (``lastHeartbeat``), which is what stall detection
looks at, and marks the lease as renewed, which keeps the job active when the connection that pulled it
closes (a pooled worker may heartbeat from another socket; lease expiry reclaims it if it really died:
``Transitions.expire_leases``).
"""
from __future__ import annotations

from typing import Any

from bunqueue.broker import states
from bunqueue.broker.timers.deadlines import LEASES
from bunqueue.broker.wiring import Wiring


def extend_lock(
    broker: Wiring, job_id: Any, token: Any, duration: float | None, now: float | None = None
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
        now = broker.clock()
    leases.renew(job_id, now, duration)
    job = broker.jobs.get(job_id)
    if job is not None:
        job.last_heartbeat = now
    if duration is not None:
        # A shorter lease (0 or less ends it now) may expire before anything the lease timer waits for.
        broker.wake_at(LEASES, now + max(duration, 0.0))
    return True


def extend_locks(broker: Wiring, renewals: list[tuple[Any, Any, float | None]], now: float) -> int:
    """ExtendLocks: how many of the (id, token, duration) leases were renewed, in order."""
    return sum(extend_lock(broker, job_id, token, duration, now) for job_id, token, duration in renewals)


def job_heartbeat(broker: Wiring, job_id: Any, token: Any, duration: float | None, now: float) -> bool:
    """An active job is alive. With a token the lease is renewed too (by ``duration`` if given)."""
    job = broker.jobs.get(job_id) if type(job_id) is str else None
    if job is None or job.state != states.ACTIVE:
        return False
    if token:
        return extend_lock(broker, job_id, token, duration, now)
    job.last_heartbeat = now
    return True


def job_heartbeats(broker: Wiring, beats: list[tuple[Any, Any]], now: float) -> int:
    """JobHeartbeatB: how many of the (id, token) heartbeats were heard, in order."""
    return sum(job_heartbeat(broker, job_id, token, None, now) for job_id, token in beats)
