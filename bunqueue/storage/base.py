"""The storage interface the broker calls on every transition.

The broker changes its in-memory state first, then tells the store what changed; the store decides how
and when that reaches disk. Calls are cheap notifications (no I/O happens inside them) so the event loop
never waits on a disk: a durable store collects them and commits them in groups.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from bunqueue._core.jobs import Job
from bunqueue.storage.schema import Snapshot


class Store(Protocol):
    # Whether rows outlive the process: a completed job evicted from memory is still on disk.
    persistent: bool

    def open(self, completed_state: int, keep_completed: int) -> Snapshot | None:
        """Prepare the store before the loop serves anyone; what it kept, or None when it keeps nothing.

        ``keep_completed`` is how many of the newest completed jobs (``completed_state``) come back.
        """

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Begin accepting notifications on ``loop``."""

    async def close(self) -> None:
        """Make everything notified so far durable, then stop."""

    @property
    def status(self) -> dict[str, Any]:
        """StorageStatus: {diskFull, error, since}; error is None while writes succeed."""

    def job_added(self, job: Job) -> None:
        """A new job was admitted (its first row). Its reply waits for the commit only if durable."""

    def graph_added(self, jobs: list[Job]) -> asyncio.Future[str | None] | None:
        """A PUSHF graph, not yet visible: all its rows go to disk in one transaction.

        Returns the commit to wait for before the graph may be published (it resolves with None, or
        with the error text when the write failed), or None when nothing is kept.
        """

    def job_changed(self, job: Job, sync: bool = True) -> None:
        """A persistent field of a job changed: write its current state.

        ``sync=False`` when losing the change in a crash is tolerated (a progress update): the reply need
        not wait for the commit.
        """

    def job_activated(self, job: Job) -> None:
        """A pull made the job active: only its state and start time are recorded, and no reply waits for
        them (after a crash the job is delivered again, charged one interrupted attempt)."""

    def job_removed(self, job_id: str) -> None:
        """The job is gone (removeOnComplete, cancel, clean, eviction of a retired generation)."""

    def result_stored(self, job_id: str, result: Any) -> None:
        """An ACK stored a result."""

    def result_removed(self, job_id: str) -> None:
        """A stored result was dropped while its job stays (RetryCompleted)."""

    def dlq_changed(self, queue: str, entry: dict[str, Any]) -> None:
        """A DLQ entry was added or updated (retry counters)."""

    def dlq_removed(self, queue: str, job_id: str) -> None:
        """A DLQ entry left the DLQ (retried, purged, removed)."""

    def queue_changed(self, queue: str, settings: dict[str, Any] | None) -> None:
        """A queue's persistent controls changed (pause, limits, stall and DLQ config); None = defaults."""

    def queue_removed(self, queue: str) -> None:
        """Obliterate: every row of the queue goes, including those no longer held in memory."""

    def group_changed(self, queue: str, group_id: str, controls: dict[str, Any] | None) -> None:
        """A group's stored controls (concurrency, rate limit, pause) changed; None = no controls."""

    def cron_changed(self, name: str, record: dict[str, Any]) -> None:
        """A cron was created or updated, or fired (its execution count and next run changed)."""

    def cron_removed(self, name: str) -> None:
        """A cron was deleted (CronDelete, or it reached its limit)."""
    def webhook_changed(self, webhook_id: str, record: dict[str, Any] | None) -> None:
        """A webhook was registered or changed (its record), or removed (None)."""

    def take_ticket(self) -> asyncio.Future[str | None] | None:
        """The commit that the reply to the command just handled must wait for, or None."""

    def load_job(self, job_id: str) -> tuple[Job, Any, bool] | None:
        """A job no longer held in memory: (job, result, has_result), or None."""


class MemoryStore:
    """Memory-only mode: nothing to keep, so every notification is a no-op."""

    __slots__ = ()
    persistent = False

    def open(self, completed_state: int, keep_completed: int) -> None:
        return None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        pass

    async def close(self) -> None:
        pass

    @property
    def status(self) -> dict[str, Any]:
        return {"diskFull": False, "error": None, "since": None}

    def job_added(self, job: Job) -> None:
        pass

    def graph_added(self, jobs: list[Job]) -> None:
        return None

    def job_changed(self, job: Job, sync: bool = True) -> None:
        pass

    def job_activated(self, job: Job) -> None:
        pass

    def job_removed(self, job_id: str) -> None:
        pass

    def result_stored(self, job_id: str, result: Any) -> None:
        pass

    def result_removed(self, job_id: str) -> None:
        pass

    def dlq_changed(self, queue: str, entry: dict[str, Any]) -> None:
        pass

    def dlq_removed(self, queue: str, job_id: str) -> None:
        pass

    def queue_changed(self, queue: str, settings: dict[str, Any] | None) -> None:
        pass

    def queue_removed(self, queue: str) -> None:
        pass

    def group_changed(self, queue: str, group_id: str, controls: dict[str, Any] | None) -> None:
        pass

    def cron_changed(self, name: str, record: dict[str, Any]) -> None:
        pass

    def cron_removed(self, name: str) -> None:
        pass

    def webhook_changed(self, webhook_id: str, record: dict[str, Any] | None) -> None:
        pass

    def take_ticket(self) -> None:
        return None

    def load_job(self, job_id: str) -> None:
        return None


def notice_hook(store: Store, name: str) -> Callable[[Job], None] | None:
    """The store's notice ``name`` (``job_added``, ``job_activated``, ``job_changed``), or None where it is
    the memory store's no-op: a loop over a batch then spares itself a call per job."""
    if getattr(type(store), name, None) is getattr(MemoryStore, name):
        return None
    hook: Callable[[Job], None] = getattr(store, name)
    return hook
