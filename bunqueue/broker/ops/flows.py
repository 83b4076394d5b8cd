"""Flows: PUSHF graphs, legacy parent links (UpdateParent) and the flow dependency commands.

A PUSHF graph is validated whole (``flowgraph``), built, given its first states and then published in
one step. With a durable store the graph's rows are committed in one transaction first and the graph
is published only after that commit (``prepare_graph``, then ``publish_graph`` or ``abandon_graph``),
so no member is visible before every member is on disk; its ids are reserved meanwhile.

A parent depends on its children through ``dependsOn`` (``components.dependencies``); what a child's
terminal failure does to its parent is ``components.flowpolicy``. The flow metadata that clients read lives
inside ``data``: ``__childrenIds`` on parents, ``__parentId``/``__parentQueue`` on children.
"""
from __future__ import annotations

import asyncio
from typing import Any

from bunqueue import errors
from bunqueue._core.jobs import Job
from bunqueue.broker import states
from bunqueue.broker.components import eventnames, flowgraph
from bunqueue.broker.components.flowpolicy import PENDING_PARENT, WAITING_PARENT, flow_record
from bunqueue.broker.ops.jobcontrol import cancel, check_lease
from bunqueue.broker.wiring import Wiring
from bunqueue.errors import CommandError

DETACHABLE = frozenset((states.READY, states.DELAYED, states.WAITING_CHILDREN, states.ACTIVE))


# -- PUSHF ------------------------------------------------------------------------------------------


def prepare_graph(broker: Wiring, items: Any, measure: bool) -> list[Job]:
    """Validate and build a graph, its ids reserved; nothing is visible yet."""
    planned = flowgraph.validate(items, measure)
    if not planned:
        return []
    for member in planned:
        if _taken(broker, member.id):
            raise CommandError(errors.flow_job_exists(member.id))
    now = broker.clock()
    build = broker.factory.build
    prepare = broker.transitions.prepare_member
    jobs: list[Job] = []
    for member in planned:
        opts = dict(member.input)
        custom_id = opts.get("customId")
        opts["customId"] = member.id
        job = build(opts, member.queue, now, True)
        job.custom_id = custom_id
        prepare(job, now)
        jobs.append(job)
    broker.check_group_caps([job for job in jobs if job.state != states.WAITING_CHILDREN])
    broker.flows.reserved.update(job.id for job in jobs)
    return jobs


def _taken(broker: Wiring, job_id: str) -> bool:
    records = broker.records
    return (
        job_id in broker.jobs
        or job_id in broker.flows.reserved
        or job_id in records.completion_proofs
        or job_id in records.results
        or job_id in broker.deps.dependents
        or (broker.store.persistent and broker.find_job(job_id) is not None)
    )


def commit_graph(broker: Wiring, jobs: list[Job]) -> asyncio.Future[str | None] | None:
    """Hand a prepared graph to the store: the commit to await (resolving to None, or the error that
    refused it) before ``publish_graph``, or None when there is nothing to wait for."""
    return broker.store.graph_added(jobs) if jobs else None


def publish_graph(broker: Wiring, jobs: list[Job]) -> None:
    """Every member becomes visible at once (within one turn of the loop)."""
    publish = broker.transitions.publish_member
    reserved = broker.flows.reserved
    for job in jobs:
        reserved.discard(job.id)
        publish(job)
    # No name Subscribe takes, as in the original: `*` and `flow:*` streams get it.
    if jobs and broker.events.notices:
        broker.events.notify(eventnames.FLOW_PUSHED, {"jobs": len(jobs), "queues": len({job.queue for job in jobs})})


def abandon_graph(broker: Wiring, jobs: list[Job]) -> None:
    """The graph's commit failed: its ids are free again and its rows are not retried."""
    reserved = broker.flows.reserved
    for job in jobs:
        reserved.discard(job.id)
        broker.store.job_removed(job.id)


# -- reads ------------------------------------------------------------------------------------------


def children_values(broker: Wiring, parent_id: Any) -> dict[str, Any]:
    """Results of the parent's completed children by ``<queue>:<childId>``, in the parent's order; a
    child gone while the parent waits is answered under its bare id (``JobRecords.child_results``)."""
    parent = broker.find_job(parent_id)
    values: dict[str, Any] = {}
    if parent is None:
        return values
    kept = broker.records.child_results.get(parent.id)
    for child_id in parent.children_ids:
        stored, value = broker.find_result(child_id)
        if stored:
            child = broker.find_job(child_id)
            values[f"{child.queue}:{child_id}" if child is not None else child_id] = value
        elif kept is not None and child_id in kept:
            values[child_id] = kept[child_id]
    return values


def failed_children_values(broker: Wiring, parent_id: str) -> dict[str, Any]:
    """The failures of a parent's children that its flow policy recorded (GetFailedChildrenValues)."""
    return dict(broker.flows.failed_values.get(parent_id, {}))


