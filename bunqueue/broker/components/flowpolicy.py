"""What a child's terminal failure does to its flow parent, and the failure values parents keep.

A child that fails for good (DLQ or removeOnFail, never a retried attempt) with a parent applies its
one policy, if any, while the parent is still queued or waiting for children:

* ``failParentOnFailure``: the parent goes to the DLQ (reason ``unknown``, error
  ``Child job <id> failed: <error>``);
* ``removeDependencyOnFailure``: the parent stops waiting for that child (and runs if nothing else holds
  it);
* ``ignoreDependencyOnFailure``: the same, and the error is kept for ``GetIgnoredChildrenFailures``;
* ``continueParentOnFailure``: the error is kept for ``GetFailedChildrenValues`` and the parent runs now,
  whatever else it was waiting for.

Without a policy the parent keeps waiting. Each case touches the one parent: no scan of other jobs.
"""
from __future__ import annotations

from typing import Any, Protocol

from bunqueue import errors
from bunqueue._core.jobs import Job
from bunqueue.broker import states
from bunqueue.broker.components.dependencies import Dependencies
from bunqueue.broker.components.records import JobRecords
from bunqueue.errors import CommandError
from bunqueue.storage import Store

# The marker older clients give a child before its parent exists.
PENDING_PARENT = "pending"


class ParentMoves(Protocol):
    """The transitions a policy makes (``broker.transitions.Transitions``)."""

    deps: Dependencies
    store: Store

    def discard(self, job: Job, error: str | None, now: float, announce: bool) -> None: ...

    def hold_for_children(self, job: Job) -> None: ...

    def release_parent(self, job: Job, now: float) -> None: ...


def flow_record(data: Any) -> dict[str, Any]:
    """The object a link writes flow metadata into: the job's data when it is an object, else a new one
    (scalar, array or null data gives way to the metadata clients read the edges from, as in the
    reference)."""
    return data if type(data) is dict else {}


# Where a parent may be for a policy to apply to it.
WAITING_PARENT = frozenset((states.READY, states.DELAYED, states.WAITING_CHILDREN))


