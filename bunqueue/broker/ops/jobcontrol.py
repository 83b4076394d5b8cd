"""Administrative job transitions: Cancel, Update, ChangePriority, Promote, PromoteJobs, MoveToDelayed /
ChangeDelay, MoveToWait, Discard and Progress.

Each runs to completion without yielding (the event loop is the lock), keeps the queue counters exact by
going through ``QueueState``'s add/remove methods, and tells the store about the change afterwards.
"""
from __future__ import annotations

import json
import math
from typing import Any

from bunqueue import errors
from bunqueue._core.jobfactory import check_nesting
from bunqueue._core.jobs import Job, wire_number
from bunqueue.broker import states
from bunqueue.broker.components import eventhub, eventnames
from bunqueue.broker.components.queues import QueueState
from bunqueue.broker.transitions import QUEUED
from bunqueue.broker.wiring import Wiring
from bunqueue.errors import CommandError
from bunqueue.options import js_number

UPDATABLE = frozenset((states.READY, states.DELAYED, states.WAITING_CHILDREN, states.ACTIVE))
# Keys the broker keeps inside a flow job's data; Update may neither drop nor forge them.
FLOW_KEYS = ("__parentId", "__parentQueue", "__childrenIds", "__flowParentId", "__flowParentIds")


def state_of(broker: Wiring, job: Job | None, now: float) -> str:
    if job is None:
        return states.UNKNOWN
    return states.state_name(job.state, job.priority, job.run_at, now)


def check_lease(broker: Wiring, job_id: str, token: Any) -> None:
    """A leased job moves only for the holder of its current token; an unleased one for anyone."""
    lease_token = broker.leases.token(job_id)
    if lease_token is None:
        return
    if token is None:
        raise CommandError(errors.lock_token_required(job_id))
    if token != lease_token:
        raise CommandError(errors.invalid_lock_token(job_id))


def _queue_of(broker: Wiring, job: Job) -> QueueState:
    return broker.queues[job.queue]


def cancel(broker: Wiring, job_id: str) -> None:
    job = broker.jobs.get(job_id)
    if job is None:
        raise CommandError(errors.CANNOT_CANCEL)
    prev = states.state_name(job.state, job.priority, job.run_at, broker.clock())
    t = broker.transitions
    if not t.take_out(job):
        raise CommandError(errors.CANNOT_CANCEL)
    t.remove(job)
    broker.counters.on_event(job.queue)
    broker.events.emit(job.queue, eventhub.REMOVED, job.id, prev=prev)


def update_data(broker: Wiring, job_id: str, data: Any) -> None:
    job = broker.jobs.get(job_id)
    if job is None or job.state not in UPDATABLE:
        # A finished repeating job hands the update on to its queued successor.
        successor = broker.repeats.successor(job_id)
        job = broker.jobs.get(successor) if successor is not None else None
        if job is None or job.state not in QUEUED:
            raise CommandError(errors.CANNOT_UPDATE)
    job.data = _keep_flow_metadata(job.data, data)
    broker.store.job_changed(job)
    if broker.events.notices:
        broker.events.notify(eventnames.JOB_DATA_UPDATED, {"jobId": job_id})


def _keep_flow_metadata(current: Any, new: Any) -> Any:
    if type(current) is not dict:
        return new
    kept = {key: current[key] for key in FLOW_KEYS if key in current}
    if not kept:
        return new
    if type(new) is not dict:
        raise CommandError(errors.FLOW_DATA_NOT_OBJECT)
    for key in new:
        if type(key) is str and key.startswith("__"):
            raise CommandError(errors.flow_key_reserved(key))
    return {**new, **kept}


def change_priority(broker: Wiring, job_id: str, priority: float, lifo: bool | None) -> None:
    job = broker.jobs.get(job_id)
    if job is None or job.state not in QUEUED:
        raise CommandError(errors.NOT_IN_QUEUE)
    q = _queue_of(broker, job)
    ready = job.state == states.READY
    if ready:
        q.remove_ready(job)
    job.priority = priority
    if lifo is not None:
        job.lifo = lifo
    if ready:
        q.add_ready(job)
    broker.store.job_changed(job)
    if broker.events.notices:
        broker.events.notify(eventnames.JOB_PRIORITY_CHANGED, {"jobId": job_id, "newPriority": priority})


def _promote(broker: Wiring, q: QueueState, job: Job, now: float) -> None:
    """A delayed job runs now, behind the jobs already waiting (FIFO by the time it became ready).

    The reference orders equal run times by id, so a job promoted in the same millisecond as a push
    would jump ahead of it; a fresh sequence number keeps it behind, as a later millisecond would.
    """
    q.remove_queued(job)
    job.seq = broker.factory.next_seq()
    broker.transitions.requeue(q, job, now, now)


def promote(broker: Wiring, job_id: str, now: float) -> None:
    job = broker.jobs.get(job_id)
    if job is None or job.state not in QUEUED or job.run_at <= now:
        raise CommandError(errors.NOT_DELAYED)
    _promote(broker, _queue_of(broker, job), job, now)
    broker.events.job_moved(eventhub.JOB_PROMOTED, job_id)


def promote_jobs(broker: Wiring, queue: str, count: float, now: float) -> int:
    """Promote the oldest delayed jobs (by creation time, then id), all of them or ``count``."""
    q = broker.queues.get(queue)
    if q is None:
        return 0
    broker.promote_due(q, now)
    jobs = broker.jobs
    delayed = sorted(map(jobs.__getitem__, q.delayed.keys()), key=_created_order)
    if count != math.inf:
        delayed = delayed[: int(count)]
    for job in delayed:
        _promote(broker, q, job, now)
    return len(delayed)


