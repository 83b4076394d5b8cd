"""The broker's deadline kinds (``bunqueue.broker.timers.deadlines``), one loop timer each.

``Broker.wake_at(kind, when)`` lands in ``arm``, which only ever moves that kind's timer earlier; when
the timer fires, the kind's handler settles what is due and names its next deadline, for which the timer
is armed again. An idle broker has at most one armed timer per kind and no periodic work at all.
"""
from __future__ import annotations

import asyncio
import logging
import math

from bunqueue.broker.clock import now_ms
from bunqueue.broker.timers.deadlines import Handler

log = logging.getLogger("bunqueue.scheduler")

# Longer waits are taken in steps of this many ms (a far-off deadline would overflow the loop's timer);
# a step that ends before the deadline re-arms for the rest.
MAX_STEP_MS = 2**31 - 1
# A handler that failed runs again this much later, so one bad entry neither stops its kind nor spins.
RETRY_AFTER_MS = 1000.0


class DeadlineScheduler:
    def __init__(self, loop: asyncio.AbstractEventLoop, handlers: dict[str, Handler]) -> None:
        self.loop = loop
        self.handlers = handlers
        # kind -> (the time its timer is armed for, the timer)
        self.armed: dict[str, tuple[float, asyncio.TimerHandle]] = {}

    def arm(self, kind: str, when: float) -> None:
        current = self.armed.get(kind)
        if current is not None:
            if current[0] <= when:
                return
            current[1].cancel()
        delay = when - now_ms()
        if delay > MAX_STEP_MS:
            delay = MAX_STEP_MS
        elif delay > 0:
            # Loop timers have millisecond resolution: a shorter wait would fire early and spin.
            delay = max(delay, 1.0)
        else:
            delay = 0.0
        self.armed[kind] = (when, self.loop.call_later(delay / 1000.0, self.fire, kind))

    def fire(self, kind: str) -> None:
        armed = self.armed.pop(kind, None)
        now = now_ms()
        if armed is not None and now < armed[0]:
            # The loop's clock is cached per iteration and is not the wall clock deadlines are kept in,
            # so a timer can fire a millisecond early: wait out the rest instead of settling nothing.
            self.arm(kind, armed[0])
            return
        try:
            following = self.handlers[kind](now)
        except Exception:
            log.exception("settling %s deadlines failed", kind)
            following = now + RETRY_AFTER_MS
        if following is not None and not math.isnan(following):
            self.arm(kind, following)

    def when(self, kind: str) -> float | None:
        """The time the timer of ``kind`` is armed for, or None."""
        current = self.armed.get(kind)
        return None if current is None else current[0]

    def cancel(self) -> None:
        for _, handle in self.armed.values():
            handle.cancel()
        self.armed.clear()
