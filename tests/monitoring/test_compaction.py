"""CompactMemory in process: idle queues' structures go, every job stays, and the counts say so."""
from __future__ import annotations

from bunqueue.broker.facade import Broker
from bunqueue.monitoring.compaction import compact


def test_idle_queues_go_and_jobs_stay() -> None:
    broker = Broker()
    job_id = broker.push("busy", {"name": "a", "data": 1})
    broker.queue("idle-1")
    broker.queue("idle-2")
    freed = compact(broker)
    assert freed["queues"] == 2
    assert set(freed) == {"queues", "uniqueKeys", "results", "logs", "waiters", "objects", "rssBytes"}
    assert set(broker.queues) == {"busy"}
    assert broker.jobs[job_id].queue == "busy"
    assert compact(broker)["queues"] == 0, "nothing left to free the second time"
    # A dropped queue comes back on its next use.
    assert broker.push("idle-1", {"name": "b", "data": 2}) in broker.jobs
