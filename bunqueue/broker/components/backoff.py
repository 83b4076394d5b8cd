"""Retry backoff: how long a failed job waits before its next attempt."""
from __future__ import annotations

import random
from typing import Any

DEFAULT_MAX_DELAY = 3_600_000


def retry_delay(backoff: float, config: dict[str, Any] | None, attempts: int) -> float:
    """Delay in ms after the ``attempts``-th failure (attempts already counts this failure).

    Exponential: base * 2^attempts with +-50 % jitter; fixed: the base with +-20 % jitter. Each delay is
    capped at the job's maxDelay, or one hour. Jitter spreads retries of jobs that failed together.
    """
    cap = DEFAULT_MAX_DELAY
    if config is not None:
        base = config["delay"]
        cap = config.get("maxDelay", DEFAULT_MAX_DELAY)
        fixed = config["type"] == "fixed"
    else:
        base = backoff
        fixed = False
    if fixed:
        delay = base * (0.8 + random.random() * 0.4)
    else:
        delay = base * (2.0 ** min(attempts, 64)) * (0.5 + random.random())
    return min(delay, cap)