def _created_order(job: Job) -> tuple[float, str]:
    return (job.created_at, job.id)


def change_delay(broker: Wiring, job_id: str, delay: float, token: Any, now: float, failure: str) -> None:
    """ChangeDelay: run ``delay`` ms from now (a negative delay is a past run time)."""
    _reschedule(broker, job_id, delay, token, now, failure)
    if broker.events.notices:
        broker.events.notify(eventnames.JOB_DELAY_CHANGED, {"jobId": job_id, "newDelay": delay})


def _reschedule(broker: Wiring, job_id: str, delay: float, token: Any, now: float, failure: str) -> None:
    """ChangeDelay / MoveToDelayed: run ``delay`` ms from now.

    A queued job is rescheduled; an active one leaves its worker (no attempt charged) and waits again.
    """
    check_lease(broker, job_id, token)
    job = broker.jobs.get(job_id)
    if job is None:
        raise CommandError(failure)
    if job.state in QUEUED:
        q = _queue_of(broker, job)
        q.remove_queued(job)
    elif job.state == states.ACTIVE:
        q = broker.transitions.stop_running(job)
    else:
        raise CommandError(failure)
    broker.transitions.requeue(q, job, now + delay, now)


def move_to_delayed(broker: Wiring, job_id: str, delay: float, token: Any, now: float) -> None:
    job = broker.find_job(job_id)
    if job is None:
        raise CommandError(errors.JOB_NOT_FOUND)
    _reschedule(broker, job_id, delay, token, now, errors.not_active(state_of(broker, job, now)))
    broker.counters.on_event(job.queue)
    if broker.events.notices:
        broker.events.notify(eventnames.JOB_MOVED_TO_DELAYED, {"jobId": job_id, "delay": delay})
    if broker.events.wanted:
        broker.events.emit(job.queue, eventhub.DELAYED, job_id, delay=delay)


def move_to_wait(broker: Wiring, job_id: str, token: Any, now: float) -> None:
    """Back to waiting by current state: active is released, delayed promoted, failed retried."""
    job = broker.find_job(job_id)
    state = state_of(broker, job, now)
    if state in (states.WAITING, states.PRIORITIZED):
        return
    if job is not None and state == states.ACTIVE_NAME:
        check_lease(broker, job_id, token)
        t = broker.transitions
        t.requeue(t.stop_running(job), job, now, now)
    elif state == states.DELAYED_NAME:
        promote(broker, job_id, now)
    elif state == states.FAILED_NAME:
        entry = broker.dlq.get(job_id)
        if entry is None or not broker.transitions.retry_dead(entry, now, False):
            raise CommandError(errors.FAILED_NOT_IN_DLQ)
    else:
        raise CommandError(errors.cannot_move_to_wait(state))


def discard(broker: Wiring, job_id: str, token: Any, now: float) -> None:
    """Straight to the DLQ (reason unknown) from waiting, delayed or active."""
    check_lease(broker, job_id, token)
    job = broker.jobs.get(job_id)
    if job is None:
        raise CommandError(errors.JOB_NOT_FOUND)
    if job.state not in QUEUED and job.state != states.ACTIVE:
        raise CommandError(errors.JOB_NOT_FOUND)
    broker.transitions.discard(job, None, now, False)
    broker.events.job_moved(eventhub.JOB_DISCARDED, job_id)


# -- progress ----------------------------------------------------------------------------------------


def active_job(broker: Wiring, job_id: str, now: float) -> Job:
    """The active job for Progress / GetProgress, else the reference's error naming the state."""
    job = broker.jobs.get(job_id)
    if job is not None and job.state == states.ACTIVE:
        return job
    job = broker.find_job(job_id)
    if job is None:
        raise CommandError(errors.JOB_NOT_FOUND)
    raise CommandError(errors.not_active(state_of(broker, job, now)))


def update_progress(broker: Wiring, job_id: str, progress: Any, message: Any, has_message: bool, now: float) -> None:
    job = active_job(broker, job_id, now)
    value, derived = normalize_progress(progress)
    if has_message:
        job.progress_message = message
    elif derived is not None:
        job.progress_message = derived
    job.progress = value
    # Progress is a sign of life, as a heartbeat is.
    job.last_heartbeat = now
    # Losing a progress update in a crash costs nothing worth a wait for the disk.
    broker.store.job_changed(job, False)
    broker.counters.on_event(job.queue)
    if broker.events.listening(job.queue):
        broker.events.emit(
            job.queue, eventhub.PROGRESS, job.id, progress=value,
            data={"progress": value, "message": job.progress_message},
        )


def normalize_progress(progress: Any) -> tuple[Any, str | None]:
    """(value clamped to 0..100, message it implies) as the reference stores any progress value.

    A number is kept (NaN is 0); a numeric string, a boolean and null are their number; other text is
    0 with the text as the message; an object or array is 0 with its JSON as the message (refused when
    nested deeper than ``errors.MAX_VALUE_DEPTH``).
    """
    kind = type(progress)
    derived: str | None = None
    if kind is bool or progress is None:
        value: float = 1.0 if progress else 0.0
    elif kind is int or kind is float:
        value = 0.0 if math.isnan(progress) else float(progress)
    elif kind is str:
        value = js_number(progress)
        if math.isnan(value):
            value, derived = 0.0, progress
    elif kind is dict or kind is list:
        value = 0.0
        # Its JSON is kept as the message: the depth every kept value is held to keeps the encoder within
        # the interpreter's recursion limit.
        check_nesting(progress, "progress")
        try:
            derived = json.dumps(progress, ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError):
            derived = None
    else:
        value = 0.0
    return wire_number(min(100.0, max(0.0, value))), derived
