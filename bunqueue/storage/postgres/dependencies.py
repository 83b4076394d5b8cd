"""Dependencies (``dependsOn``) on the PostgreSQL hot path: a push whose job waits for others, and the sweep
that releases what a completion could not see.

A job that depends on jobs that have not completed is inserted waiting-children with one row per pending
dependency in ``bunqueue_job_dependencies`` and their count in ``pending_deps``; the ACK statement deletes
the edges to what it completed and runs the jobs whose last edge that was (``statements.release_dependants``).

The ACK statement reads the edges under the snapshot it started with, so an edge a push committed while
that ACK was already running is not released by it. ``SETTLED`` releases such edges (edges to jobs that have
completed); every broker runs it on a timer, and it touches pending edges only.
"""
from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from bunqueue import errors
from bunqueue._core.admission import needing_checks
from bunqueue._core.jobs import Job
from bunqueue.broker import states
from bunqueue.errors import CommandError
from bunqueue.storage.postgres.sessions import NOW_MS
from bunqueue.storage.postgres.statements import _notify_ready, release_dependants

# The jobs a batch's dependencies name: present (any state) or missing.
DEPENDENCY_STATES = "SELECT id, state FROM bunqueue_jobs WHERE namespace = $1 AND id = ANY($2::text[])"

# Jobs just inserted that wait: waiting-children, their pending count, and their edges ($4 job, $5 dependency).
PARK = f"""
WITH parked AS (
    UPDATE bunqueue_jobs j SET state = {states.WAITING_CHILDREN}, pending_deps = p.n
    FROM unnest($2::text[], $3::int[]) AS p(id, n)
    WHERE j.namespace = $1 AND j.id = p.id
    RETURNING j.id
)
INSERT INTO bunqueue_job_dependencies (namespace, depends_on, job_id)
SELECT $1, e.dep, e.id FROM unnest($4::text[], $5::text[]) AS e(id, dep) JOIN parked USING (id)
ON CONFLICT DO NOTHING
"""

# Edges whose dependency has completed, released as the ACK would have released them.
SETTLED = f"""
WITH clock AS (SELECT {NOW_MS} AS now),
settled AS (
    SELECT DISTINCT d.depends_on AS id FROM bunqueue_job_dependencies d
    JOIN bunqueue_jobs dep ON dep.namespace = d.namespace AND dep.id = d.depends_on
    WHERE d.namespace = $1 AND dep.state = {states.COMPLETED}
), {release_dependants("settled")}, {_notify_ready("released")}
SELECT count(*) FROM released, woken
"""


def dependent_batches(batches: list[Sequence[Job]]) -> list[int]:
    """Positions of the requests of a push flush that carry a job with dependencies."""
    out = []
    for i, jobs in enumerate(batches):
        for at in needing_checks(jobs if type(jobs) is list else list(jobs)):
            if jobs[at].pending_deps is not None:
                out.append(i)
                break
    return out


async def check(
    conn: asyncpg.Connection, namespace: str, batches: list[Sequence[Job]], dependent: list[int]
) -> tuple[dict[int, CommandError], dict[str, set[str]]]:
    """The refusals of the flush's dependent requests (by position), as the memory engine words them, and
    for the jobs of the others that wait: the dependencies that have not completed, by job id.

    A dependency exists when it is a job in the database (in any state) or a custom id of the same request;
    the earlier requests of the flush count as admitted before it."""
    named = sorted({dep for i in dependent for job in batches[i] if job.pending_deps for dep in job.pending_deps})
    found = {row["id"]: row["state"] for row in await conn.fetch(DEPENDENCY_STATES, namespace, named)}
    refused: dict[int, CommandError] = {}
    waiting: dict[str, set[str]] = {}
    admitted: set[str] = set()
    for i, jobs in enumerate(batches):
        if i in dependent:
            batch_ids = {job.custom_id for job in jobs if job.custom_id is not None}
            try:
                # A PUSH comes as a tuple, a PUSHB as a list: a PUSHB's refusal names the job's position.
                waits = _pending(jobs, found, admitted, batch_ids, single=type(jobs) is tuple)
            except CommandError as exc:
                refused[i] = exc
                continue
            waiting.update(waits)
        admitted.update(job.id for job in jobs)
    return refused, waiting


def _pending(
    jobs: Sequence[Job], found: dict[str, int], admitted: set[str], batch_ids: set[str], single: bool
) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for position, job in enumerate(jobs):
        deps = job.pending_deps
        if deps is None:
            continue
        try:
            if job.id in deps:
                raise CommandError(errors.cannot_depend_on_itself(job.id))
            for dep in job.depends_on:
                if dep not in found and dep not in admitted and dep not in batch_ids:
                    raise CommandError(errors.dependency_not_found(dep))
        except CommandError as exc:
            raise exc if single else CommandError(errors.batch_item(position, exc.message)) from None
        pending = {dep for dep in deps if found.get(dep) != states.COMPLETED or dep in batch_ids or dep in admitted}
        if pending:
            out[job.id] = pending
            job.timeline = [{"state": states.WAITING_CHILDREN_NAME, "timestamp": job.timeline[0]["timestamp"]}]
    return out


async def park(conn: asyncpg.Connection, namespace: str, waiting: dict[str, set[str]], inserted: set[str]) -> None:
    """The inserted jobs of ``waiting`` become waiting-children, with their edges."""
    ids: list[str] = []
    counts: list[int] = []
    edge_jobs: list[str] = []
    edge_deps: list[str] = []
    for job_id, deps in waiting.items():
        if job_id not in inserted:
            continue
        ids.append(job_id)
        counts.append(len(deps))
        for dep in deps:
            edge_jobs.append(job_id)
            edge_deps.append(dep)
    if ids:
        await conn.execute(PARK, namespace, ids, counts, edge_jobs, edge_deps)
