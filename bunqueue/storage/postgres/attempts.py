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
from bunqueue.broker.components.deadletters import DEFAULT_CONFIG, Entry, filed_entry, first_generation
from bunqueue.broker.components.stallconfig import DEFAULT_STALL_CONFIG
from bunqueue.broker.transitions.failures import LEASE_EXPIRED, cap_stack, stall_error
from bunqueue.storage.postgres.jobrows import stored_job
from bunqueue.storage.schema import pack, unpack


def lost_job(row: Mapping[str, Any]) -> Job:
    """A running row's job as the memory engine holds it once the lost attempt is charged."""
    job = stored_job(row)
    job.attempts = row["attempts"]
    return job


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
        self.removed: list[str] = []

    def arrays(self) -> tuple[list[Any], ...]:
        return (
            self.ids, self.states, self.run_ats, self.started_ats, self.records, self.failures,
            self.stall_counts, self.dlq_ids, self.dlq_queues, self.dlq_times, self.dlq_entries, self.removed,
            self.heartbeats,
        )

    def failed(
        self, job: Job, history: list[dict[str, Any]], now: float, error: Any, stack: Any, final: bool,
        remove: bool, dlq_config: dict[str, Any],
    ) -> None:
        """A FAIL of the running attempt (``transitions.failures``: ``_failed_attempt``)."""
        attempts = job.attempts
        if stack is not None:
            job.stacktrace = cap_stack(stack, job.stack_trace_limit)
        terminal = final or attempts >= job.max_attempts
        reason = "max_attempts_exceeded" if terminal else "explicit_fail"
        _record_failure(history, job, reason, error, now)
        entry: dict[str, Any] = {"state": states.FAILED_NAME, "timestamp": now}
        if error is not None:
            entry["error"] = error
        entry["attempt"] = attempts
        job.note(entry)
        if terminal:
            self._terminal(job, history, reason, error, now, remove, dlq_config)
        else:
            job.started_at = math.nan
            job.note({"state": states.WAITING, "timestamp": now, "attempt": attempts + 1})
            self._requeued(job, history, now + retry_delay(job.backoff, job.backoff_config, attempts), now)

    def lapsed(self, job: Job, history: list[dict[str, Any]], now: float, max_stalls: float,
               dlq_config: dict[str, Any]) -> None:
        """A lease that ran out (``_stalled_attempt`` for LEASE_EXPIRED): back at once, or the DLQ when
        attempts or the queue's maxStalls (0: no limit) run out."""
        job.stall_count += 1
        attempts_out = job.attempts >= job.max_attempts
        job.last_heartbeat = now
        if attempts_out or (max_stalls > 0 and job.stall_count >= max_stalls):
            reason = "max_attempts_exceeded" if attempts_out else "stalled"
            job.started_at = math.nan
            self._terminal(job, history, reason, stall_error(job, LEASE_EXPIRED, attempts_out), now, False,
                           dlq_config)
        else:
            _record_failure(history, job, "stalled", errors.LOCK_EXPIRED, now)
            job.started_at = math.nan
            self._requeued(job, history, job.run_at, now)

    def _requeued(self, job: Job, history: list[dict[str, Any]], run_at: float, now: float) -> None:
        job.run_at = run_at
        job.state = states.DELAYED if run_at > now else states.READY
        self._keep(job, history)

    def _terminal(self, job: Job, history: list[dict[str, Any]], reason: str, error: Any, now: float,
                  remove: bool, dlq_config: dict[str, Any]) -> None:
        if remove or job.remove_on_fail:
            self.removed.append(job.id)
            return
        job.state = states.FAILED
        entry = filed_entry(job, reason, error, history, first_generation(dlq_config, now))
        self.dlq_ids.append(job.id)
        self.dlq_queues.append(job.queue)
        self.dlq_times.append(int(now))
        self.dlq_entries.append(dead_letter_entry(entry))
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


def history_of(packed: bytes | None) -> list[dict[str, Any]]:
    return [] if packed is None else list(unpack(packed))


def _record_failure(history: list[dict[str, Any]], job: Job, reason: str, error: Any, now: float) -> None:
    """One entry of the job's failure history (``Transitions.record_failure``)."""
    started = None if math.isnan(job.started_at) else job.started_at
    history.append({
        "attempt": job.attempts,
        "startedAt": job.created_at if started is None else started,
        "failedAt": now,
        "reason": reason,
        "error": error,
        "duration": wire_number(now - started) if started is not None else 0,
    })


def queue_limits(row: Mapping[str, Any]) -> tuple[dict[str, Any], float]:
    """(DLQ policy, maxStalls) of the queue a read row belongs to (its ``dlq_config``, ``stall_config``); a
    null maxStalls counts as 0, as in memory."""
    cap = stall_config(row["stall_config"])["maxStalls"]
    return dead_letter_config(row["dlq_config"]), 0.0 if cap is None else float(cap)
