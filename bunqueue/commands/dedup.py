"""Deduplication introspection: GetDeduplicationJobId, RemoveDeduplicationKey, RemoveJobDeduplicationKey."""
from __future__ import annotations

from typing import Any

from bunqueue import options
from bunqueue.broker.engine import Session
from bunqueue.broker.facade import Broker

Reply = dict[str, Any]


def handle_get_deduplication_job_id(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    queue = options.queue_name(cmd)
    owner = broker.keys.owner_of(queue, cmd.get("deduplicationId"), broker.clock())
    return {"ok": True, "data": {"jobId": owner}}


def handle_remove_deduplication_key(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    queue = options.queue_name(cmd)
    count = broker.keys.remove_key(queue, cmd.get("deduplicationId"), broker.clock())
    return {"ok": True, "data": {"count": count}}


def handle_remove_job_deduplication_key(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    removed = broker.keys.remove_job_key(cmd.get("id"), broker.clock())
    return {"ok": True, "data": {"removed": removed}}