def ignored_children_failures(broker: Wiring, parent_id: str) -> dict[str, Any]:
    return dict(broker.flows.ignored_failures.get(parent_id, {}))


def _completed(broker: Wiring, job_id: str) -> bool:
    if job_id in broker.records.completion_proofs:
        return True
    job = broker.find_job(job_id)
    return job is not None and job.state == states.COMPLETED


# -- edges ------------------------------------------------------------------------------------------


def detach_child(child: Job, parent: Job) -> bool:
    """RemoveChildDependency's rule, for both engines: a child that has not finished leaves a parent still
    waiting for it; both lose the link and its metadata (the caller drops the edge). False: nothing changes."""
    if parent.state != states.WAITING_CHILDREN or child.state not in DETACHABLE or child.id not in parent.depends_on:
        return False
    child.parent_id = None
    child.data = without_keys(child.data, ("__parentId", "__parentQueue"))
    parent.children_ids = [kid for kid in parent.children_ids if kid != child.id]
    parent.data = with_children(parent.data, parent.children_ids)
    return True


def remove_child_dependency(broker: Wiring, child_id: str) -> bool:
    """Detach a child from its waiting parent: both lose the edge and its metadata."""
    child = broker.jobs.get(child_id)
    if child is None:
        raise CommandError(errors.job_not_found(child_id))
    if not child.parent_id:
        raise CommandError(errors.job_has_no_parent(child_id))
    parent = broker.jobs.get(child.parent_id)
    if parent is None or not detach_child(child, parent):
        return False
    unresolved = [dep for dep in parent.depends_on if dep != child_id and not _completed(broker, dep)]
    deps = broker.deps
    for dep in parent.depends_on:
        if dep not in unresolved:
            deps.drop(parent, dep)
    parent.depends_on = unresolved
    broker.store.job_changed(child)
    if parent.pending_deps:
        broker.store.job_changed(parent)
    else:
        broker.transitions.release_parent(parent, broker.clock())
    return True


def remove_unprocessed_children(broker: Wiring, parent_id: Any) -> None:
    """Cancel the parent's children that have not started (active and finished ones stay)."""
    parent = broker.find_job(parent_id)
    if parent is None:
        return
    for child_id in list(parent.children_ids):
        child = broker.jobs.get(child_id)
        if child is not None and child.state in WAITING_PARENT:
            cancel(broker, child_id)


def update_parent(broker: Wiring, child_id: Any, parent_id: Any) -> None:
    """UpdateParent: link a child to a parent (legacy multi-request flows)."""
    if type(child_id) is str and child_id == parent_id:
        raise CommandError(errors.FLOW_OWN_PARENT)
    child = broker.find_job(child_id)
    parent = broker.find_job(parent_id)
    if child is None:
        if parent is not None and child_id in parent.children_ids and _completed(broker, child_id):
            return
        raise CommandError(errors.child_not_found(child_id))
    if parent is None:
        raise CommandError(errors.parent_not_found(parent_id))
    child_id, parent_id = child.id, parent.id
    for owner in (child.parent_id, data_field(child.data, "__parentId")):
        if owner and owner != PENDING_PARENT and owner != parent_id:
            raise CommandError(errors.child_owned_elsewhere(child_id, owner))
    declared = child_id in parent.children_ids
    if not declared and parent.state not in WAITING_PARENT:
        raise CommandError(errors.parent_not_linkable(parent_id))
    child.parent_id = parent_id
    child.data = {**flow_record(child.data), "__parentId": parent_id, "__parentQueue": parent.queue}
    broker.store.job_changed(child)
    if not declared:
        broker.flows.adopt(parent, child_id, _completed(broker, child_id))
    if child.state == states.FAILED:
        entry = broker.dlq.get(child_id)
        error = entry["error"] if entry is not None else None
        broker.flows.child_failed(child, error if error is not None else errors.CHILD_FAILED_UNRECORDED, broker.clock())


def move_to_waiting_children(broker: Wiring, job_id: Any, token: Any) -> None:
    """An active job waits for its unfinished children (or, with none, stays parked as the
    reference leaves it)."""
    job = broker.jobs.get(job_id) if type(job_id) is str else None
    if job is not None:
        check_lease(broker, job.id, token)
    if job is None or job.state != states.ACTIVE:
        raise CommandError(errors.MOVE_NOT_ACTIVE)
    pending = {kid for kid in job.children_ids if not _completed(broker, kid)}
    broker.transitions.park_active(job, pending or None, broker.clock())


# -- flow metadata in data (the PostgreSQL engine edits it with these too) ----------------------------


def data_field(data: Any, key: str) -> Any:
    return data.get(key) if type(data) is dict else None


def without_keys(data: Any, keys: tuple[str, ...]) -> Any:
    if type(data) is not dict:
        return data
    return {key: value for key, value in data.items() if key not in keys}


def with_children(data: Any, children: list[str]) -> Any:
    if type(data) is not dict:
        return data
    if children:
        return {**data, "__childrenIds": list(children)}
    return without_keys(data, ("__childrenIds",))
