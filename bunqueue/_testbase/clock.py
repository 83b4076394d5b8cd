"""A clock a test moves by hand: ``Broker(clock=FakeClock())`` sees only the times the test sets."""
from __future__ import annotations

T0 = 1_000_000.0


class FakeClock:
    """Epoch milliseconds, standing still until ``set`` or ``advance`` moves them."""

    __slots__ = ("now",)

    def __init__(self, now: float = T0) -> None:
        self.now = float(now)

    def __call__(self) -> float:
        return self.now

    def set(self, now: float) -> float:
        self.now = float(now)
        return self.now

    def advance(self, ms: float) -> float:
        self.now += ms
        return self.now
