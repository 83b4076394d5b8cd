"""The storage interface the broker calls on every transition.

The broker changes its in-memory state first, then tells the store what changed; the store decides how
and when that reaches disk. Calls are cheap notifications (no I/O happens inside them) so the event loop
never waits on a disk: a durable store collects them and commits them in groups.
"""
from __future__ import annotations

from typing import Any, Protocol

from bunqueue._core.jobs import Job


class Store(Protocol):
    def job_added(self, job: Job) -> None:
        """A new job was admitted (its first row)."""

    def job_changed(self, job: Job) -> None:
        """Any persistent field of a live or finished job changed: write its current state."""

    def job_removed(self, job_id: str) -> None:
        """The job is gone (removeOnComplete, cancel, clean, eviction of a retired generation)."""

    def result_stored(self, job_id: str, result: Any) -> None:
        """An ACK stored a result."""

    def dlq_changed(self, queue: str, entry: dict[str, Any]) -> None:
        """A DLQ entry was added or updated (retry counters)."""

    def dlq_removed(self, queue: str, job_id: str) -> None:
        """A DLQ entry left the DLQ (retried, purged, removed)."""

    def queue_changed(self, queue: str, settings: dict[str, Any] | None) -> None:
        """A queue's persistent controls changed (pause, limits, stall and DLQ config); None = defaults."""


class MemoryStore:
    """Memory-only mode: nothing to keep, so every notification is a no-op."""

    __slots__ = ()

    def job_added(self, job: Job) -> None:
        pass

    def job_changed(self, job: Job) -> None:
        pass

    def job_removed(self, job_id: str) -> None:
        pass

    def result_stored(self, job_id: str, result: Any) -> None:
        pass

    def dlq_changed(self, queue: str, entry: dict[str, Any]) -> None:
        pass

    def dlq_removed(self, queue: str, job_id: str) -> None:
        pass

    def queue_changed(self, queue: str, settings: dict[str, Any] | None) -> None:
        pass
