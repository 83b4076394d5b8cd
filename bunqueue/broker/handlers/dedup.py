"""Deduplication introspection: GetDeduplicationJobId, RemoveDeduplicationKey, RemoveJobDeduplicationKey."""
from __future__ import annotations

from typing import Any

from bunqueue.broker import dedup, options
from bunqueue.broker.broker import Broker
from bunqueue.broker.clock import now_ms
from bunqueue.broker.session import Session

Reply = dict[str, Any]


def handle_get_deduplication_job_id(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    queue = options.queue_name(cmd)
    owner = dedup.owner_of(broker, queue, cmd.get("deduplicationId"), now_ms())
    return {"ok": True, "data": {"jobId": owner}}


def handle_remove_deduplication_key(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    queue = options.queue_name(cmd)
    count = dedup.remove_key(broker, queue, cmd.get("deduplicationId"), now_ms())
    return {"ok": True, "data": {"count": count}}


def handle_remove_job_deduplication_key(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    removed = dedup.remove_job_key(broker, cmd.get("id"), now_ms())
    return {"ok": True, "data": {"removed": removed}}
