"""Counters: minute buckets (newest first, gaps as zeros, two weeks kept), the event journal, histograms."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bunqueue.monitoring.counters import (
    LATENCY_BOUNDS_MS,
    MAX_MINUTE_POINTS,
    MAX_QUEUE_EVENTS,
    MINUTE_MS,
    Counters,
    Histogram,
    MinuteSeries,
    QueueCounters,
)

T0 = 1_700_000_000_000.0 - 1_700_000_000_000.0 % MINUTE_MS


def test_buckets_newest_first_with_gaps() -> None:
    s = MinuteSeries()
    for t in (T0, T0 + 1, T0 + MINUTE_MS * 3 + 5, T0 + MINUTE_MS * 3 + 6, T0 + MINUTE_MS * 3 + 7):
        s.add(t)
    view = s.view(0, -1)
    assert view == {"meta": {"count": 5, "prevTS": T0 + MINUTE_MS * 3 + 7, "prevCount": 3},
                    "data": [3, 0, 0, 2], "count": 4}
    assert s.view(1, 2)["data"] == [0, 0]
    assert s.view(3, 10)["data"] == [2]
    assert s.view(4, -1)["data"] == [] and s.view(2, 1)["data"] == []


def test_old_minutes_are_pruned() -> None:
    s = MinuteSeries()
    s.add(T0)
    s.add(T0 + MINUTE_MS * MAX_MINUTE_POINTS)
    assert s.view(0, -1)["data"] == [1], "the first minute fell out of the two-week window"
    assert s.view(0, -1)["meta"]["count"] == 2
    s.add(T0 + MINUTE_MS * (MAX_MINUTE_POINTS + 1))
    assert s.view(0, -1)["count"] == 2


def test_a_clock_step_back_counts_in_the_open_minute() -> None:
    s = MinuteSeries()
    s.add(T0 + MINUTE_MS * 5)
    s.add(T0)
    assert s.view(0, -1)["data"] == [2]


@given(st.lists(st.integers(min_value=0, max_value=MINUTE_MS * 300), max_size=200))
def test_series_matches_a_model(offsets: list[int]) -> None:
    s = MinuteSeries()
    model: dict[int, int] = {}
    for offset in sorted(offsets):
        s.add(T0 + offset)
        minute = int((T0 + offset) // MINUTE_MS)
        model[minute] = model.get(minute, 0) + 1
    data = s.view(0, -1)["data"]
    if not model:
        assert data == []
        return
    newest, oldest = max(model), min(model)
    assert data == [model.get(m, 0) for m in range(newest, oldest - 1, -1)]
    assert sum(data) == len(offsets) == s.total


def test_event_journal_trim() -> None:
    qc = QueueCounters()
    qc.events = 30
    assert qc.trim_events(40) == 0
    assert qc.trim_events(10) == 20
    assert qc.trim_events(10) == 0
    qc.events += 5
    assert qc.retained_events == 15
    assert qc.trim_events(0) == 15
    qc.events += MAX_QUEUE_EVENTS * 2
    assert qc.retained_events == MAX_QUEUE_EVENTS


def test_transition_counts() -> None:
    c = Counters()
    c.on_pushed("q", 3)
    c.on_pulled("q", 2)
    c.on_completed("q", T0)
    c.on_failed("q", T0, False)
    c.on_failed("q", T0, True)
    assert (c.pushed, c.pulled, c.completed, c.failed) == (3, 2, 1, 1)
    qc = c.queues["q"]
    assert qc.events == 3 + 2 + 1 + 2 + 1
    assert (qc.completed.total, qc.failed.total) == (1, 1)


def test_histogram_percentiles_and_buckets() -> None:
    h = Histogram()
    assert (h.average, h.percentile(50)) == (0.0, 0.0)
    for ms in (0.05, 0.3, 0.3, 4.0, 20000.0):
        h.observe(ms)
    assert h.n == 5 and abs(h.average - (0.05 + 0.6 + 4.0 + 20000.0) / 5) < 1e-9
    assert h.percentile(50) == 0.5 and h.percentile(80) == 5 and h.percentile(99) == LATENCY_BOUNDS_MS[-1]
    cumulative = h.cumulative()
    assert cumulative[0] == 1 and cumulative[1] == 3 and cumulative[-1] == 5
    assert cumulative == sorted(cumulative)
