"""Jobs to and from ``bunqueue_jobs`` rows: the columns SQL works on, and the record (MessagePack) for the rest.

A push sends a batch column-wise, one array per column, so a statement's size does not depend on how many
jobs it carries (``unnest`` turns the arrays back into rows). A claimed row comes back as the compiled
``Job`` the reply packer writes, its record read back and the columns the claim changed laid over it.

The record is the job as the last write that rewrote it left it (a push, a lost attempt, a restart). The
claim and the ACK write columns only, so a reader takes their timeline entries from ``started_at`` and
``completed_at``: ``stored_job`` reads any row that way, as the memory engine would hold the job.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from bunqueue._core.jobs import TIMELINE_CAP, Job
from bunqueue._core.rows import RowBuffer
from bunqueue.broker import states
from bunqueue.storage.schema import unpack

# A pushed job's record: the bytes of ``schema.pack(job.to_record())``, written from the job's typed fields
# by one compiled row buffer kept for the loop (0.7 µs a job where the tuple and msgpack took 2.8). The
# push collectors run on the loop only: no thread shares it.
record_of = RowBuffer().record

# The order of PushColumns.arrays(), which is the order of the INSERT's unnest arguments ($2 onwards).
PUSH_COLUMN_TYPES = (
    "text[]", "text[]", "float8[]", "bool[]", "bigint[]", "bigint[]", "int[]",
    "text[]", "text[]", "text[]", "text[]", "bool[]", "bytea[]",
)
PUSH_COLUMN_NAMES = (
    "id", "queue", "priority", "lifo", "run_at", "created_at", "max_attempts",
    "group_id", "unique_key", "custom_id", "parent_id", "remove_on_complete", "record",
)


class PushColumns:
    """A batch of new jobs, column by column."""

    __slots__ = (
        "ids", "queues", "priorities", "lifos", "run_ats", "created_ats", "max_attempts",
        "group_ids", "unique_keys", "custom_ids", "parent_ids", "removes_on_complete", "records",
    )

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.queues: list[str] = []
        self.priorities: list[float] = []
        self.lifos: list[bool] = []
        self.run_ats: list[int] = []
        self.created_ats: list[int] = []
        self.max_attempts: list[int] = []
        self.group_ids: list[str | None] = []
        self.unique_keys: list[str | None] = []
        self.custom_ids: list[str | None] = []
        self.parent_ids: list[str | None] = []
        self.removes_on_complete: list[bool] = []
        self.records: list[bytes] = []

    def add(self, job: Job) -> None:
        self.ids.append(job.id)
        self.queues.append(job.queue)
        self.priorities.append(job.priority)
        self.lifos.append(bool(job.lifo))
        self.run_ats.append(int(job.run_at))
        self.created_ats.append(int(job.created_at))
        self.max_attempts.append(job.max_attempts)
        self.group_ids.append(job.group_id)
        self.unique_keys.append(job.unique_key)
        self.custom_ids.append(job.custom_id)
        self.parent_ids.append(job.parent_id)
        self.removes_on_complete.append(bool(job.remove_on_complete))
        self.records.append(record_of(job))

    def arrays(self) -> tuple[list[Any], ...]:
        return (
            self.ids, self.queues, self.priorities, self.lifos, self.run_ats, self.created_ats,
            self.max_attempts, self.group_ids, self.unique_keys, self.custom_ids, self.parent_ids,
            self.removes_on_complete, self.records,
        )

    def rows(self, positions: list[int]) -> PushColumns:
        """The rows at ``positions``, in that order."""
        out = PushColumns()
        for name in self.__slots__:
            column = getattr(self, name)
            setattr(out, name, [column[i] for i in positions])
        return out

    def __len__(self) -> int:
        return len(self.ids)


def claimed_job(row: Sequence[Any]) -> Job:
    """A job the claim statement returned (``CLAIMED_COLUMNS``), as the running attempt the row now is.

    The row counts the attempt its claim started; a job on the wire counts the attempts before the running
    one, as the memory engine's does. Priority, lifo and run time are columns that job control changes
    in place, so the row's values win over the record's."""
    _slot, _id, _token, attempts, started_at, seq, record, priority, lifo, run_at, released_at = row
    job = Job.from_record(unpack(record))
    job.priority = priority
    job.lifo = lifo
    job.run_at = run_at
    if released_at is not None and job.timeline and job.timeline[-1]["state"] == states.WAITING_CHILDREN_NAME:
        # Released by its last dependency's completion: the state it entered then, as memory notes it.
        entered = states.DELAYED if job.run_at > released_at else states.READY
        job.note({
            "state": states.state_name(entered, job.priority, job.run_at, released_at), "timestamp": released_at,
        })
    job.state = states.ACTIVE
    job.attempts = attempts - 1
    # Times are wire doubles, as the memory engine's are.
    job.note({"state": states.ACTIVE_NAME, "timestamp": float(started_at)})
    job.started_at = started_at
    job.last_heartbeat = started_at
    job.seq = seq
    return job


# The columns ``stored_job`` reads (with ``record``): the columns that win over the record's copies. For a
# SELECT list: ``stored_columns("j")``.
STORED_COLUMNS = (
    "record", "state", "run_at", "attempts", "started_at", "completed_at", "stall_count", "seq", "last_heartbeat",
    "priority", "lifo", "max_attempts",
)


def stored_columns(alias: str) -> str:
    return ", ".join(f"{alias}.{name}" for name in STORED_COLUMNS)


def stored_job(row: Mapping[str, Any]) -> Job:
    """Any job row (read with ``stored_columns``, by name) as the memory engine would hold the job.

    A running row counts the attempt its claim started (the wire counts those before it; the ACK takes
    that count back when it completes the row). The hot path changes columns only: the claim's ``active``
    timeline entry and the ack's ``completed`` one are written by no statement, so they are laid into the
    record's timeline here from ``started_at`` and ``completed_at``, each where its time puts it and only when
    the record does not hold it. A job back in its queue (a retry, a lapsed lease) shows no start time."""
    job = Job.from_record(unpack(row["record"]))
    state = row["state"]
    started = row["started_at"]
    job.state = state
    job.run_at = float(row["run_at"])
    job.priority = row["priority"]
    job.lifo = row["lifo"]
    job.max_attempts = row["max_attempts"]
    job.attempts = row["attempts"] - 1 if state == states.ACTIVE else row["attempts"]
    job.stall_count = row["stall_count"]
    job.seq = row["seq"]
    if started is None or state in (states.READY, states.DELAYED):
        job.started_at = math.nan
    else:
        job.started_at = float(started)
    if row["last_heartbeat"] is not None:
        job.last_heartbeat = float(row["last_heartbeat"])
    if started is not None and state in (states.ACTIVE, states.COMPLETED, states.FAILED):
        _note_once(job, states.ACTIVE_NAME, float(started))
    if state == states.COMPLETED and row["completed_at"] is not None:
        job.completed_at = float(row["completed_at"])
        _note_once(job, states.COMPLETED_NAME, job.completed_at)
    return job


def _note_once(job: Job, name: str, timestamp: float) -> None:
    """Add the entry (``name`` at ``timestamp``) where its time puts it, unless the timeline holds it (a
    statement that rewrote the record after the claim may have noted it already)."""
    timeline = job.timeline
    for entry in timeline:
        if entry["state"] == name and entry["timestamp"] == timestamp:
            return
    at = len(timeline)
    while at > 0 and timeline[at - 1]["timestamp"] > timestamp:
        at -= 1
    if at == len(timeline):
        job.note({"state": name, "timestamp": timestamp})
        return
    timeline.insert(at, {"state": name, "timestamp": timestamp})
    if len(timeline) > TIMELINE_CAP:
        del timeline[0]
