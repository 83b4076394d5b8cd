"""A queue's rate and concurrency limits (RateLimit, SetConcurrency): the token bucket, the concurrency cap
and their stored form. ``QueueState.limits`` is None for a queue without limits; setting, reporting and
the wake-ups of pulls the bucket held back are ``timers.ratelimits``."""
from __future__ import annotations

import math
from typing import Any

from bunqueue._core.jobs import wire_number
from bunqueue.options import js_finite

DEFAULT_RATE_DURATION = 1000.0


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
        wait = (1.0 - tokens) / rate
        # A rate so small that no token comes in any finite time: the original answers Infinity.
        return math.ceil(wait) if math.isfinite(wait) else wait

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
