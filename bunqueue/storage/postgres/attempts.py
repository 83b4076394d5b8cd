"""Attempts that do not end in an ACK, decided as the memory engine decides them (``transitions.failures``):
a FAIL, and a lease that lapsed. Each is charged, then retried (with backoff, or at once for a lapsed
lease) or failed for good: filed in the queue's DLQ, or deleted when removeOnFail or the FAIL's ``remove``
says so.

The hot path reads the running rows (``statements.LOSE_READ``, ``EXPIRE_READ``), ``Loss`` decides each
job here, and ``Losses`` gathers the batch column-wise for the one statement that writes them all
(``statements.LOSE``). A row counts the attempt its claim started, so its ``attempts`` is the memory
engine's after the loss is charged.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from bunqueue import errors
from bunqueue._core.jobs import Job, wire_number
from bunqueue.broker import states
from bunqueue.broker.components.backoff import retry_delay
from bunqueue.broker.components.deadletters import (
    DEFAULT_CONFIG,
    Entry,
    filed_entry,
    first_generation,
    maintenance_time,
)
from bunqueue.broker.components.stallconfig import DEFAULT_STALL_CONFIG
from bunqueue.broker.timers.cronregistry import is_spawned
from bunqueue.broker.transitions.failures import LEASE_EXPIRED, cap_stack, stall_error
from bunqueue.storage.postgres.jobrows import stored_job
from bunqueue.storage.schema import pack, unpack


class Lost:
    """A running row whose attempt is lost: its job (the loss charged), failure history, the DLQ lifetime
    an automatic retry left it, its queue's DLQ policy and maxStalls, and the database's time."""

    __slots__ = ("job", "history", "generation", "dlq_config", "max_stalls", "now")

    def __init__(self, row: Mapping[str, Any]) -> None:
        self.job = stored_job(row)
        self.job.attempts = row["attempts"]
        self.history: list[dict[str, Any]] = [] if row["failures"] is None else list(unpack(row["failures"]))
        self.generation: dict[str, Any] | None = (
            None if row["dlq_generation"] is None else unpack(row["dlq_generation"])
        )
        self.dlq_config = dead_letter_config(row["dlq_config"])
        # A null maxStalls counts as 0 (no limit for a lapsed lease), as in memory.
        cap = stall_config(row["stall_config"])["maxStalls"]
        self.max_stalls = 0.0 if cap is None else float(cap)
        self.now = float(row["now"])


def dead_letter_entry(entry: Entry) -> bytes:
    """A DLQ entry as ``bunqueue_dlq.entry`` keeps it: the job by id (its row stays, FAILED), as in SQLite."""
    return pack({**entry, "job": entry["job"].id})


def dead_letter_config(packed: bytes | None) -> dict[str, Any]:
    return DEFAULT_CONFIG if packed is None else unpack(packed)


def stall_config(packed: bytes | None) -> dict[str, Any]:
    return DEFAULT_STALL_CONFIG if packed is None else unpack(packed)


class Losses:
    """The outcome of a batch of lost attempts, column by column, in ``statements.LOSE``'s order."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        # Not written (the row keeps its queue): which queues to wake.
        self.queues: list[str] = []
        self.states: list[int] = []
        self.run_ats: list[int] = []
        self.started_ats: list[int | None] = []
        self.records: list[bytes] = []
        self.failures: list[bytes] = []
        self.stall_counts: list[int] = []
        self.heartbeats: list[int | None] = []
        self.dlq_ids: list[str] = []
        self.dlq_queues: list[str] = []
        self.dlq_times: list[int] = []
        self.dlq_entries: list[bytes] = []
        self.dlq_dues: list[int | None] = []
        # Per queue filed into: how many entries this batch files, and its maxEntries.
        self.dlq_filed: dict[str, int] = {}
        self.dlq_limits: dict[str, int] = {}
        self.removed: list[str] = []

    def arrays(self) -> tuple[list[Any], ...]:
        return (
            self.ids, self.states, self.run_ats, self.started_ats, self.records, self.failures,
            self.stall_counts, self.dlq_ids, self.dlq_queues, self.dlq_times, self.dlq_entries, self.removed,
            self.heartbeats, self.dlq_dues, list(self.dlq_filed),
            [max(0, self.dlq_limits[queue] - filed) for queue, filed in self.dlq_filed.items()],
        )

    def failed(self, lost: Lost, error: Any, stack: Any, final: bool, remove: bool) -> None:
        """A FAIL of the running attempt (``transitions.failures``: ``_failed_attempt``)."""
        job, now = lost.job, lost.now
        attempts = job.attempts
        if stack is not None:
            job.stacktrace = cap_stack(stack, job.stack_trace_limit)
        terminal = final or attempts >= job.max_attempts
        reason = "max_attempts_exceeded" if terminal else "explicit_fail"
        _record_failure(lost, reason, error)
        entry: dict[str, Any] = {"state": states.FAILED_NAME, "timestamp": now}
        if error is not None:
            entry["error"] = error
        entry["attempt"] = attempts
        job.note(entry)
        if terminal:
            self._terminal(lost, reason, error, remove)
        else:
            job.started_at = math.nan
            job.note({"state": states.WAITING, "timestamp": now, "attempt": attempts + 1})
            self._requeued(lost, now + retry_delay(job.backoff, job.backoff_config, attempts))

    def lapsed(self, lost: Lost) -> None:
        """A lease that ran out (``_stalled_attempt`` for LEASE_EXPIRED): back at once, or the DLQ when
        attempts or the queue's maxStalls (0: no limit) run out. A cron's job is deleted instead: the cron
        pushes a fresh run on schedule (``TransitionCore.drop_spawned``)."""
        job = lost.job
        if is_spawned(job):
            self.removed.append(job.id)
            return
        job.stall_count += 1
        attempts_out = job.attempts >= job.max_attempts
        job.last_heartbeat = lost.now
        if attempts_out or (lost.max_stalls > 0 and job.stall_count >= lost.max_stalls):
            reason = "max_attempts_exceeded" if attempts_out else "stalled"
            job.started_at = math.nan
            self._terminal(lost, reason, stall_error(job, LEASE_EXPIRED, attempts_out), False)
        else:
            _record_failure(lost, "stalled", errors.LOCK_EXPIRED)
            job.started_at = math.nan
            self._requeued(lost, job.run_at)

    def discarded(self, lost: Lost, running: bool) -> None:
        """A Discard (``TransitionCore.discard``): straight to the DLQ, reason unknown, no attempt charged
        (a running row counts the attempt its claim started), whatever removeOnFail says."""
        job = lost.job
        if running:
            job.attempts -= 1
        _record_failure(lost, "unknown", None)
        self._filed(lost, "unknown", None)

    def _requeued(self, lost: Lost, run_at: float) -> None:
        job = lost.job
        job.run_at = run_at
        job.state = states.DELAYED if run_at > lost.now else states.READY
        self._keep(job, lost.history)

    def _terminal(self, lost: Lost, reason: str, error: Any, remove: bool) -> None:
        if remove or lost.job.remove_on_fail:
            self.removed.append(lost.job.id)
            return
        self._filed(lost, reason, error)

    def _filed(self, lost: Lost, reason: str, error: Any) -> None:
        job, now = lost.job, lost.now
        job.state = states.FAILED
        generation = lost.generation if lost.generation is not None else first_generation(lost.dlq_config, now)
        entry = filed_entry(job, reason, error, lost.history, generation)
        due = maintenance_time(entry, lost.dlq_config)
        self.dlq_ids.append(job.id)
        self.dlq_queues.append(job.queue)
        self.dlq_times.append(int(now))
        self.dlq_entries.append(dead_letter_entry(entry))
        self.dlq_dues.append(None if due is None else math.ceil(due))
        self.dlq_filed[job.queue] = self.dlq_filed.get(job.queue, 0) + 1
        self.dlq_limits[job.queue] = int(lost.dlq_config["maxEntries"])
        self._keep(job, [])

    def _keep(self, job: Job, history: list[dict[str, Any]]) -> None:
        self.ids.append(job.id)
        self.queues.append(job.queue)
        self.states.append(job.state)
        self.run_ats.append(int(job.run_at))
        self.started_ats.append(None if math.isnan(job.started_at) else int(job.started_at))
        self.records.append(pack(job.to_record()))
        self.failures.append(pack(history))
        self.stall_counts.append(job.stall_count)
        self.heartbeats.append(None if math.isnan(job.last_heartbeat) else int(job.last_heartbeat))

    def __len__(self) -> int:
        return len(self.ids) + len(self.removed)


def _record_failure(lost: Lost, reason: str, error: Any) -> None:
    """One entry of the job's failure history (``Transitions.record_failure``)."""
    job, now = lost.job, lost.now
    started = None if math.isnan(job.started_at) else job.started_at
    lost.history.append({
        "attempt": job.attempts,
        "startedAt": job.created_at if started is None else started,
        "failedAt": now,
        "reason": reason,
        "error": error,
        "duration": wire_number(now - started) if started is not None else 0,
    })
