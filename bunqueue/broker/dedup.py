"""Unique keys: per-queue deduplication of pushes (``uniqueKey`` with ``dedup`` ttl/extend/replace).

``Broker.unique_keys`` maps (queue, key) to (owner job id, expiry or None). A key belongs to its owner
while the owner is queued, waiting for children or active; it is released when the owner leaves active
(completed, failed, retried, stalled, released: as the reference does), when its ttl passes (checked
lazily on every read), or by RemoveDeduplicationKey / RemoveJobDeduplicationKey.

A push whose key has a live owner:
* by default is a no-op that answers the owner's id;
* with ``dedup.extend`` and a ``dedup.ttl`` extends the key to now + ttl and answers the owner's id while
  the owner is still queued, or fails with "Duplicate unique_key (extended TTL)" once it has started;
* with ``dedup.replace`` removes a pending owner and takes its place; an active owner keeps running but
  the key moves to the new job. Refused while other jobs depend on the owner.

The checks that can fail run before anything is admitted (``preflight``), so a PUSHB stays all-or-nothing.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bunqueue import errors
from bunqueue._core.jobs import Job
from bunqueue.broker import events, states
from bunqueue.errors import CommandError

if TYPE_CHECKING:
    from bunqueue.broker.broker import Broker

PENDING = (states.READY, states.DELAYED, states.WAITING_CHILDREN)


def owner_of(broker: Broker, queue: str, key: Any, now: float) -> str | None:
    """The live owner of a key, dropping the entry if it expired or its owner is gone."""
    entry = broker.unique_keys.get((queue, key)) if type(key) is str else None
    if entry is None:
        return None
    owner_id, expires_at = entry
    owner = broker.jobs.get(owner_id)
    if (expires_at is not None and expires_at <= now) or owner is None or owner.state not in states.LIVE:
        del broker.unique_keys[(queue, key)]
        return None
    return owner_id


def preflight(broker: Broker, job: Job, now: float) -> None:
    """Raise the errors ``claim`` would meet, before the job (or its batch) is admitted."""
    if job.unique_key is None or not (job.deduplication_replace or job.deduplication_extend):
        return
    if job.custom_id is not None:
        existing = broker.jobs.get(job.custom_id)
        if existing is not None and existing.state in states.LIVE:
            return  # the push is a no-op for its custom id: the key is never looked at
    owner_id = owner_of(broker, job.queue, job.unique_key, now)
    if owner_id is None:
        return
    if job.deduplication_replace:
        if broker.dependents.get(owner_id) or owner_id in job.depends_on:
            raise CommandError(errors.dedup_replace_blocked(owner_id))
    elif job.deduplication_ttl:
        owner = broker.jobs[owner_id]
        if owner.state != states.READY and owner.state != states.DELAYED:
            _extend(broker, job, owner_id, now)
            raise CommandError(errors.DEDUP_EXTENDED)


def claim(broker: Broker, job: Job, now: float) -> str | None:
    """Admission of a job with a unique key: the owner's id when the push is a no-op, else None (the key
    is now the job's). ``preflight`` has run."""
    key = (job.queue, job.unique_key)
    owner_id = owner_of(broker, job.queue, job.unique_key, now)
    if owner_id is not None:
        if job.deduplication_replace:
            owner = broker.jobs[owner_id]
            if owner.state in PENDING:
                _remove_pending(broker, owner)
        elif job.deduplication_extend and job.deduplication_ttl:
            _extend(broker, job, owner_id, now)
            return owner_id
        else:
            if broker.events.wanted:
                broker.events.emit(job.queue, events.DUPLICATED, owner_id)
            return owner_id
    ttl = job.deduplication_ttl
    broker.unique_keys[key] = (job.id, None if ttl is None else now + ttl)
    return None


def _extend(broker: Broker, job: Job, owner_id: str, now: float) -> None:
    broker.unique_keys[(job.queue, job.unique_key)] = (owner_id, now + job.deduplication_ttl)


def _remove_pending(broker: Broker, owner: Job) -> None:
    """A replaced owner that never started goes entirely, as if it had never been pushed."""
    q = broker.queues[owner.queue]
    if owner.state == states.WAITING_CHILDREN:
        q.unpark(owner.id)
        # Imported here: control imports the broker, which imports this module.
        from bunqueue.broker.control import unregister_dependencies

        unregister_dependencies(broker, owner)
    else:
        q.remove_queued(owner)
    broker._delete(owner)


def release(broker: Broker, job: Job) -> None:
    """The job left active (or went away): its key is free unless it moved to another job."""
    key = (job.queue, job.unique_key)
    entry = broker.unique_keys.get(key)
    if entry is not None and entry[0] == job.id:
        del broker.unique_keys[key]


def remove_key(broker: Broker, queue: str, key: Any, now: float) -> int:
    """RemoveDeduplicationKey: 1 if a live key was released, else 0."""
    owner_id = owner_of(broker, queue, key, now)
    if owner_id is None:
        return 0
    del broker.unique_keys[(queue, key)]
    _forget_key(broker, broker.jobs[owner_id])
    return 1


def remove_job_key(broker: Broker, job_id: Any, now: float) -> bool:
    """RemoveJobDeduplicationKey: release the job's key only while the job still owns it."""
    job = broker.jobs.get(job_id) if type(job_id) is str else None
    if job is None or job.unique_key is None:
        return False
    if owner_of(broker, job.queue, job.unique_key, now) != job.id:
        return False
    del broker.unique_keys[(job.queue, job.unique_key)]
    _forget_key(broker, job)
    return True


def _forget_key(broker: Broker, job: Job) -> None:
    # The job stops naming the key, so a restart does not register it again.
    job.unique_key = None
    broker.store.job_changed(job)
