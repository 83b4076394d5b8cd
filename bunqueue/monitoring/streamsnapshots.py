"""The periodic stream events' data: ``stats:snapshot``, ``health:status`` and ``storage:status``, with the
original's fields (memory in whole MiB, uptime in whole seconds for health)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bunqueue.monitoring.dashboard import collections
from bunqueue.monitoring.snapshot import MIB, process_memory, totals

if TYPE_CHECKING:
    from bunqueue.broker.wiring import Wiring


def stats_snapshot(broker: Wiring) -> dict[str, Any]:
    counters = broker.counters
    t = totals(broker)
    rates = counters.throughput()
    queues = {}
    for name, q in broker.queues.items():
        queues[name] = {
            "waiting": q.n_ready,
            "active": q.n_active,
            "delayed": len(q.delayed),
            "dlq": broker.dlq.count(name),
            "paused": q.paused,
        }
    workers = broker.workers
    return {
        **t.state_counts(),
        "totalPushed": counters.pushed,
        "totalCompleted": counters.completed,
        "totalFailed": counters.failed,
        "pushPerSec": rates["pushPerSec"],
        "pullPerSec": rates["pullPerSec"],
        "uptime": counters.uptime_ms(),
        "queues": queues,
        "workers": {"total": len(workers.workers), "active": workers.active_count(broker.clock())},
        "cronJobs": len(broker.crons.crons),
    }


def health_snapshot(broker: Wiring, transport: str, connections: int) -> dict[str, Any]:
    mem = process_memory()
    return {
        "ok": broker.store.status["error"] is None,
        "uptime": int(broker.counters.uptime_ms() // 1000),
        "memory": {"rss": round(mem.rss / MIB), "heapUsed": round(mem.heap_used / MIB)},
        "connections": {transport: connections},
    }


def storage_snapshot(broker: Wiring) -> dict[str, Any]:
    return {"collections": collections(broker, totals(broker)), "diskFull": broker.store.status["diskFull"]}
