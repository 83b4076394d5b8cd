"""Dependencies (``dependsOn``) on the PostgreSQL hot path: a push whose job waits for others or joins an
existing parent, and the sweep that releases what a completion could not see.

A job that depends on jobs that have not completed is inserted waiting-children with one row per pending
dependency in ``bunqueue_job_dependencies`` and their count in ``pending_deps``; the ACK statement deletes
the edges to what it completed and runs the jobs whose last edge that was (``statements.release_dependants``).
A job pushed with ``parentId`` and its parent's id and queue in ``data`` becomes a child of that parent,
which waits for it (``flowrows.adopt``), in the same transaction.

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
from bunqueue.broker.components.flowpolicy import PENDING_PARENT, WAITING_PARENT
from bunqueue.errors import CommandError
from bunqueue.storage.postgres.flowrows import adopt, read_jobs, save_jobs
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
SELECT resolved.ids, resolved.queues FROM resolved, woken
"""

# Of the jobs $2 a completion released, the flow parents none of whose children still runs or waits (a child
# removed on completion is gone): each with its queue and record, which names its children.
FINISHED_PARENTS = f"""
SELECT p.id, p.queue, p.record FROM bunqueue_jobs p
WHERE p.namespace = $1 AND p.id = ANY($2::text[]) AND NOT EXISTS (
    SELECT 1 FROM bunqueue_jobs c WHERE c.namespace = $1 AND c.parent_id = p.id AND c.state <> {states.COMPLETED})
"""


def dependent_batches(batches: list[Sequence[Job]]) -> list[int]:
    """Positions of the requests of a push flush that carry a job with dependencies or a parent link."""
    out = []
    for i, jobs in enumerate(batches):
        # A PUSHB's jobs are screened by the compiled loop; a PUSH's one job is looked at directly.
        for at in needing_checks(jobs) if type(jobs) is list else range(len(jobs)):
            if jobs[at].pending_deps is not None or _linked_parent(jobs[at]) is not None:
                out.append(i)
                break
    return out


class Admission:
    """What the checks of a flush's dependent requests found (``check``), for ``park`` after the insert."""

    __slots__ = ("refused", "waiting", "parents", "links")

    def __init__(self) -> None:
        # Refusals by request position, as the memory engine words them.
        self.refused: dict[int, CommandError] = {}
        # The dependencies that have not completed, by waiting job id.
        self.waiting: dict[str, set[str]] = {}
        # The existing parents that pushed jobs join (locked), and the (child, parent) links in order.
        self.parents: dict[str, Job] = {}
        self.links: list[tuple[str, str]] = []


async def check(
    conn: asyncpg.Connection, namespace: str, batches: list[Sequence[Job]], dependent: list[int]
) -> Admission:
    """Check the flush's dependent requests as the memory engine checks a push (dependencies, then the
    parent, job by job).

    A dependency exists when it is a job in the database (in any state) or a custom id of the same request;
    the earlier requests of the flush count as admitted before it. A parent must be a job in the database
    that still waits to run, in the queue the child names."""
    named = sorted({dep for i in dependent for job in batches[i] if job.pending_deps for dep in job.pending_deps})
    found = {row["id"]: row["state"] for row in await conn.fetch(DEPENDENCY_STATES, namespace, named)}
    linked = {parent for i in dependent for job in batches[i] if (parent := _linked_parent(job)) is not None}
    admission = Admission()
    admission.parents = await read_jobs(conn, namespace, sorted(linked), lock=True) if linked else {}
    admitted: set[str] = set()
    for i, jobs in enumerate(batches):
        if i in dependent:
            waiting: dict[str, set[str]] = {}
            links: list[tuple[str, str]] = []
            try:
                _check_request(jobs, found, admitted, admission.parents, waiting, links)
            except CommandError as exc:
                admission.refused[i] = exc
                continue
            admission.waiting.update(waiting)
            admission.links.extend(links)
        admitted.update(job.id for job in jobs)
    return admission


def _check_request(
    jobs: Sequence[Job], found: dict[str, int], admitted: set[str], parents: dict[str, Job],
    waiting: dict[str, set[str]], links: list[tuple[str, str]],
) -> None:
    batch_ids = {job.custom_id for job in jobs if job.custom_id is not None}
    # A PUSH comes as a tuple, a PUSHB as a list: a PUSHB's refusal names the job's position.
    single = type(jobs) is tuple
    for position, job in enumerate(jobs):
        try:
            _check_job(job, found, admitted, batch_ids, parents, waiting, links)
        except CommandError as exc:
            raise exc if single else CommandError(errors.batch_item(position, exc.message)) from None


def _check_job(
    job: Job, found: dict[str, int], admitted: set[str], batch_ids: set[str], parents: dict[str, Job],
    waiting: dict[str, set[str]], links: list[tuple[str, str]],
) -> None:
    deps = job.pending_deps
    if deps is not None:
        if job.id in deps:
            raise CommandError(errors.cannot_depend_on_itself(job.id))
        for dep in job.depends_on:
            if dep not in found and dep not in admitted and dep not in batch_ids:
                raise CommandError(errors.dependency_not_found(dep))
        pending = {dep for dep in deps if found.get(dep) != states.COMPLETED or dep in batch_ids or dep in admitted}
        if pending:
            waiting[job.id] = pending
            job.timeline = [{"state": states.WAITING_CHILDREN_NAME, "timestamp": job.timeline[0]["timestamp"]}]
    parent_id = _linked_parent(job)
    if parent_id is None:
        return
    if job.custom_id == parent_id:
        raise CommandError(errors.JOB_OWN_PARENT)
    parent = parents.get(parent_id)
    if parent is None:
        raise CommandError(errors.parent_not_found(parent_id))
    if parent.state not in WAITING_PARENT:
        raise CommandError(errors.parent_not_linkable(parent_id))
    queue = job.data["__parentQueue"]
    if parent.queue != queue:
        raise CommandError(errors.parent_in_other_queue(parent_id, parent.queue, queue))
    links.append((job.id, parent_id))


def _linked_parent(job: Job) -> str | None:
    """The existing parent a pushed job joins (``Queue.add`` with ``parent: {id, queue}``), as
    ``FlowPolicies.parent_of_push`` reads it: a bare ``parentId`` is a forward reference UpdateParent links."""
    parent_id = job.parent_id
    data = job.data
    if parent_id is None or parent_id == PENDING_PARENT:
        return None
    if type(data) is not dict or data.get("__parentId") != parent_id:
        return None
    queue = data.get("__parentQueue")
    return parent_id if type(queue) is str and queue else None


async def park(conn: asyncpg.Connection, namespace: str, admission: Admission, inserted: set[str], now: float) -> None:
    """The inserted jobs that wait become waiting-children with their edges, and the inserted jobs that
    join a parent become its children (the parent waits for them)."""
    ids: list[str] = []
    counts: list[int] = []
    edge_jobs: list[str] = []
    edge_deps: list[str] = []
    for job_id, deps in admission.waiting.items():
        if job_id not in inserted:
            continue
        ids.append(job_id)
        counts.append(len(deps))
        for dep in deps:
            edge_jobs.append(job_id)
            edge_deps.append(dep)
    if ids:
        await conn.execute(PARK, namespace, ids, counts, edge_jobs, edge_deps)
    adopted: dict[str, Job] = {}
    for child_id, parent_id in admission.links:
        if child_id in inserted:
            parent = adopted[parent_id] = admission.parents[parent_id]
            await adopt(conn, namespace, parent, child_id, False, now)
    if adopted:
        await save_jobs(conn, namespace, list(adopted.values()))
