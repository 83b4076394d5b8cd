"""Command durations for the latency histograms: a wrapper for the dispatch table's job commands."""
from __future__ import annotations

from collections.abc import Callable
from time import perf_counter
from typing import Any

from bunqueue.monitoring.counters import SAMPLE_EVERY

Handler = Callable[[Any, dict[str, Any], Any], Any]


def timed(handler: Handler, kind: str) -> Handler:
    """``handler`` with one call in SAMPLE_EVERY timed into the broker's ``kind`` histogram. A command
    that waits (a long-poll pull) is not timed: its duration is the client's timeout, not the broker's."""

    def run(broker: Any, cmd: dict[str, Any], session: Any) -> Any:
        histogram = broker.counters.latency[kind]
        histogram.countdown -= 1
        if histogram.countdown:
            return handler(broker, cmd, session)
        histogram.countdown = SAMPLE_EVERY
        start = perf_counter()
        reply = handler(broker, cmd, session)
        if type(reply) is dict:
            histogram.observe((perf_counter() - start) * 1000.0)
        return reply

    run.__name__ = handler.__name__
    run.__doc__ = handler.__doc__
    return run
