"""Unique keys: per-queue deduplication of pushes (``uniqueKey`` with ``dedup`` ttl/extend/replace).

``UniqueKeys.owners`` maps (queue, key) to (owner job id, expiry or None). A key belongs to its owner
while the owner is queued, waiting for children or active; it is released when the owner leaves active
(completed, failed, retried, stalled, released: as the reference does), when its ttl passes (checked
lazily on every read), or by RemoveDeduplicationKey / RemoveJobDeduplicationKey.

A push whose key has a live owner:
* by default is a no-op that answers the owner's id;
* with ``dedup.extend`` and a ``dedup.ttl`` extends the key to now + ttl and answers the owner's id while
  the owner is still queued, or fails with "Duplicate unique_key (extended TTL)" once it has started;
* with ``dedup.replace`` removes a pending owner and takes its place; an active owner keeps running but
  the key moves to the new job. Refused while other jobs depend on the owner.

The checks that can fail run before anything is admitted (``preflight``), so a PUSHB stays all-or-nothing;
``Transitions.admit`` then claims the key.
"""
from __future__ import annotations

from typing import Any

from bunqueue import errors
from bunqueue._core.jobs import Job
from bunqueue.broker import states
from bunqueue.errors import CommandError
from bunqueue.storage import Store

PENDING = (states.READY, states.DELAYED, states.WAITING_CHILDREN)


class UniqueKeys:
    __slots__ = ("jobs", "owners", "store")

    def __init__(self, jobs: dict[str, Job], store: Store) -> None:
        self.jobs = jobs
        self.store = store
        self.owners: dict[tuple[str, str], tuple[str, float | None]] = {}

    def owner_of(self, queue: str, key: Any, now: float) -> str | None:
        """The live owner of a key, dropping the entry if it expired or its owner is gone."""
        entry = self.owners.get((queue, key)) if type(key) is str else None
        if entry is None:
            return None
        owner_id, expires_at = entry
        owner = self.jobs.get(owner_id)
        if (expires_at is not None and expires_at <= now) or owner is None or owner.state not in states.LIVE:
            del self.owners[(queue, key)]
            return None
        return owner_id

    def taken_by_another(self, job: Job, now: float) -> bool:
        """Whether the job's unique key now belongs to another live job: then it may not come back."""
        key = job.unique_key
        if key is None:
            return False
        owner = self.owner_of(job.queue, key, now)
        return owner is not None and owner != job.id

    def take(self, job: Job, now: float) -> None:
        """The job owns its key from now on, for its dedup ttl."""
        ttl = job.deduplication_ttl
        self.owners[(job.queue, job.unique_key)] = (job.id, None if ttl is None else now + ttl)

    def extend(self, job: Job, owner_id: str, now: float) -> None:
        self.owners[(job.queue, job.unique_key)] = (owner_id, now + job.deduplication_ttl)

    def release(self, job: Job) -> None:
        """The job left active (or went away): its key is free unless it moved to another job."""
        key = (job.queue, job.unique_key)
        entry = self.owners.get(key)
        if entry is not None and entry[0] == job.id:
            del self.owners[key]

    def preflight(self, job: Job, now: float, dependents: dict[str, set[str]]) -> None:
        """Raise the errors admission would meet, before the job (or its batch) is admitted."""
        if job.unique_key is None or not (job.deduplication_replace or job.deduplication_extend):
            return
        if job.custom_id is not None:
            existing = self.jobs.get(job.custom_id)
            if existing is not None and existing.state in states.LIVE:
                return  # the push is a no-op for its custom id: the key is never looked at
        owner_id = self.owner_of(job.queue, job.unique_key, now)
        if owner_id is None:
            return
        if job.deduplication_replace:
            if dependents.get(owner_id) or owner_id in job.depends_on:
                raise CommandError(errors.dedup_replace_blocked(owner_id))
        elif job.deduplication_ttl:
            owner = self.jobs[owner_id]
            if owner.state != states.READY and owner.state != states.DELAYED:
                self.extend(job, owner_id, now)
                raise CommandError(errors.DEDUP_EXTENDED)

    def remove_key(self, queue: str, key: Any, now: float) -> int:
        """RemoveDeduplicationKey: 1 if a live key was released, else 0."""
        owner_id = self.owner_of(queue, key, now)
        if owner_id is None:
            return 0
        del self.owners[(queue, key)]
        self._forget_key(self.jobs[owner_id])
        return 1

    def remove_job_key(self, job_id: Any, now: float) -> bool:
        """RemoveJobDeduplicationKey: release the job's key only while the job still owns it."""
        job = self.jobs.get(job_id) if type(job_id) is str else None
        if job is None or job.unique_key is None:
            return False
        if self.owner_of(job.queue, job.unique_key, now) != job.id:
            return False
        del self.owners[(job.queue, job.unique_key)]
        self._forget_key(job)
        return True

    def _forget_key(self, job: Job) -> None:
        # The job stops naming the key, so a restart does not register it again.
        job.unique_key = None
        self.store.job_changed(job)
