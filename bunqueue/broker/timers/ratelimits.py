"""Queue rate and concurrency limits: RateLimit, SetConcurrency and what PULL/PULLB may claim under them.

A queue without limits has ``QueueState.limits is None``; that attribute check is all a pull pays. A
limited queue answers "how many may I claim now" in O(1) before anything is popped, so nothing is taken
out of the heap and put back, and a limited queue never holds up pulls of another queue.

Rate limit: a token bucket of ``limit`` tokens refilled continuously at ``limit`` per ``duration`` ms,
full when set (as the reference). A ``ttl`` clears the limit by itself; the expiry is applied lazily
whenever the limit is read, as in the reference. Long-pollers refused by the bucket are woken when a
token is due: the queue goes into one heap keyed by queue name (``QueueLimitControls.due``), served by one
loop timer.

Concurrency: at most ``limit`` active jobs. The count is the queue's exact active counter, so jobs that
were already running when the limit was set count too. A job leaving active wakes one waiter.
"""
from __future__ import annotations

import math
from typing import Any

from bunqueue._core.jobs import wire_number
from bunqueue._core.timers import TimerHeap
from bunqueue.broker.components import eventnames
from bunqueue.broker.components.eventhub import EventHub
from bunqueue.broker.components.queuelimits import DEFAULT_RATE_DURATION, QueueLimits
from bunqueue.broker.components.queues import Queues, QueueState
from bunqueue.broker.timers.deadlines import RATE_LIMITS, Alarms
from bunqueue.storage import Store

# GetQueueLimits rateLimitTtl when the queue has no rate limit.
NO_RATE_LIMIT_TTL = -2


def admit(controls: QueueLimitControls, q: QueueState, count: int, now: float) -> int:
    """How many of ``count`` jobs a pull of limited queue ``q`` may claim now (0: none).

    Concurrency is checked first, then the rate, as in the reference. A rate refusal with jobs ready
    schedules a wake-up of the queue's long-pollers for when a token is due. A limit that holds back a
    ready job the pull would have taken is told (concurrency:rejected, ratelimit:rejected).
    """
    limits = q.limits
    assert limits is not None
    concurrency = limits.concurrency
    if concurrency is not None:
        free = max(math.ceil(concurrency - q.n_active), 0)
        if free < count:
            if q.n_ready > free and controls.events.notices:
                controls.events.notify(eventnames.CONCURRENCY_REJECTED, {"queue": q.name})
            if not free:
                return 0
            count = free
    if limits.rate_max is not None:
        if limits.expire_rate(now):
            controls.changed(q)
            return count
        room = limits.rate_room(now)
        if room < count and q.n_ready > max(room, 0) and controls.events.notices:
            controls.events.notify(eventnames.RATELIMIT_REJECTED, {"queue": q.name})
        if room <= 0:
            if q.n_ready:
                controls.wait(q, now)
            return 0
        count = min(count, room)
    return count


def took(q: QueueState, n: int) -> None:
    """``n`` jobs of limited queue ``q`` were claimed: spend their tokens."""
    limits = q.limits
    if limits is not None and limits.rate_max is not None:
        limits.tokens -= n


def limits_status(limits: QueueLimits | None, n_active: int, max_jobs: float | None, now: float) -> dict[str, Any]:
    """GetQueueLimits ``limits`` of a queue with ``n_active`` running jobs whose lapsed rate limit is
    already cleared: the live configuration and whether the concurrency limit is reached."""
    rate: dict[str, Any] | None = None
    ttl: int | float = NO_RATE_LIMIT_TTL
    if limits is not None and limits.rate_max is not None:
        duration = limits.rate_duration if limits.rate_duration is not None else DEFAULT_RATE_DURATION
        rate = {"max": wire_number(limits.rate_max), "duration": wire_number(duration)}
        ttl = limits.rate_ttl(now, max_jobs)
    concurrency = limits.concurrency if limits is not None else None
    return {
        "rateLimit": rate,
        "rateLimitTtl": ttl,
        "concurrencyLimit": None if concurrency is None else wire_number(concurrency),
        "maxed": concurrency is not None and n_active >= concurrency,
    }


