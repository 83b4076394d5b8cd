"""Command durations for the latency histograms.

The runner counts each timed command down on its kind's histogram (``Histogram.countdown``) and hands the
one command in ``SAMPLE_EVERY`` whose turn it is to ``run_timed``; the others cost one decrement.
"""
from __future__ import annotations

from collections.abc import Callable
from time import perf_counter
from typing import Any

from bunqueue.monitoring.counters import SAMPLE_EVERY, Histogram

Handler = Callable[[Any, dict[str, Any], Any], Any]


def run_timed(handler: Handler, histogram: Histogram, broker: Any, cmd: dict[str, Any], session: Any) -> Any:
    """``handler``'s reply, its duration observed into ``histogram``. A command that waits (a long-poll
    pull) is not timed: its duration is the client's timeout, not the broker's."""
    histogram.countdown = SAMPLE_EVERY
    start = perf_counter()
    reply = handler(broker, cmd, session)
    if type(reply) is dict:
        histogram.observe((perf_counter() - start) * 1000.0)
    return reply
