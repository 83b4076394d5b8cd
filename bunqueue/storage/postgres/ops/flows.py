"""Flows on PostgreSQL: PUSHF graphs, UpdateParent and the flow dependency commands, as the memory engine
answers them (``bunqueue.broker.ops.flows``).

A PUSHF graph is validated and built as in memory (``flowgraph``), then inserted whole in one transaction
by ``commit_graph``: every member or none, its edges with it, so there is nothing to publish or abandon
afterwards. A parent waits for its children through the dependency edges (``bunqueue_job_dependencies``),
which the ACK statement releases; the edits here read the rows they change under a row lock, change the
record's flow fields and metadata as the memory engine does, and write them back (``SAVE``), the pending
count recomputed from the edges left. The failures a child policy keeps for its parent are rows of
``bunqueue_flow_failures``.

A child that fails for good is told as flow:failed to every broker's streams, and a parent its
failParentOnFailure fails gets the memory engine's ``failed`` job event, to every broker's listeners.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import asyncpg

from bunqueue import errors
from bunqueue._core.jobfactory import JobFactory
from bunqueue._core.jobs import NO_DATA, Job
from bunqueue.broker import states
from bunqueue.broker.components import eventhub, eventnames, flowgraph
from bunqueue.broker.components.eventhub import EventHub
from bunqueue.broker.components.flowpolicy import PENDING_PARENT, WAITING_PARENT, flow_record
from bunqueue.broker.ops.flows import data_field, detach_child
from bunqueue.errors import CommandError
from bunqueue.storage.postgres import dependencies, flowsql
from bunqueue.storage.postgres.flowrows import adopt, job_of_row, pending_of, read_job, read_jobs, save_jobs
from bunqueue.storage.postgres.jobevents import JobEvents
from bunqueue.storage.postgres.jobrows import PushColumns
from bunqueue.storage.postgres.ops.family import Family
from bunqueue.storage.schema import pack, unpack


class FlowFamily(Family):
    factory: JobFactory
    events: EventHub
    job_events: JobEvents
    # ``EventsFamily.publish``: publish(queue, event type, job id, **fields).
    publish: Callable[..., None]

    # -- PUSHF -------------------------------------------------------------------------------------------

    async def prepare_graph(self, items: Any, measure: bool) -> list[Job]:
        """Validate and build a graph, each member in its first state; nothing is written yet. A member
        whose id is taken refuses the graph before any member is built, as in memory."""
        planned = flowgraph.validate(items, measure)
        if not planned:
            return []
        taken = await self.pool.fetchval(flowsql.GRAPH_TAKEN, self.namespace, [member.id for member in planned])
        if taken is not None:
            raise CommandError(errors.flow_job_exists(taken))
        now = self.clock()
        jobs: list[Job] = []
        for member in planned:
            opts = dict(member.input)
            custom_id = opts.get("customId")
            opts["customId"] = member.id
            job = self.factory.build(opts, member.queue, now, True)
            job.custom_id = custom_id
            _prepare_member(job, now)
            jobs.append(job)
        return jobs

    async def commit_graph(self, jobs: list[Job]) -> None:
        """Insert the whole graph and its edges in one transaction, or nothing when a member's id was taken
        since ``prepare_graph`` looked. Nothing is left to publish afterwards: the reply can go."""
        if not jobs:
            return None
        columns = PushColumns()
        for job in jobs:
            columns.add(job)
        edge_deps: list[str] = []
        edge_jobs: list[str] = []
        for job in jobs:
            for dep in job.pending_deps or ():
                edge_deps.append(dep)
                edge_jobs.append(job.id)
        async with self.pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(
                flowsql.GRAPH_INSERT, self.namespace, *columns.arrays(),
                [job.state for job in jobs], [len(job.pending_deps or ()) for job in jobs],
            )
            if len(rows) != len(jobs):
                inserted = {row[0] for row in rows}
                raise CommandError(errors.flow_job_exists(next(i for i in columns.ids if i not in inserted)))
            if edge_deps:
                await conn.execute(flowsql.ADD_EDGES, self.namespace, edge_deps, edge_jobs)
        for queue in {job.queue for job in jobs if job.state == states.READY}:
            self.hot.wakeups.wake(queue)
        return None

    def publish_graph(self, jobs: list[Job]) -> None:
        """The graph is visible since its commit: each member is told pushed, as in memory, to every broker's
        listeners; flow:pushed to every broker's streams."""
        for job in jobs:
            self.job_events.pushed([job], [job.id])
        # No name Subscribe takes, as in the original: `*` and `flow:*` streams get it.
        if jobs and self.events.notices:
            self.events.notify(eventnames.FLOW_PUSHED, {"jobs": len(jobs), "queues": len({job.queue for job in jobs})})

    def abandon_graph(self, jobs: list[Job]) -> None:
        """Never needed: a refused graph's transaction rolled back and reserved nothing."""

    # -- reads -------------------------------------------------------------------------------------------

    async def children_values(self, parent_id: Any) -> dict[str, Any]:
        """Results of the parent's completed children by ``<queue>:<childId>`` in the parent's order; a
        child whose row is gone is answered under its bare id."""
        async with self.pool.acquire() as conn:
            parent = await read_job(conn, self.namespace, parent_id)
            if parent is None or not parent.children_ids:
                return {}
            rows = await conn.fetch(flowsql.CHILD_RESULTS, self.namespace, list(parent.children_ids))
        return {
            (f"{row['queue']}:{row['id']}" if row["queue"] is not None else row["id"]): unpack(row["result"])
            for row in rows
        }

    async def failed_children_values(self, parent_id: str) -> dict[str, Any]:
        return await self._failures(parent_id, False)

    async def ignored_children_failures(self, parent_id: str) -> dict[str, Any]:
        return await self._failures(parent_id, True)

    async def _failures(self, parent_id: str, ignored: bool) -> dict[str, Any]:
        rows = await self.pool.fetch(flowsql.FAILURES, self.namespace, parent_id, ignored)
        return {row["child_key"]: unpack(row["error"]) for row in rows}

    # -- edges -------------------------------------------------------------------------------------------

    async def remove_child_dependency(self, child_id: str) -> bool:
        """Detach a child from its waiting parent: both lose the edge and its metadata."""
        async with self.pool.acquire() as conn, conn.transaction():
            child = await read_job(conn, self.namespace, child_id, lock=True)
            if child is None:
                raise CommandError(errors.job_not_found(child_id))
            if not child.parent_id:
                raise CommandError(errors.job_has_no_parent(child_id))
            parent = await read_job(conn, self.namespace, child.parent_id, lock=True)
            if parent is None or not detach_child(child, parent):
                return False
            pending = await pending_of(conn, self.namespace, parent.id)
            parent.depends_on = [dep for dep in parent.depends_on if dep != child_id and dep in pending]
            await conn.execute(flowsql.DROP_EDGES, self.namespace, parent.id, [child_id])
            if not parent.depends_on:
                _release(parent, self.clock())
            await save_jobs(conn, self.namespace, [child, parent])
        return True

    async def remove_unprocessed_children(self, parent_id: Any) -> None:
        """Remove the parent's children that have not started (active and finished ones stay)."""
        async with self.pool.acquire() as conn, conn.transaction():
            parent = await read_job(conn, self.namespace, parent_id)
            if parent is None or not parent.children_ids:
                return
            children = await read_jobs(conn, self.namespace, list(parent.children_ids), lock=True)
            unstarted = [kid for kid, child in children.items() if child.state in WAITING_PARENT]
            if unstarted:
                await conn.fetchval(flowsql.REMOVE_JOBS, self.namespace, unstarted)

    async def update_parent(self, child_id: Any, parent_id: Any) -> None:
        """UpdateParent: link a child to a parent (legacy multi-request flows)."""
        if type(child_id) is str and child_id == parent_id:
            raise CommandError(errors.FLOW_OWN_PARENT)
        async with self.pool.acquire() as conn, conn.transaction():
            found = await read_jobs(conn, self.namespace, [child_id, parent_id], lock=True)
            child = found.get(child_id) if type(child_id) is str else None
            parent = found.get(parent_id) if type(parent_id) is str else None
            if child is None:
                if parent is not None and child_id in parent.children_ids and await conn.fetchval(
                        flowsql.HAS_RESULT, self.namespace, child_id):
                    return
                raise CommandError(errors.child_not_found(child_id))
            if parent is None:
                raise CommandError(errors.parent_not_found(parent_id))
            for owner in (child.parent_id, data_field(child.data, "__parentId")):
                if owner and owner != PENDING_PARENT and owner != parent_id:
                    raise CommandError(errors.child_owned_elsewhere(child_id, owner))
            declared = child_id in parent.children_ids
            if not declared and parent.state not in WAITING_PARENT:
                raise CommandError(errors.parent_not_linkable(parent_id))
            child.parent_id = parent_id
            child.data = {**flow_record(child.data), "__parentId": parent_id, "__parentQueue": parent.queue}
            changed = [child]
            if not declared:
                await adopt(conn, self.namespace, parent, child_id, child.state == states.COMPLETED, self.clock())
                changed.append(parent)
            await save_jobs(conn, self.namespace, changed)
            if child.state == states.FAILED:
                error = await _dlq_error(conn, self.namespace, child_id)
                await self._child_failed(conn, child, errors.CHILD_FAILED_UNRECORDED if error is None else error)

    async def move_to_waiting_children(self, job_id: Any, token: Any) -> None:
        """An active job waits for its unfinished children (or, with none, stays parked as the reference
        leaves it)."""
        async with self.pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(flowsql.JOBS_LOCKED, self.namespace, [job_id]) if type(job_id) is str else []
            row = rows[0] if rows else None
            if row is not None and row["state"] == states.ACTIVE and row["worker_id"] is not None:
                if token is None:
                    raise CommandError(errors.lock_token_required(job_id))
                if token != row["lease_token"]:
                    raise CommandError(errors.invalid_lock_token(job_id))
            if row is None or row["state"] != states.ACTIVE:
                raise CommandError(errors.MOVE_NOT_ACTIVE)
            job = job_of_row(row)
            children = await read_jobs(conn, self.namespace, list(job.children_ids))
            pending = [kid for kid in job.children_ids
                       if (child := children.get(kid)) is None or child.state != states.COMPLETED]
            if pending:
                await conn.execute(flowsql.ADD_EDGES, self.namespace, pending, [job.id] * len(pending))
            job.state = states.WAITING_CHILDREN
            job.note({"state": states.WAITING_CHILDREN_NAME, "timestamp": self.clock()})
            await conn.execute(flowsql.PARK_ACTIVE, self.namespace, job.id, pack(job.to_record()))

    # -- child failures ----------------------------------------------------------------------------------

    async def failed_for_good(self, child_id: str, error: Any) -> None:
        """``child_id`` failed terminally (the job family's hook, after the FAIL): its flow policy, if it
        has a parent. A job without one costs one index read."""
        async with self.pool.acquire() as conn:
            if await conn.fetchval(flowsql.PARENT_OF, self.namespace, child_id) is None:
                return
            async with conn.transaction():
                child = await read_job(conn, self.namespace, child_id)
                if child is None or child.parent_id is None:
                    return
                failed_parent = await self._child_failed(conn, child, error)
        if self.events.notices:
            self.events.notify(eventnames.FLOW_FAILED, {
                "parentJobId": child.parent_id, "failedChildId": child.id, "queue": child.queue,
                "error": errors.MAX_ATTEMPTS_EXCEEDED if error is None else error,
            })
        if failed_parent is not None:
            parent, parent_error = failed_parent
            fields: dict[str, Any] = {} if parent.data is NO_DATA else {"data": parent.data}
            self.publish(parent.queue, eventhub.FAILED, parent.id, **fields, error=parent_error, terminal=True)

    async def _child_failed(self, conn: asyncpg.Connection, child: Job, error: Any) -> tuple[Job, Any] | None:
        """Apply ``child``'s policy to its parent while the parent still waits (``flowpolicy``): the parent
        and its error when the policy failed it."""
        parent = await read_job(conn, self.namespace, child.parent_id, lock=True)
        if parent is None or parent.state not in WAITING_PARENT:
            return None
        shown = errors.CHILD_FAILED_DEFAULT if error is None else error
        now = self.clock()
        if child.fail_parent_on_failure:
            await conn.execute(flowsql.FORGET_FAILURES, self.namespace, parent.id)
            # The parent fails for good (reason unknown, error ``errors.child_failed(child.id, shown)``);
            # its DLQ entry is the DLQ family's to write.
            await conn.execute(flowsql.FAIL_PARENT, self.namespace, parent.id)
            return parent, errors.child_failed(child.id, shown)
        key = f"{child.queue}:{child.id}"
        if child.continue_parent_on_failure:
            await conn.execute(flowsql.KEEP_FAILURE, self.namespace, parent.id, False, key, pack(shown))
            parent.depends_on = []
            if parent.state == states.WAITING_CHILDREN:
                await conn.execute(flowsql.DROP_ALL_EDGES, self.namespace, parent.id)
                _release(parent, now)
            await save_jobs(conn, self.namespace, [parent])
        elif child.remove_dependency_on_failure or child.ignore_dependency_on_failure:
            if child.ignore_dependency_on_failure:
                await conn.execute(flowsql.KEEP_FAILURE, self.namespace, parent.id, True, key, pack(shown))
            if parent.state != states.WAITING_CHILDREN or child.id not in parent.depends_on:
                return None
            parent.depends_on = [dep for dep in parent.depends_on if dep != child.id]
            await conn.execute(flowsql.DROP_EDGES, self.namespace, parent.id, [child.id])
            if not await pending_of(conn, self.namespace, parent.id):
                _release(parent, now)
            await save_jobs(conn, self.namespace, [parent])
        return None

    async def release_settled(self) -> None:
        """Release the edges to jobs that completed (see ``dependencies``); run on a timer."""
        ids, queues = await self.pool.fetchrow(dependencies.SETTLED, self.namespace)
        if ids is not None and self.hot.on_resolved is not None:
            self.hot.on_resolved(ids, queues)


def _prepare_member(job: Job, now: float) -> None:
    """A PUSHF member's first state and timeline (``Transitions.prepare_member``)."""
    if job.pending_deps:
        to, initial = states.WAITING_CHILDREN, states.WAITING_CHILDREN_NAME
    elif job.run_at > now:
        to, initial = states.DELAYED, states.DELAYED_NAME
    else:
        to = states.READY
        initial = states.PRIORITIZED if job.priority > 0 else states.WAITING
    job.state = to
    job.timeline = [{"state": initial, "timestamp": now}]


def _release(parent: Job, now: float) -> None:
    """A waiting parent nothing holds any more runs now (``Transitions.release_parent``)."""
    parent.run_at = now
    parent.state = states.READY


async def _dlq_error(conn: asyncpg.Connection, namespace: str, job_id: str) -> Any:
    """The error a failed child's DLQ entry keeps, or None."""
    entry = await conn.fetchval(flowsql.DLQ_ERROR, namespace, job_id)
    value = unpack(entry) if entry is not None else None
    return value.get("error") if type(value) is dict else None