def _limits_of(q: QueueState) -> QueueLimits:
    if q.limits is None:
        q.limits = QueueLimits()
    return q.limits


class QueueLimitControls:
    """The queues' rate and concurrency limits: RateLimit/SetConcurrency and their clears, which persist
    the queue's controls and wake its long-pollers; GetQueueLimits' status; and the queues whose
    long-pollers wait for a rate-limit token, by the time the token is due (``due``, the RATE_LIMITS
    deadline)."""

    def __init__(self, queues: Queues, store: Store, alarms: Alarms, events: EventHub | None = None) -> None:
        self.events = events if events is not None else EventHub()
        self.queues = queues
        self.store = store
        self.alarms = alarms
        self.due = TimerHeap()

    def changed(self, q: QueueState) -> None:
        """Persist the queue's controls after a change; drop the limits object once nothing is limited."""
        limits = q.limits
        if limits is not None and limits.empty:
            q.limits = None
        self.store.queue_changed(q.name, q.settings())

    def set_rate_limit(self, queue: str, limit: float, duration: float | None, ttl: float | None, now: float) -> None:
        q = self.queues.of(queue)
        _limits_of(q).set_rate(limit, duration, ttl, now)
        self.changed(q)
        self.forget(queue)
        q.wake(len(q.waiters))
        if self.events.notices:
            data: dict[str, Any] = {"queue": queue, "max": limit}
            if duration is not None:
                data["duration"] = duration
            if ttl is not None:
                data["ttl"] = ttl
            self.events.notify(eventnames.RATELIMIT_SET, data)

    def clear_rate_limit(self, queue: str) -> None:
        # Every clear is told, of a queue with no limit too, as the original tells it.
        if self.events.notices:
            self.events.notify(eventnames.RATELIMIT_CLEARED, {"queue": queue})
        q = self.queues.get(queue)
        if q is None or q.limits is None or q.limits.rate_max is None:
            return
        q.limits.clear_rate()
        self.changed(q)
        self.forget(queue)
        q.wake(len(q.waiters))

    def set_concurrency(self, queue: str, limit: float) -> None:
        q = self.queues.of(queue)
        _limits_of(q).concurrency = limit
        self.changed(q)
        q.wake(len(q.waiters))
        if self.events.notices:
            self.events.notify(eventnames.CONCURRENCY_SET, {"queue": queue, "concurrency": limit})

    def clear_concurrency(self, queue: str) -> None:
        if self.events.notices:
            self.events.notify(eventnames.CONCURRENCY_CLEARED, {"queue": queue})
        q = self.queues.get(queue)
        if q is None or q.limits is None or q.limits.concurrency is None:
            return
        q.limits.concurrency = None
        self.changed(q)
        q.wake(len(q.waiters))

    def status(self, queue: str, max_jobs: float | None, now: float) -> dict[str, Any]:
        """GetQueueLimits ``limits``: the live configuration and whether the concurrency limit is reached."""
        q = self.queues.get(queue)
        if q is None or q.limits is None:
            return limits_status(None, 0, max_jobs, now)
        if q.limits.expire_rate(now):
            self.changed(q)
        return limits_status(q.limits, q.n_active, max_jobs, now)

    def wait(self, q: QueueState, now: float) -> None:
        limits = q.limits
        if limits is None:
            return
        when = limits.token_due(now)
        if when is None:
            return
        armed = self.due.when(q.name)
        if armed is None or when < armed:
            self.due.push(q.name, when)
            self.alarms.arm(RATE_LIMITS, when)

    def forget(self, queue: str) -> None:
        self.due.remove(queue)

    def expire(self, now: float) -> float | None:
        for name in self.due.pop_due(now):
            q = self.queues.get(name)
            if q is None or not q.waiters:
                continue
            limits = q.limits
            if limits is None or limits.rate_max is None or limits.expire_rate(now):
                if limits is not None:
                    self.changed(q)
                q.wake(len(q.waiters))
                continue
            room = limits.rate_room(now)
            if room > 0:
                q.wake(room)
            else:
                self.wait(q, now)
        return self.due.peek_time()
