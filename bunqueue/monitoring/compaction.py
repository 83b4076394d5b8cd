"""CompactMemory: give back what the broker holds without need, and say what went."""
from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
from typing import TYPE_CHECKING

from bunqueue.broker.components import eventnames
from bunqueue.broker.ops import listing
from bunqueue.monitoring.snapshot import process_memory

if TYPE_CHECKING:
    from bunqueue.broker.wiring import Wiring

log = logging.getLogger("bunqueue.monitoring")


def _load_malloc_trim() -> object:
    path = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(path).malloc_trim if path else None
    except (OSError, AttributeError):
        return None


_malloc_trim = _load_malloc_trim()


def compact(broker: Wiring) -> dict[str, int]:
    """Drop idle queues' structures, expired or orphaned unique keys, results and logs of jobs that are
    gone, and empty waiter lists; then collect cycles and return free heap pages to the system.

    Returns the counts of what went and the change in resident memory (bytes, positive when it shrank).
    """
    before = process_memory().rss
    freed = {
        "queues": _idle_queues(broker),
        "uniqueKeys": _stale_unique_keys(broker),
        "results": _orphans(broker, broker.records.results),
        "logs": _orphans(broker, broker.records.logs),
        "waiters": _empty_waiters(broker),
    }
    freed["objects"] = release_heap()
    freed["rssBytes"] = before - process_memory().rss
    log.info("compacted memory: %s", ", ".join(f"{k} {v}" for k, v in freed.items()))
    if broker.events.notices:
        # The original's event carries no field.
        broker.events.notify(eventnames.MEMORY_COMPACTED, {})
    return freed


def release_heap() -> int:
    """Collect cycles and return free heap pages to the system; the objects collected."""
    collected = gc.collect()
    if _malloc_trim is not None:
        _malloc_trim(0)  # type: ignore[operator]
    return collected


def _idle_queues(broker: Wiring) -> int:
    """Queues that hold no job, DLQ entry, waiter or setting: recreated on their next use."""
    idle = [
        name for name, q in broker.queues.items()
        if not q.waiters and not q.completed and not listing.is_listed(broker, name, q)
    ]
    for name in idle:
        del broker.queues[name]
    return len(idle)


def _stale_unique_keys(broker: Wiring) -> int:
    now = broker.clock()
    keys = broker.keys
    before = len(keys.owners)
    for queue, key in list(keys.owners):
        # owner_of drops an entry whose ttl passed or whose owner is no longer live.
        keys.owner_of(queue, key, now)
    return before - len(keys.owners)


def _orphans(broker: Wiring, by_job: dict) -> int:  # type: ignore[type-arg]
    gone = [job_id for job_id in by_job if job_id not in broker.jobs]
    for job_id in gone:
        del by_job[job_id]
    return len(gone)


def _empty_waiters(broker: Wiring) -> int:
    waiting = broker.records.waiters
    empty = [job_id for job_id, waiters in waiting.items() if not waiters]
    for job_id in empty:
        del waiting[job_id]
    return len(empty)
