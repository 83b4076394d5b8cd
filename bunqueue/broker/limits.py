"""Queue rate and concurrency limits: RateLimit, SetConcurrency and what PULL/PULLB may claim under them.

A queue without limits has ``QueueState.limits is None``; that attribute check is all a pull pays. A
limited queue answers "how many may I claim now" in O(1) before anything is popped, so nothing is taken
out of the heap and put back, and a limited queue never holds up pulls of another queue.

Rate limit: a token bucket of ``limit`` tokens refilled continuously at ``limit`` per ``duration`` ms,
full when set (as the reference). A ``ttl`` clears the limit by itself; the expiry is applied lazily
whenever the limit is read, as in the reference. Long-pollers refused by the bucket are woken when a
token is due: the queue goes into one heap keyed by queue name (``RateLimitWakeups``), served by one loop
timer.

Concurrency: at most ``limit`` active jobs. The count is the queue's exact active counter, so jobs that
were already running when the limit was set count too. A job leaving active wakes one waiter.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from bunqueue._core.jobs import wire_number
from bunqueue._core.timers import TimerHeap
from bunqueue.broker.clock import now_ms
from bunqueue.broker.deadlines import RATE_LIMITS
from bunqueue.broker.options import js_finite

if TYPE_CHECKING:
    from bunqueue.broker.broker import Broker
    from bunqueue.broker.queue import QueueState

DEFAULT_RATE_DURATION = 1000.0
# GetQueueLimits rateLimitTtl when the queue has no rate limit.
NO_RATE_LIMIT_TTL = -2


class QueueLimits:
    __slots__ = ("concurrency", "rate_duration", "rate_expires_at", "rate_max", "refilled_at", "tokens")

    def __init__(self) -> None:
        # The configured limit as given (may be fractional, 0 or negative), or None.
        self.rate_max: float | None = None
        # As given, or None for the 1 s default.
        self.rate_duration: float | None = None
        self.rate_expires_at: float | None = None
        self.tokens = 0.0
        self.refilled_at = 0.0
        self.concurrency: float | None = None

    def set_rate(self, limit: float, duration: float | None, ttl: float | None, now: float) -> None:
        self.rate_max = limit
        self.rate_duration = duration
        self.rate_expires_at = None if ttl is None else now + ttl
        self.tokens = limit
        self.refilled_at = now

    def clear_rate(self) -> None:
        self.rate_max = self.rate_duration = self.rate_expires_at = None

    @property
    def empty(self) -> bool:
        return self.rate_max is None and self.concurrency is None

    def expire_rate(self, now: float) -> bool:
        """Drop a rate limit whose ttl has run out; True if one was dropped."""
        expires_at = self.rate_expires_at
        if expires_at is not None and now >= expires_at:
            self.clear_rate()
            return True
        return False

    def _refill(self, now: float) -> float:
        assert self.rate_max is not None
        rate = self._rate_per_ms()
        if rate > 0:
            self.tokens = min(self.rate_max, self.tokens + (now - self.refilled_at) * rate)
        self.refilled_at = now
        return self.tokens

    def _rate_per_ms(self) -> float:
        assert self.rate_max is not None
        duration = self.rate_duration if self.rate_duration is not None else DEFAULT_RATE_DURATION
        return self.rate_max / duration

    def rate_room(self, now: float) -> int:
        """Whole tokens in the bucket now."""
        tokens = self._refill(now)
        return int(tokens) if tokens >= 1 else 0

    def token_due(self, now: float) -> float | None:
        """When the bucket next holds a whole token (or the limit expires), if that ever happens."""
        due = self.rate_expires_at
        rate = self._rate_per_ms()
        if rate > 0:
            at = now + (1.0 - self.tokens) / rate
            due = at if due is None else min(due, at)
        return due

    def rate_ttl(self, now: float, max_jobs: float | None) -> int | float:
        """GetQueueLimits rateLimitTtl: the remaining limit ttl if it has one, else the token cooldown.

        With ``max_jobs`` the cooldown is 0 until that many tokens have been consumed, as in the reference.
        """
        if self.rate_expires_at is not None:
            return wire_number(max(0.0, self.rate_expires_at - now))
        assert self.rate_max is not None
        tokens = self._refill(now)
        if max_jobs is not None and self.rate_max - tokens < max_jobs:
            return 0
        rate = self._rate_per_ms()
        if tokens >= 1 or rate <= 0:
            return 0
        return math.ceil((1.0 - tokens) / rate)

    def settings(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.rate_max is not None:
            out["rateLimit"] = self.rate_max
            out["rateLimitDuration"] = self.rate_duration
            out["rateLimitExpiresAt"] = self.rate_expires_at
        if self.concurrency is not None:
            out["concurrencyLimit"] = self.concurrency
        return out

    @classmethod
    def from_settings(cls, settings: dict[str, Any], now: float) -> QueueLimits | None:
        limits = cls()
        rate = js_finite(settings.get("rateLimit"))
        if rate is not None:
            duration = js_finite(settings.get("rateLimitDuration"))
            expires_at = js_finite(settings.get("rateLimitExpiresAt"))
            limits.set_rate(rate, duration, None, now)
            limits.rate_expires_at = expires_at
        limits.concurrency = js_finite(settings.get("concurrencyLimit"))
        return None if limits.empty else limits


def admit(broker: Broker, q: QueueState, count: int, now: float) -> int:
    """How many of ``count`` jobs a pull of limited queue ``q`` may claim now (0: none).

    Concurrency is checked first, then the rate, as in the reference. A rate refusal with jobs ready
    schedules a wake-up of the queue's long-pollers for when a token is due.
    """
    limits = q.limits
    assert limits is not None
    concurrency = limits.concurrency
    if concurrency is not None:
        free = concurrency - q.n_active
        if free <= 0:
            return 0
        count = min(count, math.ceil(free))
    if limits.rate_max is not None:
        if limits.expire_rate(now):
            _changed(broker, q)
            return count
        room = limits.rate_room(now)
        if room <= 0:
            if q.n_ready:
                broker.rate_wakeups.wait(q, now)
            return 0
        count = min(count, room)
    return count


def took(q: QueueState, n: int) -> None:
    """``n`` jobs of limited queue ``q`` were claimed: spend their tokens."""
    limits = q.limits
    if limits is not None and limits.rate_max is not None:
        limits.tokens -= n


def _changed(broker: Broker, q: QueueState) -> None:
    """Persist the queue's controls after a change; drop the limits object once nothing is limited."""
    limits = q.limits
    if limits is not None and limits.empty:
        q.limits = None
    broker.store.queue_changed(q.name, q.settings())


