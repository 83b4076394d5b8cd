"""The dead-letter queue: terminally failed jobs with their failure history, per queue, oldest first."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any

from bunqueue._core.jobs import Job

DEFAULT_MAX_AGE = 604_800_000
DEFAULT_MAX_ENTRIES = 10_000


class DeadLetters:
    def __init__(self) -> None:
        self.by_queue: dict[str, OrderedDict[str, dict[str, Any]]] = {}

    def add(
        self, job: Job, reason: str, error: Any, attempts: list[dict[str, Any]], now: float
    ) -> tuple[dict[str, Any], str | None]:
        """File a job: the new entry, and the id of the oldest entry if the queue's DLQ overflowed."""
        entries = self.by_queue.get(job.queue)
        if entries is None:
            entries = self.by_queue[job.queue] = OrderedDict()
        entry = entries[job.id] = {
            "job": job,
            "enteredAt": now,
            "reason": reason,
            "error": error,
            "attempts": attempts,
            "retryCount": 0,
            "lastRetryAt": None,
            "nextRetryAt": None,
            "expiresAt": now + DEFAULT_MAX_AGE,
        }
        if len(entries) > DEFAULT_MAX_ENTRIES:
            return entry, entries.popitem(last=False)[0]
        return entry, None

    def remove(self, queue: str, job_id: str) -> dict[str, Any] | None:
        entries = self.by_queue.get(queue)
        if entries is None:
            return None
        return entries.pop(job_id, None)

    def entries(self, queue: str) -> list[dict[str, Any]]:
        entries = self.by_queue.get(queue)
        return list(entries.values()) if entries else []

    def count(self, queue: str) -> int:
        entries = self.by_queue.get(queue)
        return len(entries) if entries else 0
