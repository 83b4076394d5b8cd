"""Deduplication keys: GetDeduplicationJobId, RemoveDeduplicationKey, RemoveJobDeduplicationKey, over
``components.uniquekeys.UniqueKeys`` (a key whose TTL ran out reads as free)."""
from __future__ import annotations

from typing import Any

from bunqueue.broker.wiring import Wiring


def dedup_owner(broker: Wiring, queue: str, key: Any) -> str | None:
    return broker.keys.owner_of(queue, key, broker.clock())


def remove_dedup_key(broker: Wiring, queue: str, key: Any) -> int:
    return broker.keys.remove_key(queue, key, broker.clock())


def remove_job_dedup_key(broker: Wiring, job_id: Any) -> bool:
    return broker.keys.remove_job_key(job_id, broker.clock())