def _limits_of(q: QueueState) -> QueueLimits:
    if q.limits is None:
        q.limits = QueueLimits()
    return q.limits


def set_rate_limit(
    broker: Broker, queue: str, limit: float, duration: float | None, ttl: float | None
) -> None:
    q = broker.queue(queue)
    _limits_of(q).set_rate(limit, duration, ttl, now_ms())
    _changed(broker, q)
    broker.rate_wakeups.forget(queue)
    broker.wake(q, len(q.waiters))


def clear_rate_limit(broker: Broker, queue: str) -> None:
    q = broker.queues.get(queue)
    if q is None or q.limits is None or q.limits.rate_max is None:
        return
    q.limits.clear_rate()
    _changed(broker, q)
    broker.rate_wakeups.forget(queue)
    broker.wake(q, len(q.waiters))


def set_concurrency(broker: Broker, queue: str, limit: float) -> None:
    q = broker.queue(queue)
    _limits_of(q).concurrency = limit
    _changed(broker, q)
    broker.wake(q, len(q.waiters))


def clear_concurrency(broker: Broker, queue: str) -> None:
    q = broker.queues.get(queue)
    if q is None or q.limits is None or q.limits.concurrency is None:
        return
    q.limits.concurrency = None
    _changed(broker, q)
    broker.wake(q, len(q.waiters))


def status(broker: Broker, queue: str, max_jobs: float | None) -> dict[str, Any]:
    """GetQueueLimits ``limits``: the live configuration and whether the concurrency limit is reached."""
    q = broker.queues.get(queue)
    limits = q.limits if q is not None else None
    if q is None or limits is None:
        return {
            "rateLimit": None, "rateLimitTtl": NO_RATE_LIMIT_TTL, "concurrencyLimit": None, "maxed": False,
        }
    now = now_ms()
    if limits.expire_rate(now):
        _changed(broker, q)
        limits = q.limits
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
        "maxed": concurrency is not None and q.n_active >= concurrency,
    }


class RateLimitWakeups:
    """Queues whose long-pollers wait for a rate-limit token, by the time the token is due."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.due = TimerHeap()

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
            self.broker.wake_at(RATE_LIMITS, when)

    def forget(self, queue: str) -> None:
        self.due.remove(queue)

    def expire(self, now: float) -> float | None:
        broker = self.broker
        for name in self.due.pop_due(now):
            q = broker.queues.get(name)
            if q is None or not q.waiters:
                continue
            limits = q.limits
            if limits is None or limits.rate_max is None or limits.expire_rate(now):
                if limits is not None:
                    _changed(broker, q)
                broker.wake(q, len(q.waiters))
                continue
            room = limits.rate_room(now)
            if room > 0:
                broker.wake(q, room)
            else:
                self.wait(q, now)
        return self.due.peek_time()