class FlowPolicies:
    __slots__ = ("failed_values", "ignored_failures", "jobs", "records", "reserved", "transitions")

    def __init__(self, records: JobRecords) -> None:
        self.records = records
        self.jobs = records.jobs
        # Parent id -> {"<queue>:<childId>": error} (continueParentOnFailure / ignoreDependencyOnFailure).
        self.failed_values: dict[str, dict[str, Any]] = {}
        self.ignored_failures: dict[str, dict[str, Any]] = {}
        # Ids of PUSHF graphs being committed: taken, though not yet visible.
        self.reserved: set[str] = set()
        self.transitions: ParentMoves | None = None

    def finished_flow(self, parent_id: str) -> dict[str, Any] | None:
        """flow:completed's fields when every child of the parent has completed, else None."""
        parent = self.jobs.get(parent_id)
        children = parent.children_ids if parent is not None else None
        if parent is None or not children:
            return None
        records = self.records
        if not all(c in records.completed or c in records.completion_proofs for c in children):
            return None
        return {"parentJobId": parent_id, "queue": parent.queue, "childrenCount": len(children)}

    def parent_of_push(self, job: Job) -> Job | None:
        """The existing parent a pushed job joins (``Queue.add`` with ``parent: {id, queue}``), or None.

        A push names its parent by ``parentId`` with the same id and the parent's queue in the flow
        metadata of its data; a bare ``parentId`` (or the legacy marker ``pending``) is a forward
        reference that UpdateParent links later.
        """
        parent_id = job.parent_id
        data = job.data
        if type(data) is not dict or data.get("__parentId") != parent_id or parent_id == PENDING_PARENT:
            return None
        queue = data.get("__parentQueue")
        if type(queue) is not str or not queue:
            return None
        if job.custom_id == parent_id:
            raise CommandError(errors.JOB_OWN_PARENT)
        parent = self.jobs.get(parent_id)
        if parent is None:
            raise CommandError(errors.parent_not_found(parent_id))
        if parent.state not in WAITING_PARENT:
            raise CommandError(errors.parent_not_linkable(parent_id))
        if parent.queue != queue:
            raise CommandError(errors.parent_in_other_queue(parent_id, parent.queue, queue))
        return parent

    def adopt(self, parent: Job, child_id: str, finished: bool) -> None:
        """A new edge: ``parent`` declares ``child_id`` and, unless the child already finished, waits
        for it."""
        parent.children_ids = [*parent.children_ids, child_id]
        parent.data = {**flow_record(parent.data), "__childrenIds": list(parent.children_ids)}
        if child_id not in parent.depends_on:
            parent.depends_on = [*parent.depends_on, child_id]
        t = self.transitions
        assert t is not None
        if finished:
            t.store.job_changed(parent)
            return
        if parent.pending_deps is None:
            parent.pending_deps = set()
        parent.pending_deps.add(child_id)
        t.hold_for_children(parent)

    def child_failed(self, child: Job, error: Any, now: float) -> None:
        """``child`` failed terminally: apply its policy to its parent."""
        parent = self.jobs.get(child.parent_id)
        if parent is None or parent.state not in WAITING_PARENT:
            return
        t = self.transitions
        assert t is not None
        shown = errors.CHILD_FAILED_DEFAULT if error is None else error
        if child.fail_parent_on_failure:
            self.forget_parent(parent.id)
            t.discard(parent, errors.child_failed(child.id, shown), now, True)
            return
        key = f"{child.queue}:{child.id}"
        if child.continue_parent_on_failure:
            self.failed_values.setdefault(parent.id, {})[key] = shown
            parent.depends_on = []
            if parent.state == states.WAITING_CHILDREN:
                t.release_parent(parent, now)
            else:
                t.store.job_changed(parent)
        elif child.remove_dependency_on_failure or child.ignore_dependency_on_failure:
            if child.ignore_dependency_on_failure:
                self.ignored_failures.setdefault(parent.id, {})[key] = shown
            self.drop_dependency(parent, child.id, now)

    def forget_parent(self, parent_id: str) -> None:
        """A parent finished (completed or failed for good): its kept failures and the results of its
        removed children go, as in the reference."""
        self.failed_values.pop(parent_id, None)
        self.ignored_failures.pop(parent_id, None)
        self.records.child_results.pop(parent_id, None)

    def drop_dependency(self, parent: Job, dep_id: str, now: float) -> bool:
        """``parent`` no longer depends on ``dep_id``; it runs if that was its last unfinished one."""
        if parent.state != states.WAITING_CHILDREN or dep_id not in parent.depends_on:
            return False
        parent.depends_on = [dep for dep in parent.depends_on if dep != dep_id]
        t = self.transitions
        assert t is not None
        t.deps.drop(parent, dep_id)
        if not parent.pending_deps:
            t.release_parent(parent, now)
        else:
            t.store.job_changed(parent)
        return True

    def restore(self, jobs: list[Job], dlq_errors: dict[str, Any]) -> None:
        """After a restart: the kept failures of children in the DLQ whose parent still waits."""
        jobs_by_id = self.jobs
        for child in jobs:
            if child.parent_id is None or child.state != states.FAILED:
                continue
            parent = jobs_by_id.get(child.parent_id)
            if parent is None or parent.state not in states.LIVE:
                continue
            error = dlq_errors.get(child.id, errors.CHILD_FAILED_DEFAULT)
            key = f"{child.queue}:{child.id}"
            if child.continue_parent_on_failure:
                self.failed_values.setdefault(parent.id, {})[key] = error
            elif child.ignore_dependency_on_failure:
                self.ignored_failures.setdefault(parent.id, {})[key] = error
