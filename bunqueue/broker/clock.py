"""The broker's clock: epoch milliseconds, as every timestamp and deadline on the wire is."""
from __future__ import annotations

import time


def now_ms() -> float:
    """Epoch milliseconds as an integral float, as JS ``Date.now()`` goes on the wire (float64)."""
    return float(time.time_ns() // 1_000_000)
