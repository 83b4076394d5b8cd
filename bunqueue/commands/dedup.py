"""Deduplication introspection: GetDeduplicationJobId, RemoveDeduplicationKey, RemoveJobDeduplicationKey."""
from __future__ import annotations

from typing import Any

from bunqueue import options
from bunqueue.broker.engine import Engine, Session

Reply = dict[str, Any]


def handle_get_deduplication_job_id(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue = options.queue_name(cmd)
    return {"ok": True, "data": {"jobId": broker.dedup_owner(queue, cmd.get("deduplicationId"))}}


def handle_remove_deduplication_key(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue = options.queue_name(cmd)
    return {"ok": True, "data": {"count": broker.remove_dedup_key(queue, cmd.get("deduplicationId"))}}


def handle_remove_job_deduplication_key(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    return {"ok": True, "data": {"removed": broker.remove_job_dedup_key(cmd.get("id"))}}
