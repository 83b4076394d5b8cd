"""Jobs to and from ``bunqueue_jobs`` rows: the columns SQL works on, and the record (MessagePack) for the rest.

A push sends a batch column-wise, one array per column, so a statement's size does not depend on how many
jobs it carries (``unnest`` turns the arrays back into rows). A claimed row comes back as the compiled
``Job`` the reply packer writes, its record read back and the columns the claim changed laid over it.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bunqueue._core.jobs import Job
from bunqueue.broker import states
from bunqueue.storage.schema import pack, unpack

# The order of PushColumns.arrays(), which is the order of the INSERT's unnest arguments ($2 onwards).
PUSH_COLUMN_TYPES = (
    "text[]", "text[]", "float8[]", "bool[]", "bigint[]", "bigint[]", "int[]",
    "text[]", "text[]", "text[]", "text[]", "bytea[]",
)
PUSH_COLUMN_NAMES = (
    "id", "queue", "priority", "lifo", "run_at", "created_at", "max_attempts",
    "group_id", "unique_key", "custom_id", "parent_id", "record",
)


class PushColumns:
    """A batch of new jobs, column by column."""

    __slots__ = (
        "ids", "queues", "priorities", "lifos", "run_ats", "created_ats", "max_attempts",
        "group_ids", "unique_keys", "custom_ids", "parent_ids", "records",
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
        self.records.append(pack(job.to_record()))

    def arrays(self) -> tuple[list[Any], ...]:
        return (
            self.ids, self.queues, self.priorities, self.lifos, self.run_ats, self.created_ats,
            self.max_attempts, self.group_ids, self.unique_keys, self.custom_ids, self.parent_ids,
            self.records,
        )

    def __len__(self) -> int:
        return len(self.ids)


def claimed_job(row: Sequence[Any]) -> Job:
    """A job the claim statement returned (``CLAIMED_COLUMNS``), as the running attempt the row now is.

    The row counts the attempt its claim started; a job on the wire counts the attempts before the running
    one, as the memory engine's does."""
    _slot, _id, _token, attempts, started_at, seq, record, released_at = row
    job = Job.from_record(unpack(record))
    if released_at is not None and job.timeline and job.timeline[-1]["state"] == states.WAITING_CHILDREN_NAME:
        # Released by its last dependency's completion: the state it entered then, as memory notes it.
        entered = states.DELAYED if job.run_at > released_at else states.READY
        job.note({"state": states.state_name(entered, job.priority, job.run_at, released_at), "timestamp": released_at})
    job.state = states.ACTIVE
    job.attempts = attempts - 1
    job.note({"state": states.ACTIVE_NAME, "timestamp": started_at})
    job.started_at = started_at
    job.last_heartbeat = started_at
    job.seq = seq
    return job
