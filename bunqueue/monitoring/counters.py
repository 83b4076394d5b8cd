"""Counters kept as work happens: totals, per-queue one-minute buckets, operation latencies, rates.

Nothing here scans jobs. A transition adds to a counter (an integer add, no allocation); everything that
costs more (rates, percentiles, expanding minute buckets into a series) is computed when someone reads it.
"""
from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable
from typing import Any

MINUTE_MS = 60_000
# Minute buckets kept per queue and kind: two weeks, as in the reference.
MAX_MINUTE_POINTS = 20_160
# Lifecycle events a queue's journal retains (what TrimEvents trims).
MAX_QUEUE_EVENTS = 10_000
# Upper bounds (ms) of the latency histogram buckets, the reference's; a last bucket takes the rest.
LATENCY_BOUNDS_MS = (0.1, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)
# One command in this many of each timed kind is timed (see Histogram).
SAMPLE_EVERY = 8
# Rates are smoothed over readings: each reading weighs this much against the previous rate.
RATE_SMOOTHING = 0.3


class MinuteSeries:
    """Counts per wall-clock minute, newest minute open; older minutes in ascending order."""

    __slots__ = ("buckets", "current", "minute", "minute_end", "prev_count", "prev_ts", "total")

    def __init__(self) -> None:
        self.total = 0
        self.prev_ts = 0.0
        self.prev_count = 0
        # The open minute (index since the epoch), its count and where it ends (epoch ms).
        self.minute = -1
        self.current = 0
        self.minute_end = -1.0
        self.buckets: dict[int, int] = {}

    def add(self, now: float, n: int = 1) -> None:
        self.total += n
        if now < self.minute_end:
            self.current += n
        else:
            self._open(now, n)
        self.prev_ts = now
        self.prev_count = self.current

    def _open(self, now: float, n: int) -> None:
        minute = int(now // MINUTE_MS)
        if minute < self.minute:
            # The clock stepped back: count it in the open minute rather than rewrite history.
            self.current += n
            return
        buckets = self.buckets
        if self.current:
            buckets[self.minute] = self.current
        self.minute = minute
        self.minute_end = float((minute + 1) * MINUTE_MS)
        self.current = n
        cutoff = minute - MAX_MINUTE_POINTS + 1
        while buckets:
            oldest = next(iter(buckets))
            if oldest >= cutoff:
                break
            del buckets[oldest]

    def series(self) -> list[int]:
        """Every minute from the newest with a count back to the oldest kept one, newest first."""
        if not self.current:
            return []
        newest = self.minute
        oldest = next(iter(self.buckets), newest)
        data = [0] * (newest - oldest + 1)
        data[0] = self.current
        for minute, count in self.buckets.items():
            data[newest - minute] = count
        return data

    def view(self, start: int, end: int) -> dict[str, Any]:
        """The queue-scoped Metrics answer: bucket indexes ``start`` through ``end`` (-1: the oldest)."""
        data = self.series()
        count = len(data)
        stop = count if end == -1 else min(count, end + 1)
        return {
            "meta": {"count": self.total, "prevTS": self.prev_ts, "prevCount": self.prev_count},
            "data": data[start:stop] if start < stop else [],
            "count": count,
        }


class QueueCounters:
    """One queue's completions and terminal failures by minute, and its lifecycle-event journal size."""

    __slots__ = ("completed", "events", "events_base", "failed")

    def __init__(self) -> None:
        self.completed = MinuteSeries()
        self.failed = MinuteSeries()
        # Lifecycle events ever recorded, and the count at which the retained journal starts (see trim).
        self.events = 0
        self.events_base = 0

    @property
    def retained_events(self) -> int:
        return min(MAX_QUEUE_EVENTS, self.events - self.events_base)

    def trim_events(self, max_length: int) -> int:
        """Keep the newest ``max_length`` events; the exact number removed."""
        retained = self.retained_events
        if retained <= max_length:
            return 0
        self.events_base = self.events - max_length
        return retained - max_length


class Histogram:
    """Operation latencies in fixed buckets (ms): sum, count and percentile bounds on read.

    ``countdown`` samples: the command layer times one command in ``SAMPLE_EVERY`` of each kind, so that
    timing costs the others one decrement.
    """

    __slots__ = ("countdown", "counts", "n", "total_ms")

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BOUNDS_MS) + 1)
        self.n = 0
        self.total_ms = 0.0
        self.countdown = 1

    def observe(self, ms: float) -> None:
        self.counts[bisect_left(LATENCY_BOUNDS_MS, ms)] += 1
        self.n += 1
        self.total_ms += ms

    @property
    def average(self) -> float:
        return self.total_ms / self.n if self.n else 0.0

    def percentile(self, p: float) -> float:
        """The upper bound of the bucket holding the p-th percentile (0 with no observation)."""
        if not self.n:
            return 0.0
        target = p / 100 * self.n
        seen = 0
        for bound, count in zip(LATENCY_BOUNDS_MS, self.counts):
            seen += count
            if seen >= target:
                return float(bound)
        return float(LATENCY_BOUNDS_MS[-1])

    def cumulative(self) -> list[int]:
        """Counts at or below each bound, then the total (+Inf): the Prometheus histogram buckets."""
        out = []
        seen = 0
        for count in self.counts:
            seen += count
            out.append(seen)
        return out


