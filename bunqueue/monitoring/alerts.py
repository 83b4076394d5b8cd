"""Threshold alerts and the periodic statistics line, as the original sends them.

Every ``CHECK_INTERVAL_S`` (the original's 10 s maintenance tick) the checks look at each queue's counters,
the registered workers, the process heap and the data file, and announce on the event hub:

* ``queue:idle`` {queue, idleSeconds}: nothing waiting or active for QUEUE_IDLE_THRESHOLD_MS (once per
  idle spell; 0 turns it off);
* ``queue:threshold`` {queue, size, threshold}: QUEUE_SIZE_THRESHOLD waiting or more (once until it drops);
* ``worker:overloaded`` {workerId, name, activeJobs, concurrency, overloadedSeconds}: at its concurrency
  for WORKER_OVERLOAD_THRESHOLD_MS;
* ``server:memory-warning`` {heapUsedMB, thresholdMB, rssMB} and ``storage:size-warning`` {sizeMB,
  thresholdMB}: past MEMORY_WARNING_MB / STORAGE_WARNING_MB, again only after dropping below 90 %.

Each check reads a few numbers per queue or worker; none looks at jobs. ``StatsLog`` writes the original's
"Queue statistics" line every STATS_INTERVAL_MS.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bunqueue._core.jobs import wire_number
from bunqueue.monitoring.snapshot import process_memory, storage_size_bytes, totals

if TYPE_CHECKING:
    from bunqueue.broker.wiring import Wiring
    from bunqueue.config import Settings

CHECK_INTERVAL_S = 10.0
MIB = 1024 * 1024
QUEUE_IDLE = "queue:idle"
QUEUE_THRESHOLD = "queue:threshold"
WORKER_OVERLOADED = "worker:overloaded"
MEMORY_WARNING = "server:memory-warning"
STORAGE_WARNING = "storage:size-warning"
# A warning may be sent again once the figure drops below this share of its threshold.
REARM_SHARE = 0.9

stats_log = logging.getLogger("bunqueue.stats")


class ThresholdAlerts:
    def __init__(self, broker: Wiring, settings: Settings) -> None:
        self.broker = broker
        self.idle_ms = settings.queue_idle_threshold_ms
        self.size_threshold = settings.queue_size_threshold
        self.overload_ms = settings.worker_overload_threshold_ms
        self.memory_mb = settings.memory_warning_mb
        self.storage_mb = settings.storage_warning_mb
        self.idle_since: dict[str, float] = {}
        self.over_threshold: set[str] = set()
        self.overloaded_since: dict[str, float] = {}
        self.memory_warned = False
        self.storage_warned = False

    def run(self, now: float) -> None:
        notify = self.broker.events.notify
        if self.idle_ms > 0:
            self.check_idle(now, notify)
        if self.size_threshold > 0:
            self.check_sizes(notify)
        if self.overload_ms > 0:
            self.check_workers(now, notify)
        if self.memory_mb > 0:
            self.check_memory(notify)
        if self.storage_mb > 0:
            self.check_storage(notify)

    def check_idle(self, now: float, notify: Notify) -> None:
        for name, q in self.broker.queues.items():
            if q.n_ready or q.n_active:
                self.idle_since.pop(name, None)
                continue
            since = self.idle_since.setdefault(name, now)
            if since != now and now - since >= self.idle_ms:
                notify(QUEUE_IDLE, {"queue": name, "idleSeconds": int((now - since) // 1000)})
                del self.idle_since[name]

    def check_sizes(self, notify: Notify) -> None:
        for name, q in self.broker.queues.items():
            waiting = q.n_ready
            if waiting < self.size_threshold:
                self.over_threshold.discard(name)
            elif name not in self.over_threshold:
                self.over_threshold.add(name)
                notify(QUEUE_THRESHOLD, {"queue": name, "size": waiting, "threshold": self.size_threshold})

    def check_workers(self, now: float, notify: Notify) -> None:
        for worker in self.broker.workers.workers.values():
            if not (worker.concurrency > 0 and worker.active_jobs >= worker.concurrency):
                self.overloaded_since.pop(worker.id, None)
                continue
            since = self.overloaded_since.setdefault(worker.id, now)
            if since != now and now - since >= self.overload_ms:
                notify(WORKER_OVERLOADED, {
                    "workerId": worker.id, "name": worker.name, "activeJobs": wire_number(worker.active_jobs),
                    "concurrency": wire_number(worker.concurrency), "overloadedSeconds": int((now - since) // 1000),
                })
                del self.overloaded_since[worker.id]

    def check_memory(self, notify: Notify) -> None:
        mem = process_memory()
        heap_mb = round(mem.heap_used / MIB)
        if heap_mb >= self.memory_mb:
            if not self.memory_warned:
                self.memory_warned = True
                notify(MEMORY_WARNING, {"heapUsedMB": heap_mb, "thresholdMB": self.memory_mb,
                                        "rssMB": round(mem.rss / MIB)})
        elif heap_mb < self.memory_mb * REARM_SHARE:
            self.memory_warned = False

    def check_storage(self, notify: Notify) -> None:
        size = storage_size_bytes(self.broker)
        if size is None:
            return
        size_mb = round(size / MIB)
        if size_mb >= self.storage_mb:
            if not self.storage_warned:
                self.storage_warned = True
                notify(STORAGE_WARNING, {"sizeMB": size_mb, "thresholdMB": self.storage_mb})
        elif size_mb < self.storage_mb * REARM_SHARE:
            self.storage_warned = False


Notify = Callable[[str, dict[str, Any]], None]


def stats_line(broker: Wiring, connections: int) -> str:
    """The original's "Queue statistics" entry, as key=value pairs."""
    t = totals(broker)
    workers = broker.workers.listing()["stats"]
    mem = process_memory()
    fields = {
        **t.state_counts(), "tcp": connections,
        "workers": f"{workers['active']}/{workers['total']}",
        "mem": f"{round(mem.heap_used / MIB)}MB/{round(mem.heap_total / MIB)}MB",
        "rss": f"{round(mem.rss / MIB)}MB", "idx": len(broker.jobs),
    }
    return "Queue statistics " + " ".join(f"{key}={value}" for key, value in fields.items())
