"""SQLite storage with group commit on a writer thread.

The event loop never touches the disk on a hot path. Changes are collected into a pending batch (one row
per job, however often it changed); the batch is serialised on the loop, so a row is a consistent snapshot
(a RowBuffer: job records are written from the jobs' typed fields into one C buffer), and handed to one
writer thread that commits it in one transaction. While that commit runs, the next changes collect in the
next batch: under load, many replies share one commit.

A reply that must not go out before its change is on disk takes the pending batch's *ticket* (a future);
the server sends it when the ticket resolves. The writer binds and steps the whole batch with the GIL
released (BatchWriter), so the loop keeps serving while the disk works and never waits for it per row.
"""
from __future__ import annotations

import asyncio
import logging
import os
import queue
import sqlite3
import threading
import time
from typing import Any

from bunqueue import errors
from bunqueue._core.jobs import Job
from bunqueue._core.rows import RowBuffer
from bunqueue.storage import schema
from bunqueue.storage.batchwriter import BatchWriter

log = logging.getLogger("bunqueue.storage")

RETRY_FIRST = 0.2
RETRY_MAX = 30.0
# Past this many jobs waiting for the disk, buffered pushes wait for their commit too: producers slow to
# the disk's pace instead of growing the backlog (and the crash-loss window) without bound.
MAX_BUFFERED_JOBS = 20_000
# The WAL is copied back into the database by a thread of its own after about this many row writes.
CHECKPOINT_ROWS = 20_000
# PASSIVE never catches a writer that is always mid-batch, and the WAL restarts only after a complete
# checkpoint, so under a load without pauses it grew by the whole load. Once a PASSIVE has copied a WAL
# past this size, the writer itself truncates it between two batches (any other connection asking would
# starve: the writer takes its lock again at once), copying only what it wrote since: one short pause.
WAL_RESET_BYTES = 64 * 1024 * 1024
# A PASSIVE is as slow as the disk, and everything written meanwhile lands in the WAL, which makes the next
# PASSIVE slower still: on a slow disk the WAL ran away (50 MB past a 2 MB reset). Past this size the writer
# waits for the PASSIVE in progress and truncates before its next batch; producers slow to the disk's pace.
WAL_LIMIT_BYTES = 4 * WAL_RESET_BYTES

# The SQL a batch is written with; a row of a RowBuffer names its statement by index in this list.
STATEMENTS: list[str] = []


def _statement(sql: str) -> int:
    STATEMENTS.append(sql)
    return len(STATEMENTS) - 1


DELETE_QUEUE = (
    _statement("DELETE FROM results WHERE job_id IN (SELECT id FROM jobs WHERE queue = ?)"),
    _statement("DELETE FROM jobs WHERE queue = ?"),
    _statement("DELETE FROM dlq WHERE queue = ?"),
    _statement("DELETE FROM group_controls WHERE queue = ?"),
)
DELETE_JOB = _statement("DELETE FROM jobs WHERE id = ?")
# An upsert updates an existing row in place (INSERT OR REPLACE would delete and re-insert it). The record
# holds everything then: a pull's start written beside it before is cleared.
UPSERT_JOB = _statement(
    "INSERT INTO jobs (id, queue, state, record) VALUES (?, ?, ?, ?) ON CONFLICT(id) DO UPDATE"
    " SET queue = excluded.queue, state = excluded.state, record = excluded.record, started_at = NULL"
)
MARK_PULLED = _statement("UPDATE jobs SET state = ?, started_at = ? WHERE id = ?")
DELETE_RESULT = _statement("DELETE FROM results WHERE job_id = ?")
UPSERT_RESULT = _statement("INSERT OR REPLACE INTO results (job_id, result) VALUES (?, ?)")
DELETE_DLQ = _statement("DELETE FROM dlq WHERE job_id = ?")
UPSERT_DLQ = _statement("INSERT OR REPLACE INTO dlq (job_id, queue, entry) VALUES (?, ?, ?)")
DELETE_QUEUE_SETTINGS = _statement("DELETE FROM queues WHERE name = ?")
UPSERT_QUEUE_SETTINGS = _statement("INSERT OR REPLACE INTO queues (name, settings) VALUES (?, ?)")
DELETE_GROUP = _statement("DELETE FROM group_controls WHERE queue = ? AND group_id = ?")
UPSERT_GROUP = _statement("INSERT OR REPLACE INTO group_controls (queue, group_id, controls) VALUES (?, ?, ?)")
DELETE_CRON = _statement("DELETE FROM crons WHERE name = ?")
# An upsert keeps the row (and its rowid, the creation order) in place.
UPSERT_CRON = _statement(
    "INSERT INTO crons (name, record) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET record = excluded.record"
)
DELETE_WEBHOOK = _statement("DELETE FROM webhooks WHERE id = ?")
UPSERT_WEBHOOK = _statement("INSERT OR REPLACE INTO webhooks (id, record) VALUES (?, ?)")


