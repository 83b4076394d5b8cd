"""Flow edits on job rows: read jobs under a lock, change their flow fields as the memory engine does, and
write them back (``SAVE``: state, parent, run time, record; the pending count recomputed from the edges)."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import asyncpg

from bunqueue._core.jobs import Job
from bunqueue.broker import states
from bunqueue.broker.components.flowpolicy import flow_record
from bunqueue.storage.postgres import flowsql
from bunqueue.storage.schema import pack, unpack


def job_of_row(row: asyncpg.Record) -> Job:
    """A job row (``flowsql.JOBS``) as a ``Job``: the record, with the columns flow edits read laid over it."""
    job = Job.from_record(unpack(row["record"]))
    job.state = row["state"]
    job.run_at = row["run_at"]
    job.parent_id = row["parent_id"]
    return job


async def read_jobs(
    conn: asyncpg.Connection, namespace: str, ids: Iterable[Any], lock: bool = False
) -> dict[str, Job]:
    """The jobs of ``ids`` that exist (names that are not strings name none), locked when ``lock``."""
    named = [job_id for job_id in ids if type(job_id) is str]
    if not named:
        return {}
    rows = await conn.fetch(flowsql.JOBS_LOCKED if lock else flowsql.JOBS, namespace, named)
    return {row["id"]: job_of_row(row) for row in rows}


async def read_job(conn: asyncpg.Connection, namespace: str, job_id: Any, lock: bool = False) -> Job | None:
    """The job ``job_id`` names, or None (a name that is not a string names none)."""
    if type(job_id) is not str:
        return None
    return (await read_jobs(conn, namespace, [job_id], lock)).get(job_id)


async def pending_of(conn: asyncpg.Connection, namespace: str, job_id: str) -> set[str]:
    """What ``job_id`` still waits for: its edges."""
    return {row[0] for row in await conn.fetch(flowsql.PENDING_OF, namespace, job_id)}


async def save_jobs(conn: asyncpg.Connection, namespace: str, jobs: list[Job]) -> None:
    await conn.fetchval(
        flowsql.SAVE, namespace, [job.id for job in jobs], [job.state for job in jobs],
        [job.parent_id for job in jobs], [int(job.run_at) for job in jobs],
        [pack(job.to_record()) for job in jobs],
    )


async def adopt(
    conn: asyncpg.Connection, namespace: str, parent: Job, child_id: str, finished: bool, now: float
) -> None:
    """A new edge (``FlowPolicies.adopt``): ``parent`` declares ``child_id`` and, unless the child already
    finished, waits for it (a queued parent starts waiting-children). The caller saves ``parent``."""
    parent.children_ids = [*parent.children_ids, child_id]
    parent.data = {**flow_record(parent.data), "__childrenIds": list(parent.children_ids)}
    if child_id not in parent.depends_on:
        parent.depends_on = [*parent.depends_on, child_id]
    if finished:
        return
    await conn.execute(flowsql.ADD_EDGES, namespace, [child_id], [parent.id])
    if parent.state != states.WAITING_CHILDREN:
        parent.state = states.WAITING_CHILDREN
    if parent.timeline[-1]["state"] != states.WAITING_CHILDREN_NAME:
        parent.note({"state": states.WAITING_CHILDREN_NAME, "timestamp": now})
