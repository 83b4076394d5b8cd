"""Dependencies (``dependsOn``): which parked jobs wait for which, and what completion releases.

A job whose dependencies have not all completed is parked in its queue (waiting-children) and listed
under each dependency in ``dependents``; a completion releases the jobs whose last dependency it was.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from bunqueue import errors
from bunqueue._core.jobs import Job
from bunqueue.broker import states
from bunqueue.broker.components.records import JobRecords
from bunqueue.errors import CommandError


class Dependencies:
    __slots__ = ("dependents", "records")

    def __init__(self, records: JobRecords) -> None:
        self.records = records
        # Dependency id -> ids of the parked jobs waiting for it.
        self.dependents: dict[str, set[str]] = {}

    def check(self, job: Job, batch_ids: Iterable[Any]) -> None:
        """Every dependency of ``job`` (one that has ``pending_deps``) must exist, have completed, or come in
        the same batch."""
        if job.id in job.pending_deps:
            raise CommandError(errors.cannot_depend_on_itself(job.id))
        jobs = self.records.jobs
        proofs = self.records.completion_proofs
        for dep in job.depends_on:
            if dep not in jobs and dep not in proofs and dep not in batch_ids:
                raise CommandError(errors.dependency_not_found(dep))

    def prune(self, job: Job) -> None:
        """Drop dependencies that already completed (``pending_deps`` becomes None when none remain)."""
        deps = job.pending_deps
        proofs = self.records.completion_proofs
        jobs = self.records.jobs
        for dep in list(deps):
            done = jobs.get(dep)
            if dep in proofs or (done is not None and done.state == states.COMPLETED):
                deps.discard(dep)
        if not deps:
            job.pending_deps = None

    def wait_for(self, job: Job) -> None:
        """List a parked job under each of its pending dependencies."""
        dependents = self.dependents
        for dep in job.pending_deps or ():
            dependents.setdefault(dep, set()).add(job.id)

    def unregister(self, job: Job) -> None:
        """A waiting-children job leaves: its dependencies stop pointing at it."""
        dependents = self.dependents
        for dep in job.pending_deps or ():
            waiting = dependents.get(dep)
            if waiting is not None:
                waiting.discard(job.id)
                if not waiting:
                    del dependents[dep]
        job.pending_deps = None

    def drop(self, job: Job, dep_id: str) -> None:
        """``job`` stops waiting for ``dep_id`` (a flow edge removed or given up)."""
        pending = job.pending_deps
        if pending is None or dep_id not in pending:
            return
        pending.discard(dep_id)
        waiting = self.dependents.get(dep_id)
        if waiting is not None:
            waiting.discard(job.id)
            if not waiting:
                del self.dependents[dep_id]

    def released_by(self, dep_id: str) -> list[Job]:
        """``dep_id`` completed: the parked jobs it was the last dependency of (their deps cleared)."""
        waiting = self.dependents.pop(dep_id, None)
        if not waiting:
            return []
        jobs = self.records.jobs
        released = []
        for job_id in waiting:
            job = jobs.get(job_id)
            if job is None or job.state != states.WAITING_CHILDREN:
                continue
            job.pending_deps.discard(dep_id)
            if not job.pending_deps:
                job.pending_deps = None
                released.append(job)
        return released
