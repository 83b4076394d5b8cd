"""Per-connection request rate limit: a sliding window over two fixed buckets."""
from __future__ import annotations

import math
import time
from collections.abc import Callable


class RequestRateLimiter:
    """Allows ``limit`` requests per ``window_ms``.

    The count in the sliding window is estimated from the current bucket plus the previous bucket scaled
    by how much of it still overlaps the window: O(1) memory, exact for bursts inside one window.
    """

    __slots__ = ("bucket_start", "clock", "current", "limit", "previous", "window")

    def __init__(self, limit: int, window_ms: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.window = max(1, window_ms) / 1000.0
        # Seconds, monotonic; a test passes a fake one.
        self.clock = clock
        self.bucket_start = clock()
        self.current = 0
        self.previous = 0

    def allow(self) -> bool:
        """``allow_many(1) == 1``, without its arithmetic for a batch: one request is let through while
        the window's estimated count is under the limit."""
        now = self.clock()
        elapsed = now - self.bucket_start
        if elapsed >= self.window:
            elapsed = self._roll(now, elapsed)
        if self.current + self.previous * (1.0 - elapsed / self.window) < self.limit:
            self.current += 1
            return True
        return False

    def allow_many(self, n: int) -> int:
        """Count the next ``n`` requests, arriving together: how many of them, the first ones, are allowed.

        The same answer as ``n`` calls of ``allow``: once one is refused, so is every later one.
        """
        now = self.clock()
        elapsed = now - self.bucket_start
        if elapsed >= self.window:
            elapsed = self._roll(now, elapsed)
        overlap = 1.0 - elapsed / self.window
        room = math.ceil(self.limit - self.current - self.previous * overlap)
        allowed = n if room >= n else max(room, 0)
        self.current += allowed
        return allowed

    def _roll(self, now: float, elapsed: float) -> float:
        """Move to the bucket ``now`` falls in; the time elapsed in it."""
        buckets = int(elapsed // self.window)
        self.previous = self.current if buckets == 1 else 0
        self.current = 0
        self.bucket_start += buckets * self.window
        return now - self.bucket_start

    def give_back(self, n: int) -> None:
        """Uncount ``n`` allowed requests that were not run after all (they will be counted when they are)."""
        self.current -= n
