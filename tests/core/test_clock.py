"""now_ms: the wall clock's millisecond as an integral float, never behind time.time_ns() read before it."""
from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from bunqueue._core.clock import now_ms


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 200))
def test_model_each_reading_is_the_millisecond_of_time_ns_between_its_neighbours(reads: int) -> None:
    last = 0.0
    for _ in range(reads):
        before = time.time_ns() // 1_000_000
        value = now_ms()
        after = time.time_ns() // 1_000_000
        assert type(value) is float and value.is_integer()
        assert before <= value <= after and value >= last
        last = value
