"""The rate-limit token bucket and concurrency room, with explicit times."""
from __future__ import annotations

import math

import pytest

from bunqueue.broker.components.queuelimits import QueueLimits
from bunqueue.broker.facade import Broker
from bunqueue.broker.timers.ratelimits import admit, took
from bunqueue.options import js_finite

T0 = 1_000_000.0


@pytest.mark.parametrize(
    ("value", "expected"),
    [(3, 3.0), (2.5, 2.5), ("3", 3.0), (" 1e3 ", 1000.0), ("0x10", 16.0), ("", 0.0),
     ("abc", None), (math.nan, None), (math.inf, None), ("Infinity", None), (None, None), (True, None),
     ([1], None)],
)
def test_js_finite(value: object, expected: float | None) -> None:
    assert js_finite(value) == expected


def test_bucket_starts_full_and_refills_continuously() -> None:
    limits = QueueLimits()
    limits.set_rate(2, 60000, None, T0)
    assert limits.rate_room(T0) == 2
    limits.tokens -= 2
    assert limits.rate_room(T0) == 0
    assert limits.rate_ttl(T0, None) == 30000
    assert limits.token_due(T0) == T0 + 30000
    assert limits.rate_room(T0 + 29999) == 0
    assert limits.rate_room(T0 + 30000) == 1
    # Never above capacity.
    assert limits.rate_room(T0 + 10 * 60000) == 2


def test_max_jobs_probe_and_ttl() -> None:
    limits = QueueLimits()
    limits.set_rate(3, 60000, None, T0)
    limits.tokens -= 3
    assert limits.rate_ttl(T0, None) == 20000
    assert limits.rate_ttl(T0, 10) == 0
    assert limits.rate_ttl(T0, 3) == 20000
    timed = QueueLimits()
    timed.set_rate(1, 1000, 5000, T0)
    # With a ttl the reported value is the time left of the limit itself.
    assert timed.rate_ttl(T0 + 1000, None) == 4000
    assert not timed.expire_rate(T0 + 4999) and timed.expire_rate(T0 + 5000)
    assert timed.rate_max is None


def test_zero_or_negative_limits_never_admit() -> None:
    for limit in (0, -3):
        limits = QueueLimits()
        limits.set_rate(limit, None, None, T0)
        assert limits.rate_room(T0 + 1e9) == 0
        assert limits.token_due(T0) is None
        assert limits.rate_ttl(T0, None) == 0


def test_admit_takes_concurrency_then_rate() -> None:
    broker = Broker()
    q = broker.queue("q")
    q.limits = QueueLimits()
    q.limits.concurrency = 3
    q.limits.set_rate(2, 1000, None, T0)
    broker.push_many("q", [{"name": "j", "data": i} for i in range(5)])
    assert admit(broker.limit_controls, q, 10, T0) == 2
    took(q, 2)
    q.n_active = 2
    assert admit(broker.limit_controls, q, 10, T0) == 0
    # The refused rate schedules a wake-up for when the next token is due.
    assert broker.limit_controls.due.when("q") == T0 + 500
    q.n_active = 3
    assert admit(broker.limit_controls, q, 10, T0 + 10_000) == 0


def test_settings_round_trip() -> None:
    limits = QueueLimits()
    limits.set_rate(5, 2000, 1000, T0)
    limits.concurrency = 2
    restored = QueueLimits.from_settings(limits.settings(), T0 + 10)
    assert restored is not None
    assert (restored.rate_max, restored.rate_duration, restored.rate_expires_at, restored.concurrency) == (
        5, 2000, T0 + 1000, 2)
    assert QueueLimits.from_settings({}, T0) is None
