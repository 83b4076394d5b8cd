"""The per-connection rate limit: a read's frames counted at once answer as frame-by-frame counting does."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bunqueue.server.ratelimit import RequestRateLimiter

HOUR_MS = 3_600_000


def test_allow_many_allows_the_first_ones_up_to_the_limit() -> None:
    limiter = RequestRateLimiter(5, HOUR_MS)
    assert limiter.allow_many(3) == 3
    assert limiter.allow_many(4) == 2
    assert limiter.allow_many(2) == 0
    assert limiter.allow() is False


def test_give_back_uncounts_requests_that_did_not_run() -> None:
    limiter = RequestRateLimiter(4, HOUR_MS)
    assert limiter.allow_many(4) == 4
    limiter.give_back(2)
    assert limiter.allow_many(3) == 2


@settings(max_examples=200, deadline=None)
@given(limit=st.integers(1, 40), reads=st.lists(st.integers(0, 15), max_size=12))
def test_allow_many_matches_one_allow_per_request(limit: int, reads: list[int]) -> None:
    batched = RequestRateLimiter(limit, HOUR_MS)
    single = RequestRateLimiter(limit, HOUR_MS)
    for n in reads:
        assert batched.allow_many(n) == sum(single.allow() for _ in range(n))


@settings(max_examples=200, deadline=None)
@given(limit=st.integers(1, 20), steps=st.lists(st.tuples(st.integers(0, 8), st.integers(0, 1500)), max_size=20))
def test_allow_matches_allow_many_across_windows(limit: int, steps: list[tuple[int, int]]) -> None:
    # Time moves between reads, so the previous bucket's share of the window is part of each answer.
    clock = [1000.0]
    batched = RequestRateLimiter(limit, 1000, lambda: clock[0])
    single = RequestRateLimiter(limit, 1000, lambda: clock[0])
    for n, ms in steps:
        clock[0] += ms / 1000
        assert batched.allow_many(n) == sum(single.allow() for _ in range(n))
