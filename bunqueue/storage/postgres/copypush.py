"""Plain pushes by binary COPY: a flush of jobs that nothing can collide with goes in without ``INSERT``.

A job the broker names (no custom id), with no unique key, no dependency or parent link, due now, cannot
collide with a live job and needs no look-up: its row is written as it is, READY, and its id is the answer.
COPY spares PostgreSQL the speculative insertion of ``ON CONFLICT`` and the ``RETURNING`` rows, and the
broker the array arguments; it is taken only when every job of a flush qualifies (the flush's order is
the seq order, so it is not split) and the flush is large enough for its extra round trip to pay. The
queues' wake-ups are sent after the COPY's commit (``statements.NOTIFY_QUEUES``), never before it; the push
is answered without waiting for them.

A generated id that meets a custom id already stored fails the COPY as a whole (nothing went in): the
caller then pushes the flush with ``INSERT``, which answers that job as it answers any collision.
"""
from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from bunqueue._core.copyrows import CopyRows
from bunqueue._core.jobs import Job
from bunqueue.broker.states import READY

# A flush with fewer jobs is sent as one INSERT: one round trip before the answer, where COPY takes two.
COPY_MIN_JOBS = 64

COPY_COLUMNS = (
    "namespace", "state", "id", "queue", "priority", "lifo", "run_at", "created_at", "max_attempts",
    "group_id", "parent_id", "remove_on_complete", "record",
)


class PreparedJobs(list[Job]):
    """A PUSHB's jobs with their rows, written on arrival; ``rows`` None when a job needs the INSERT."""

    __slots__ = ("rows",)
    rows: bytes | None


def prepared(namespace: str, jobs: list[Job], now: float) -> Sequence[Job]:
    """``jobs``, with their COPY rows when they are enough for a COPY on their own: written as they arrive,
    while the flush before them is in the database, not between that flush's answer and their own, when the
    database waits. A smaller request's rows are written by its flush, only if the flush is copied."""
    if len(jobs) < COPY_MIN_JOBS:
        return jobs
    batch = PreparedJobs(jobs)
    writer = CopyRows(namespace)
    batch.rows = writer.rows() if all(writer.add_plain(job, READY, now) for job in jobs) else None
    return batch


def copy_data(namespace: str, batches: Sequence[Sequence[Job]], now: float) -> bytes | None:
    """The binary COPY stream (``COPY_COLUMNS``) of every job of ``batches``, in order; None when a job
    needs the INSERT (a custom id, a unique key, a dependency or parent link, a run time still to come)."""
    stream = CopyRows(namespace)
    for jobs in batches:
        if type(jobs) is PreparedJobs:
            if jobs.rows is None:
                return None
            stream.add_rows(jobs.rows, len(jobs))
            continue
        for job in jobs:
            if not stream.add_plain(job, READY, now):
                return None
    return stream.finish()


async def copy_jobs(conn: asyncpg.Connection, data: bytes) -> None:
    """Write ``data`` in one COPY (its own transaction); ``asyncpg.UniqueViolationError`` when an id is taken."""
    # A memoryview, as asyncpg would take bytes for a file's path.
    await conn.copy_to_table("bunqueue_jobs", source=memoryview(data), columns=COPY_COLUMNS, format="binary")
