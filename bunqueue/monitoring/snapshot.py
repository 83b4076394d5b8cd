"""Broker-wide readings assembled on request from per-queue counters, the process and the store."""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bunqueue.broker.wiring import Wiring

MIB = 1024 * 1024


@dataclass
class Totals:
    """Job counts over every queue, each queue's counters summed (O(queues), never O(jobs))."""

    waiting: int = 0
    prioritized: int = 0
    delayed: int = 0
    active: int = 0
    completed: int = 0
    dlq: int = 0
    waiting_children: int = 0

    @property
    def ready(self) -> int:
        """Waiting and prioritized jobs: what the reference reports as waiting."""
        return self.waiting + self.prioritized

    def state_counts(self) -> dict[str, int]:
        """The headline counts of the stream snapshots, the dashboard and the statistics log line, in the
        reference's order."""
        return {"waiting": self.ready, "active": self.active, "delayed": self.delayed, "completed": self.completed,
                "dlq": self.dlq}


def totals(broker: Wiring) -> Totals:
    out = Totals()
    for name, q in broker.queues.items():
        out.waiting += q.n_waiting
        out.prioritized += q.n_prioritized
        out.delayed += len(q.delayed)
        out.active += q.n_active
        out.completed += q.n_completed
        out.waiting_children += q.n_waiting_children
        out.dlq += broker.dlq.count(name)
    return out


@dataclass
class Memory:
    rss: int
    heap_used: int
    heap_total: int


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
    )]


def _load_mallinfo2() -> Any:
    path = ctypes.util.find_library("c")
    try:
        fn = ctypes.CDLL(path).mallinfo2 if path else None
    except (OSError, AttributeError):
        return None
    if fn is not None:
        fn.restype = _MallInfo2
    return fn


_mallinfo2 = _load_mallinfo2()
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def process_memory() -> Memory:
    """Resident size, and the C heap in use / reserved (glibc's mallinfo2: where Python's objects live).
    Without glibc both heap figures are the resident size."""
    try:
        with open("/proc/self/statm", "rb") as f:
            rss = int(f.read().split()[1]) * _PAGE
    except OSError:
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if _mallinfo2 is None:
        return Memory(rss, rss, rss)
    info = _mallinfo2()
    return Memory(rss, info.uordblks + info.hblkhd, info.arena + info.hblkhd)


def storage_size_bytes(broker: Wiring) -> int | None:
    """The data file with its WAL, or None in memory mode."""
    path = getattr(broker.store, "path", None)
    if not path:
        return None
    size = 0
    for suffix in ("", "-wal", "-shm"):
        try:
            size += os.path.getsize(path + suffix)
        except OSError:
            pass
    return size