class Batch:
    """Changes not yet handed to the writer. Later changes to the same key replace earlier ones."""

    __slots__ = (
        "crons",
        "deleted",
        "dlq",
        "dlq_deleted",
        "groups",
        "jobs",
        "pulls",
        "queues",
        "queues_removed",
        "results",
        "results_deleted",
        "ticket",
        "webhooks",
    )

    def __init__(self) -> None:
        self.jobs: dict[str, Job] = {}
        # Jobs whose only change is a pull: their state and start time, written beside the record.
        self.pulls: dict[str, Job] = {}
        self.deleted: set[str] = set()
        self.results: dict[str, Any] = {}
        self.results_deleted: set[str] = set()
        # Obliterated queues: all their rows go, before anything else of the batch is written.
        self.queues_removed: set[str] = set()
        self.dlq: dict[str, tuple[str, dict[str, Any]]] = {}
        self.dlq_deleted: set[str] = set()
        self.queues: dict[str, dict[str, Any] | None] = {}
        # Group controls by (queue, group id); None deletes the row.
        self.groups: dict[tuple[str, str], dict[str, Any] | None] = {}
        # Cron rows by name; None deletes the row.
        self.crons: dict[str, dict[str, Any] | None] = {}
        # Webhook records by id; None deletes the row.
        self.webhooks: dict[str, dict[str, Any] | None] = {}
        # Resolves with None once committed, or with the error text when the commit failed.
        self.ticket: asyncio.Future[str | None] | None = None

    def __bool__(self) -> bool:
        return bool(
            self.jobs or self.pulls or self.deleted or self.results or self.results_deleted or self.dlq
            or self.dlq_deleted or self.queues or self.queues_removed or self.groups or self.crons or self.webhooks
        )

    def rows(self) -> RowBuffer:
        """The SQL rows of this batch, serialised now: what the writer thread will write."""
        out = RowBuffer()
        # Queue-wide deletes first, then row deletes: rows re-created in the same batch survive both.
        for name in self.queues_removed:
            for statement in DELETE_QUEUE:
                out.add(statement, (name,))
        for job_id in self.deleted:
            key = (job_id,)
            out.add(DELETE_JOB, key)
            out.add(DELETE_RESULT, key)
            out.add(DELETE_DLQ, key)
        out.add_jobs(UPSERT_JOB, self.jobs)
        out.add_pulls(MARK_PULLED, self.pulls)
        for job_id in self.results_deleted:
            out.add(DELETE_RESULT, (job_id,))
        for job_id, value in self.results.items():
            out.add_packed(UPSERT_RESULT, (job_id,), value)
        for job_id in self.dlq_deleted:
            out.add(DELETE_DLQ, (job_id,))
        for job_id, (queue_name, entry) in self.dlq.items():
            out.add_packed(UPSERT_DLQ, (job_id, queue_name), _entry_row(entry))
        for name, settings in self.queues.items():
            _keyed(out, DELETE_QUEUE_SETTINGS, UPSERT_QUEUE_SETTINGS, (name,), settings)
        for (queue_name, group_id), controls in self.groups.items():
            _keyed(out, DELETE_GROUP, UPSERT_GROUP, (queue_name, group_id), controls)
        for name, record in self.crons.items():
            _keyed(out, DELETE_CRON, UPSERT_CRON, (name,), record)
        for hook_id, record in self.webhooks.items():
            _keyed(out, DELETE_WEBHOOK, UPSERT_WEBHOOK, (hook_id,), record)
        return out

    def merge_under(self, newer: Batch) -> None:
        """Put this failed batch's changes back under ``newer``: what ``newer`` changed since wins."""
        for job_id, job in self.jobs.items():
            if job_id not in newer.jobs and job_id not in newer.deleted:
                newer.jobs[job_id] = job
                newer.pulls.pop(job_id, None)
        for job_id, job in self.pulls.items():
            if job_id not in newer.jobs and job_id not in newer.deleted:
                newer.pulls.setdefault(job_id, job)
        for job_id in self.deleted:
            if job_id not in newer.jobs:
                newer.deleted.add(job_id)
        for job_id, value in self.results.items():
            if job_id not in newer.results_deleted:
                newer.results.setdefault(job_id, value)
        for job_id in self.results_deleted:
            if job_id not in newer.results:
                newer.results_deleted.add(job_id)
        newer.queues_removed |= self.queues_removed
        for job_id, item in self.dlq.items():
            if job_id not in newer.dlq_deleted:
                newer.dlq.setdefault(job_id, item)
        for job_id in self.dlq_deleted:
            if job_id not in newer.dlq:
                newer.dlq_deleted.add(job_id)
        for name, settings in self.queues.items():
            newer.queues.setdefault(name, settings)
        for key, controls in self.groups.items():
            newer.groups.setdefault(key, controls)
        for name, record in self.crons.items():
            newer.crons.setdefault(name, record)
        for hook_id, record in self.webhooks.items():
            newer.webhooks.setdefault(hook_id, record)


