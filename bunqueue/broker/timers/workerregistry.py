"""The worker registry: RegisterWorker, Heartbeat, UnregisterWorker and ListWorkers.

Workers register for monitoring only; nothing routes jobs by them. A registration belongs to the client
connection that made it and goes when that connection closes (re-registering an id from another
connection updates the record but, as in the reference, keeps it bound to the first connection).

A worker is "stale" in ListWorkers once nothing was heard of it for ``timeout_ms`` (WORKER_TIMEOUT_MS)
and is removed at three times that, like the reference's cleanup. Removal is one heap keyed by worker id,
served by one loop timer; heartbeats only move ``last_seen`` and the entry is re-checked lazily when it
comes due, so a heartbeat costs no heap work.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bunqueue._core.jobs import wire_number
from bunqueue._core.timers import TimerHeap
from bunqueue.broker.components import eventnames
from bunqueue.broker.components.eventhub import EventHub
from bunqueue.broker.session import Session
from bunqueue.broker.timers.deadlines import WORKERS, Alarms

DEFAULT_WORKER_TIMEOUT_MS = 30_000
# Silence after which a worker is dropped from the registry, in multiples of the stale timeout.
REMOVE_AFTER_TIMEOUTS = 3

ACTIVE = "active"
STALE = "stale"


class Worker:
    __slots__ = (
        "active_jobs", "concurrency", "failed", "hostname", "id", "last_seen", "name", "pid", "processed",
        "queues", "registered_at", "session_key",
    )

    def __init__(self, worker_id: str, name: str | None, queues: list[str], concurrency: float,
                 hostname: str, pid: float, registered_at: float, now: float, session_key: int) -> None:
        self.id = worker_id
        self.name = name
        self.queues = queues
        self.concurrency = concurrency
        self.hostname = hostname
        self.pid = pid
        self.registered_at = registered_at
        self.last_seen = now
        self.active_jobs: float = 0
        self.processed: float = 0
        self.failed: float = 0
        self.session_key = session_key

    def view(self, id_key: str, status: str) -> dict[str, Any]:
        """The worker as the wire shows it: RegisterWorker calls the id ``workerId``, ListWorkers ``id``."""
        out: dict[str, Any] = {id_key: self.id}
        if self.name is not None:
            out["name"] = self.name
        out.update(
            queues=self.queues,
            concurrency=wire_number(self.concurrency),
            hostname=self.hostname,
            pid=wire_number(self.pid),
            status=status,
            registeredAt=wire_number(self.registered_at),
            lastSeen=self.last_seen,
            activeJobs=wire_number(self.active_jobs),
            processedJobs=wire_number(self.processed),
            failedJobs=wire_number(self.failed),
            currentJob=None,
        )
        return out


class WorkerRegistry:
    def __init__(
        self, clock: Callable[[], float], alarms: Alarms, new_id: Callable[[], str], events: EventHub | None = None
    ) -> None:
        self.events = events if events is not None else EventHub(clock)
        self.clock = clock
        self.alarms = alarms
        self.new_id = new_id
        self.timeout_ms: float = DEFAULT_WORKER_TIMEOUT_MS
        self.workers: dict[str, Worker] = {}
        # Client connection -> ids of the workers it registered.
        self.by_session: dict[int, set[str]] = {}
        self.removal = TimerHeap()
        # Running totals, as the reference keeps them: counters reported by heartbeats, not summed.
        self.total_processed: float = 0
        self.total_failed: float = 0
        self.total_active_jobs: float = 0

    def register(
        self,
        session_key: int,
        name: str | None,
        queues: list[str],
        concurrency: float,
        worker_id: str | None,
        hostname: str | None,
        pid: float | None,
        started_at: float | None,
    ) -> Worker:
        now = self.clock()
        worker = self.workers.get(worker_id) if worker_id is not None else None
        if worker is not None:
            worker.queues = queues
            worker.concurrency = concurrency
            worker.last_seen = now
            if hostname:
                worker.hostname = hostname
            if pid:
                worker.pid = pid
            self._connected(worker)
            return worker
        if worker_id is None:
            worker_id = self.new_id()
        worker = Worker(
            worker_id, name, queues, concurrency, hostname if hostname is not None else "unknown",
            pid if pid is not None else 0, started_at if started_at is not None else now, now, session_key,
        )
        self.workers[worker_id] = worker
        self.by_session.setdefault(session_key, set()).add(worker_id)
        self._schedule(worker)
        self._connected(worker)
        return worker

    def _connected(self, worker: Worker) -> None:
        """Every RegisterWorker is told, a repeated one too, as the original tells it."""
        if self.events.notices:
            self.events.notify(eventnames.WORKER_CONNECTED, {
                "workerId": worker.id, "name": worker.name, "queues": worker.queues, "hostname": worker.hostname,
                "pid": worker.pid,
            })

    def unregister(self, worker_id: Any) -> bool:
        worker = self.workers.get(worker_id) if type(worker_id) is str else None
        if worker is None:
            return False
        self._drop(worker)
        if self.events.notices:
            self.events.notify(eventnames.WORKER_DISCONNECTED, {"workerId": worker.id})
        return True

    def heartbeat(self, worker_id: Any, active_jobs: float | None, processed: float | None,
                  failed: float | None) -> bool:
        worker = self.workers.get(worker_id) if type(worker_id) is str else None
        if worker is None:
            return False
        worker.last_seen = self.clock()
        if active_jobs is not None:
            self.total_active_jobs += active_jobs - worker.active_jobs
            worker.active_jobs = active_jobs
        if processed is not None:
            self.total_processed += processed - worker.processed
            worker.processed = processed
        if failed is not None:
            self.total_failed += failed - worker.failed
            worker.failed = failed
        if self.events.notices:
            self.events.notify(eventnames.WORKER_HEARTBEAT, {"workerId": worker.id})
        return True

    def drop_session(self, session: Session) -> None:
        """The connection closed: its workers go, each told with the connection's client id."""
        session_key = session.key
        for worker_id in self.by_session.pop(session_key, ()):
            worker = self.workers.get(worker_id)
            if worker is not None and worker.session_key == session_key:
                self._drop(worker)
                if self.events.notices:
                    self.events.notify(eventnames.WORKER_DISCONNECTED, {
                        "workerId": worker.id, "name": worker.name, "clientId": session.client_id()})

    def _drop(self, worker: Worker) -> None:
        del self.workers[worker.id]
        self.total_active_jobs -= worker.active_jobs
        self.removal.remove(worker.id)
        ids = self.by_session.get(worker.session_key)
        if ids is not None:
            ids.discard(worker.id)
            if not ids:
                del self.by_session[worker.session_key]

    def status(self, worker: Worker, now: float) -> str:
        return ACTIVE if now - worker.last_seen < self.timeout_ms else STALE

    def active_count(self, now: float) -> int:
        """How many workers are not stale at ``now``."""
        return sum(1 for worker in self.workers.values() if self.status(worker, now) == ACTIVE)

    def serves(self, queue: str) -> bool:
        """Whether a live (not stale) worker is registered for ``queue``."""
        now = self.clock()
        return any(queue in w.queues and self.status(w, now) == ACTIVE for w in self.workers.values())

    def listing(self) -> dict[str, Any]:
        now = self.clock()
        workers = []
        active = 0
        slots: float = 0
        for worker in self.workers.values():
            status = self.status(worker, now)
            if status == ACTIVE:
                active += 1
                slots += worker.concurrency
            entry = worker.view("id", status)
            entry["uptime"] = wire_number(now - worker.registered_at)
            workers.append(entry)
        stats = {
            "total": len(self.workers),
            "active": active,
            "totalProcessed": wire_number(self.total_processed),
            "totalFailed": wire_number(self.total_failed),
            "activeJobs": wire_number(self.total_active_jobs),
            "concurrencySlots": wire_number(slots),
        }
        return {"workers": workers, "stats": stats}

    # -- removal of silent workers ----------------------------------------------------------------

    def _removal_time(self, worker: Worker) -> float:
        return worker.last_seen + REMOVE_AFTER_TIMEOUTS * self.timeout_ms

    def _schedule(self, worker: Worker) -> None:
        when = self._removal_time(worker)
        self.removal.push(worker.id, when)
        self.alarms.arm(WORKERS, when)

    def expire(self, now: float) -> float | None:
        for worker_id in self.removal.pop_due(now):
            worker = self.workers.get(worker_id)
            if worker is None:
                continue
            when = self._removal_time(worker)
            if when > now:
                # Heard from since it was scheduled: look again at its new removal time.
                self.removal.push(worker_id, when)
            else:
                self._drop(worker)
                if self.events.notices:
                    self.events.notify(eventnames.WORKER_REMOVED_STALE, {"workerId": worker.id, "name": worker.name})
        return self.removal.peek_time()
