"""RegisterWorker, UnregisterWorker, ListWorkers and Heartbeat (worker liveness, not job heartbeats)."""
from __future__ import annotations

from typing import Any

from bunqueue import errors, options
from bunqueue.broker.engine import Engine, Session
from bunqueue.errors import CommandError

Reply = dict[str, Any]


def _queues(cmd: dict[str, Any]) -> list[str]:
    queues = cmd.get("queues")
    if queues is None:
        return []
    if type(queues) is not list or any(type(q) is not str for q in queues):
        raise CommandError(errors.must_be_string_array("queues"))
    return queues


def handle_register_worker(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    name = options.optional_string(cmd, "name")
    queues = _queues(cmd)
    concurrency = options.finite_option(cmd, "concurrency")
    worker_id = options.optional_string(cmd, "workerId") or None
    hostname = options.optional_string(cmd, "hostname")
    pid = options.finite_option(cmd, "pid")
    started_at = options.finite_option(cmd, "startedAt")
    worker = broker.register_worker(
        session.key, name, queues, 1 if concurrency is None else concurrency, worker_id, hostname, pid,
        started_at,
    )
    return {"ok": True, "data": worker}


def handle_unregister_worker(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    if not broker.unregister_worker(cmd.get("workerId")):
        raise CommandError(errors.WORKER_NOT_FOUND)
    return {"ok": True, "data": {"removed": True}}


def handle_list_workers(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    return {"ok": True, "data": broker.list_workers()}


def handle_heartbeat(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    active_jobs = options.finite_option(cmd, "activeJobs")
    processed = options.finite_option(cmd, "processed")
    failed = options.finite_option(cmd, "failed")
    if not broker.worker_heartbeat(cmd.get("id"), active_jobs, processed, failed):
        raise CommandError(errors.WORKER_NOT_FOUND)
    return {"ok": True, "data": {"ok": True}}