def _entry_row(entry: dict[str, Any]) -> dict[str, Any]:
    row = dict(entry)
    row["job"] = entry["job"].id
    return row


def _keyed(out: RowBuffer, delete: int, upsert: int, key: tuple[str, ...], value: Any) -> None:
    """The row of a keyed record: ``value`` packed, or a delete when it is None."""
    if value is None:
        out.add(delete, key)
    else:
        out.add_packed(upsert, key, value)


class SQLiteStore:
    """The durable store. ``open()`` reads the file; then the broker's notifications flow in."""

    persistent = True

    def __init__(self, path: str, synchronous: str = "NORMAL") -> None:
        if synchronous.upper() not in schema.SYNC_LEVELS:
            raise ValueError(f"synchronous must be one of {', '.join(schema.SYNC_LEVELS)}")
        self.path = path
        self.synchronous = synchronous.upper()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.pending = Batch()
        self.in_flight: Batch | None = None
        self.flush_scheduled = False
        # Set by a change whose reply must wait for its commit; taken (and cleared) by the server.
        self.must_wait = False
        self.retry_delay = RETRY_FIRST
        self.retry_handle: asyncio.TimerHandle | None = None
        self.status: dict[str, Any] = {"diskFull": False, "error": None, "since": None}
        self.commits = 0
        self.reader: sqlite3.Connection | None = None
        self.work: queue.SimpleQueue[tuple[Batch, RowBuffer] | None] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None
        self.checkpoint_wanted = threading.Event()
        self.checkpointer: threading.Thread | None = None
        # Set by the checkpoint thread once its PASSIVE has copied a WAL past WAL_RESET_BYTES, cleared by
        # the writer after truncating it; meanwhile no PASSIVE runs, so the two never checkpoint at once.
        self.wal_reset_wanted = False
        self.wal_resets = 0
        # Held by the checkpoint thread for its PASSIVE; a writer past WAL_LIMIT_BYTES waits on it.
        self.checkpointing = threading.Lock()
        self.stopping = False
        self.closed: asyncio.Future[None] | None = None

    # -- lifecycle ---------------------------------------------------------------------------------

    def open(self, completed_state: int, keep_completed: int) -> schema.Snapshot:
        """Create or upgrade the file and read it (before the loop serves anyone)."""
        conn = schema.connect(self.path, self.synchronous)
        try:
            schema.migrate(conn)
            return schema.read_snapshot(conn, completed_state, keep_completed)
        finally:
            conn.close()

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.closed = loop.create_future()
        self.reader = schema.connect(self.path, self.synchronous)
        self.thread = threading.Thread(target=self._writer, name="bunqueue-sqlite-writer", daemon=True)
        self.thread.start()
        self.checkpointer = threading.Thread(
            target=self._checkpoint_loop, name="bunqueue-sqlite-checkpoint", daemon=True
        )
        self.checkpointer.start()

    async def committed(self) -> str | None:
        """Wait until every change notified so far is committed; the error text if a commit failed."""
        while self.in_flight is not None or self.pending:
            if self.in_flight is None:
                if self.retry_handle is not None:
                    self.retry_handle.cancel()
                    self.retry_handle = None
                self._flush()
            batch = self.in_flight
            assert batch is not None and self.loop is not None
            if batch.ticket is None:
                batch.ticket = self.loop.create_future()
            failure = await asyncio.shield(batch.ticket)
            if failure is not None:
                return failure
        return None

    async def close(self) -> None:
        """Write everything still pending, checkpoint the WAL and stop the writer."""
        if self.retry_handle is not None:
            self.retry_handle.cancel()
            self.retry_handle = None
        if await self.committed() is not None:
            log.error("shutting down with changes that could not be written: %s", self.status["error"])
        self.stopping = True
        self.checkpoint_wanted.set()
        self.work.put(None)
        assert self.closed is not None
        await self.closed
        if self.reader is not None:
            self.reader.close()

    def _writer(self) -> None:
        # A checkpoint inside a commit syncs the database file and would hold every waiting reply (and
        # widen the loss window of buffered pushes): the checkpoint thread does it beside the writer.
        conn = BatchWriter(
            self.path, (*schema.pragmas(self.synchronous), "PRAGMA wal_autocheckpoint=0"), tuple(STATEMENTS)
        )
        written = 0
        wal = self.path + "-wal"
        try:
            while True:
                item = self.work.get()
                if item is None:
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                    break
                batch, rows = item
                try:
                    # The GIL is released from BEGIN to COMMIT.
                    conn.write(rows)
                    failure = None
                except sqlite3.Error as exc:
                    failure = str(exc)
                if failure is None:
                    written += len(rows)
                    if written >= CHECKPOINT_ROWS:
                        written = 0
                        self.checkpoint_wanted.set()
                assert self.loop is not None
                self.loop.call_soon_threadsafe(self._committed, batch, failure)
                if self.wal_reset_wanted or _size(wal) >= WAL_LIMIT_BYTES:
                    with self.checkpointing:
                        self.wal_reset_wanted = not self._reset_wal(conn, wal)
        except Exception:  # pragma: no cover - the thread must report, never die silently
            log.exception("the SQLite writer stopped")
        finally:
            conn.close()
            if self.loop is not None and self.closed is not None:
                self.loop.call_soon_threadsafe(_resolve, self.closed, None)

    def _reset_wal(self, conn: BatchWriter, wal: str) -> bool:
        """Truncate the WAL; False when it stays (a reader on an older snapshot: the next batch retries)."""
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error as exc:
            log.warning("WAL truncation failed: %s", exc)
        if _size(wal) >= WAL_RESET_BYTES:
            return False
        self.wal_resets += 1
        return True

    def _checkpoint_loop(self) -> None:
        conn = schema.connect(self.path, self.synchronous)
        wal = self.path + "-wal"
        try:
            while not self.stopping:
                self.checkpoint_wanted.wait()
                self.checkpoint_wanted.clear()
                if self.stopping:
                    break
                with self.checkpointing:
                    if not self.wal_reset_wanted:
                        self._passive(conn, wal)
        finally:
            conn.close()

    def _passive(self, conn: sqlite3.Connection, wal: str) -> None:
        try:
            # PASSIVE never blocks the writer: it copies what it can and leaves the rest.
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            # The writer truncates between two batches, when only what it wrote since is left.
            self.wal_reset_wanted = _size(wal) >= WAL_RESET_BYTES
        except sqlite3.Error as exc:
            log.warning("WAL checkpoint failed: %s", exc)

    # -- group commit ------------------------------------------------------------------------------

    def _changed(self) -> Batch:
        if not self.flush_scheduled and self.in_flight is None and self.retry_handle is None:
            self.flush_scheduled = True
            assert self.loop is not None
            # Everything changed in this turn of the loop (a whole read burst) joins the batch.
            self.loop.call_soon(self._flush)
        return self.pending

    def _flush(self) -> None:
        self.flush_scheduled = False
        if self.in_flight is not None or not self.pending:
            return
        batch, self.pending = self.pending, Batch()
        # The next batch inherits nothing: tickets handed out so far belong to this one.
        self.in_flight = batch
        self.work.put((batch, batch.rows()))

    def _committed(self, batch: Batch, failure: str | None) -> None:
        self.in_flight = None
        if failure is None:
            self.commits += 1
            self.retry_delay = RETRY_FIRST
            if self.status["error"] is not None:
                log.warning("storage writes succeed again")
                self.status = {"diskFull": False, "error": None, "since": None}
        else:
            self._record_failure(failure)
            batch.merge_under(self.pending)
            assert self.loop is not None
            self.retry_handle = self.loop.call_later(self.retry_delay, self._retry)
            self.retry_delay = min(self.retry_delay * 2, RETRY_MAX)
        if batch.ticket is not None:
            _resolve(batch.ticket, None if failure is None else errors.storage_write_failed(failure))
        if failure is None and self.pending:
            self._flush()

    def _retry(self) -> None:
        self.retry_handle = None
        self._flush()

    def _record_failure(self, failure: str) -> None:
        if self.status["error"] is None:
            log.error("storage write failed, changes are kept and retried: %s", failure)
            self.status = {
                "diskFull": "full" in failure.lower(),
                "error": failure,
                "since": float(time.time_ns() // 1_000_000),
            }

    def take_ticket(self) -> asyncio.Future[str | None] | None:
        """The commit a reply must wait for, if the changes just made need one."""
        if not self.must_wait:
            return None
        self.must_wait = False
        # A change made outside any command (a timer, a recovery) may already be on its way to disk.
        batch = self.pending if self.pending else self.in_flight
        if batch is None:
            return None
        if batch.ticket is None:
            assert self.loop is not None
            batch.ticket = self.loop.create_future()
        return batch.ticket

    # -- notifications (see storage.base.Store) ----------------------------------------------------

    def job_added(self, job: Job) -> None:
        # A re-used id deleted earlier in this batch stays in `deleted`: deletes are written before inserts,
        # so the old generation's result and DLQ rows go and the new row stays.
        batch = self._changed()
        batch.jobs[job.id] = job
        if job.durable or len(batch.jobs) >= MAX_BUFFERED_JOBS:
            self.must_wait = True

    def graph_added(self, jobs: list[Job]) -> asyncio.Future[str | None]:
        # A batch is written in one transaction, so the graph's rows commit together.
        batch = self._changed()
        for job in jobs:
            batch.jobs[job.id] = job
        if batch.ticket is None:
            assert self.loop is not None
            batch.ticket = self.loop.create_future()
        return batch.ticket

    def job_changed(self, job: Job, sync: bool = True) -> None:
        batch = self._changed()
        batch.jobs[job.id] = job
        batch.pulls.pop(job.id, None)
        if sync:
            self.must_wait = True

    def job_activated(self, job: Job) -> None:
        batch = self._changed()
        if job.id not in batch.jobs:
            batch.pulls[job.id] = job

    def job_removed(self, job_id: str) -> None:
        batch = self._changed()
        batch.jobs.pop(job_id, None)
        batch.pulls.pop(job_id, None)
        batch.results.pop(job_id, None)
        batch.dlq.pop(job_id, None)
        batch.deleted.add(job_id)
        self.must_wait = True

    def result_stored(self, job_id: str, result: Any) -> None:
        batch = self._changed()
        batch.results_deleted.discard(job_id)
        batch.results[job_id] = result
        self.must_wait = True

    def result_removed(self, job_id: str) -> None:
        batch = self._changed()
        batch.results.pop(job_id, None)
        batch.results_deleted.add(job_id)
        self.must_wait = True

    def queue_removed(self, queue: str) -> None:
        batch = self._changed()
        # Rows of this queue still waiting in the batch were already dropped from memory by the caller;
        # the queue-wide delete runs first, so jobs re-created in the same batch survive it.
        batch.queues_removed.add(queue)
        self.must_wait = True

    def dlq_changed(self, queue: str, entry: dict[str, Any]) -> None:
        self._changed().dlq[entry["job"].id] = (queue, entry)
        self.must_wait = True

    def dlq_removed(self, queue: str, job_id: str) -> None:
        batch = self._changed()
        batch.dlq.pop(job_id, None)
        batch.dlq_deleted.add(job_id)
        self.must_wait = True

    def queue_changed(self, queue: str, settings: dict[str, Any] | None) -> None:
        self._changed().queues[queue] = settings
        self.must_wait = True

    def group_changed(self, queue: str, group_id: str, controls: dict[str, Any] | None) -> None:
        self._changed().groups[(queue, group_id)] = controls
        self.must_wait = True

    def cron_changed(self, name: str, record: dict[str, Any]) -> None:
        self._changed().crons[name] = record
        self.must_wait = True

    def cron_removed(self, name: str) -> None:
        self._changed().crons[name] = None
        self.must_wait = True

    def webhook_changed(self, webhook_id: str, record: dict[str, Any] | None) -> None:
        self._changed().webhooks[webhook_id] = record
        self.must_wait = True

    # -- reads -------------------------------------------------------------------------------------

    def load_job(self, job_id: str) -> tuple[Job, Any, bool] | None:
        """A job that is no longer in memory (an evicted completed one), read from the file."""
        if self.reader is None:
            return None
        # A delete not yet committed (one made by recovery, before any reply waited for it) wins over
        # the row still in the file.
        for batch in (self.pending, self.in_flight):
            if batch is not None and job_id in batch.deleted:
                return None
        return schema.read_job(self.reader, job_id)


def _resolve(fut: asyncio.Future[Any], value: Any) -> None:
    if not fut.done():
        fut.set_result(value)


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
