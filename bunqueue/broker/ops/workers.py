"""Workers: RegisterWorker, UnregisterWorker, ListWorkers and Heartbeat (worker liveness, not job
heartbeats), over ``timers.workerregistry.WorkerRegistry``. A worker belongs to the session that registered it."""
from __future__ import annotations

from typing import Any

from bunqueue.broker.timers.workerregistry import ACTIVE
from bunqueue.broker.wiring import Wiring


def register_worker(
    broker: Wiring, session_key: int, name: str | None, queues: list[str], concurrency: float,
    worker_id: str | None, hostname: str | None, pid: float | None, started_at: float | None,
) -> dict[str, Any]:
    """Register a worker, or refresh the one ``worker_id`` names; its view, as RegisterWorker answers it."""
    worker = broker.workers.register(
        session_key, name, queues, concurrency, worker_id, hostname, pid, started_at
    )
    return worker.view("workerId", ACTIVE)


def unregister_worker(broker: Wiring, worker_id: Any) -> bool:
    return broker.workers.unregister(worker_id)


def list_workers(broker: Wiring) -> dict[str, Any]:
    return broker.workers.listing()


def worker_heartbeat(
    broker: Wiring, worker_id: Any, active_jobs: float | None, processed: float | None, failed: float | None
) -> bool:
    return broker.workers.heartbeat(worker_id, active_jobs, processed, failed)
