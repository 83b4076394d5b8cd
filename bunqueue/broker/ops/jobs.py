"""ACK, ACKB and FAIL that arrive after the attempt they settle stopped being the running one.

A worker's outcome can lose a race: a timeout already failed the attempt, or its lease ran out (or it
stalled) and the job went back to its queue. The reference answers these cases, and so does this module,
only after the ordinary path refused the request, so a normal ACK/FAIL pays nothing for them:

* an attempt a timeout finalized: ``{ok: true, data: {applied: false, reason: 'already-finalized'}}``
  (ACKB: the positions are reported in ``ignoredIndices``/``ignoredIds`` and the others still apply);
* a job back in its queue after a lost attempt (attempts > 0, no lease): an ACK completes it there, as
  the work was done after all; a FAIL that carries a token is a no-op success (the retry already counted
  the failure).

Anything else keeps the ordinary error ("Job not found or not in processing state", token errors).
"""
from __future__ import annotations

from typing import Any

from bunqueue import errors
from bunqueue._core.jobs import Job
from bunqueue.broker import states
from bunqueue.broker.wiring import Wiring
from bunqueue.errors import CommandError

Reply = dict[str, Any]

ALREADY_FINALIZED = "already-finalized"


def finalized() -> Reply:
    return {"ok": True, "data": {"applied": False, "reason": ALREADY_FINALIZED}}


def requeued_after_loss(broker: Wiring, job_id: Any) -> Job | None:
    """The job if it waits in its queue again after an attempt that did not finish (attempts > 0)."""
    job = broker.jobs.get(job_id) if type(job_id) is str else None
    if job is None or job.attempts <= 0 or (job.state != states.READY and job.state != states.DELAYED):
        return None
    return job


def complete_queued(broker: Wiring, job: Job, result: Any, has_result: bool, remove: bool) -> None:
    q = broker.queues[job.queue]
    if not q.remove_queued(job):
        raise CommandError(errors.not_processing(job.id))
    broker.transitions.complete(q, job, result, has_result, remove)


def late_ack(
    broker: Wiring,
    job_id: Any,
    token: Any,
    result: Any,
    has_result: bool,
    remove: bool,
    refusal: CommandError,
) -> Reply:
    if broker.timeouts.retired.holds(job_id, token):
        return finalized()
    job = requeued_after_loss(broker, job_id)
    if job is None:
        raise refusal
    complete_queued(broker, job, result, has_result, remove)
    return {"ok": True}


def late_fail(broker: Wiring, job_id: Any, token: Any, refusal: CommandError) -> Reply:
    if broker.timeouts.retired.holds(job_id, token):
        return finalized()
    if token and requeued_after_loss(broker, job_id) is not None:
        return finalized()
    raise refusal


def ack_batch(broker: Wiring, ids: list[Any], tokens: list[Any] | None, results: list[Any] | None) -> Reply:
    """Every position is checked before any job changes: one bad id or token changes nothing."""
    active: list[tuple[int, Job]] = []
    requeued: list[tuple[int, Job]] = []
    ignored: list[int] = []
    seen: set[str] = set()
    retired = broker.timeouts.retired
    for i, job_id in enumerate(ids):
        token = tokens[i] if tokens is not None else None
        if type(job_id) is not str:
            raise CommandError(errors.not_processing(job_id))
        try:
            if job_id in seen:
                raise CommandError(errors.not_processing(job_id))
            job = broker.active_job(job_id, token)
        except CommandError:
            if retired.holds(job_id, token):
                ignored.append(i)
                continue
            lost = requeued_after_loss(broker, job_id)
            if lost is None or job_id in seen:
                raise
            seen.add(job_id)
            requeued.append((i, lost))
            continue
        seen.add(job_id)
        active.append((i, job))
    broker.transitions.complete_jobs(
        [job for _, job in active], None if results is None else [results[i] for i, _ in active], False, None)
    for i, job in requeued:
        complete_queued(broker, job, None if results is None else results[i], results is not None, False)
    if not ignored:
        return {"ok": True}
    return {"ok": True, "data": {"ignoredIndices": ignored, "ignoredIds": [ids[i] for i in ignored]}}
