"""What Worker and QueueEvents share: starting at once when made inside a running loop."""
from __future__ import annotations

import asyncio


def loop_running() -> bool:
    """Whether this thread runs an event loop: ``autorun`` starts an object only then (made elsewhere,
    it waits for ``start()``)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