class Rate:
    """Events per second of a running total, measured between readings and smoothed."""

    __slots__ = ("last_at", "last_total", "rate")

    def __init__(self, now: float) -> None:
        self.last_at = now
        self.last_total = 0
        self.rate = 0.0

    def read(self, total: int, now: float) -> float:
        elapsed = now - self.last_at
        if elapsed >= 0.1:
            current = (total - self.last_total) / elapsed
            self.rate = current if self.rate == 0 else RATE_SMOOTHING * current + (1 - RATE_SMOOTHING) * self.rate
            self.last_at = now
            self.last_total = total
        return round(self.rate, 2)


def _no_crons() -> list[dict[str, Any]]:
    return []


class Counters:
    """The broker's running totals. Transitions call the ``on_*`` methods; readers use the rest.

    ``list_crons`` is the hook through which a cron scheduler shows its schedules (dashboards, the
    Prometheus gauge): a callable returning one view per schedule, at least {name, queue, schedule,
    repeatEvery, nextRun, executions} (the fields the dashboard overview shows). ``backup_metrics`` is
    the server's backup counters by Prometheus name.
    """

    __slots__ = (
        "backup_metrics",
        "completed",
        "connections",
        "failed",
        "latency",
        "list_crons",
        "max_prometheus_queues",
        "pulled",
        "pushed",
        "queues",
        "rates",
        "started_at",
    )

    def __init__(self) -> None:
        self.pushed = 0
        self.pulled = 0
        self.completed = 0
        # Terminal failures only (DLQ or removeOnFail): a retried attempt is not a failed job.
        self.failed = 0
        self.queues: dict[str, QueueCounters] = {}
        # Open client connections, kept by the server.
        self.connections = 0
        self.list_crons: Callable[[], list[dict[str, Any]]] = _no_crons
        # Empty without a backup manager (memory mode): every backup series reads 0.
        self.backup_metrics: Callable[[], dict[str, float]] = dict
        # METRICS_MAX_QUEUES: queues with labelled Prometheus series.
        self.max_prometheus_queues = 100
        # Command durations by kind ("push", "pull", "ack"), measured around the broker call.
        self.latency = {"push": Histogram(), "pull": Histogram(), "ack": Histogram()}
        self.started_at = time.time() * 1000
        mono = time.monotonic()
        self.rates = {"push": Rate(mono), "pull": Rate(mono), "complete": Rate(mono), "fail": Rate(mono)}

    def queue(self, name: str) -> QueueCounters:
        qc = self.queues.get(name)
        if qc is None:
            qc = self.queues[name] = QueueCounters()
        return qc

    # -- transitions -------------------------------------------------------------------------------

    def on_pushed(self, queue: str, n: int = 1) -> None:
        self.pushed += n
        qc = self.queues.get(queue) or self.queue(queue)
        qc.events += n

    def on_pulled(self, queue: str, n: int) -> None:
        self.pulled += n
        qc = self.queues.get(queue) or self.queue(queue)
        qc.events += n

    def on_completed(self, queue: str, now: float, n: int = 1) -> None:
        self.completed += n
        qc = self.queues.get(queue) or self.queue(queue)
        qc.events += n
        qc.completed.add(now, n)

    def on_failed(self, queue: str, now: float, terminal: bool) -> None:
        """A failed attempt; a retried one is two journal events (failed, retried)."""
        qc = self.queue(queue)
        if terminal:
            self.failed += 1
            qc.events += 1
            qc.failed.add(now)
        else:
            qc.events += 2

    def on_event(self, queue: str) -> None:
        """Any other lifecycle event of a queue (removed, progress, stalled, delayed, ...)."""
        self.queue(queue).events += 1

    def forget_queue(self, name: str) -> None:
        """Obliterate: the queue's history goes with it."""
        self.queues.pop(name, None)

    # -- readings ----------------------------------------------------------------------------------

    def uptime_ms(self) -> float:
        return float(int(time.time() * 1000 - self.started_at))

    def throughput(self) -> dict[str, float]:
        now = time.monotonic()
        rates = self.rates
        return {
            "pushPerSec": rates["push"].read(self.pushed, now),
            "pullPerSec": rates["pull"].read(self.pulled, now),
            "completePerSec": rates["complete"].read(self.completed, now),
            "failPerSec": rates["fail"].read(self.failed, now),
        }

    def latency_averages(self) -> dict[str, float]:
        lat = self.latency
        return {
            "pushMs": round(lat["push"].average, 3),
            "pullMs": round(lat["pull"].average, 3),
            "ackMs": round(lat["ack"].average, 3),
        }

    def latency_percentiles(self) -> dict[str, dict[str, float]]:
        return {
            kind: {"p50": h.percentile(50), "p95": h.percentile(95), "p99": h.percentile(99)}
            for kind, h in self.latency.items()
        }
