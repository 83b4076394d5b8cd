"""Read-only job and queue queries."""
from __future__ import annotations

from typing import Any

from bunqueue import errors, options
from bunqueue._core.jobs import Job
from bunqueue.broker import states
from bunqueue.broker.engine import Engine, Session
from bunqueue.errors import CommandError

Reply = dict[str, Any]


def job_state(broker: Engine, job: Job, now: float) -> str:
    if job.state == states.DELAYED and job.run_at <= now:
        broker.promote_due(broker.queue(job.queue), now)
    return states.state_name(job.state, job.priority, job.run_at, now)


def job_view(broker: Engine, job: Job, now: float) -> dict[str, Any]:
    """The job as GetJob shows it: the wire form plus state, return value and last failure reason."""
    view = job.to_dict()
    view["state"] = job_state(broker, job, now)
    stored, result = broker.find_result(job.id)
    if stored:
        view["returnvalue"] = result
    for entry in reversed(job.timeline):
        if entry["state"] == states.FAILED_NAME:
            if "error" in entry:
                view["failedReason"] = entry["error"]
            break
    return view


def _find(broker: Engine, cmd: dict[str, Any]) -> Job | None:
    return broker.find_job(cmd.get("id"))


def handle_get_job(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    job = _find(broker, cmd)
    if job is None:
        raise CommandError(errors.JOB_NOT_FOUND)
    return {"ok": True, "job": job_view(broker, job, broker.clock())}


def handle_get_job_by_custom_id(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    job = broker.job_by_custom_id(cmd.get("customId"))
    if job is None:
        raise CommandError(errors.JOB_NOT_FOUND)
    view = job_view(broker, job, broker.clock())
    # The reference answers this lookup with the stored record, without the view's state.
    del view["state"]
    return {"ok": True, "job": view}


def handle_get_state(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    job = _find(broker, cmd)
    state = states.UNKNOWN if job is None else job_state(broker, job, broker.clock())
    reply: Reply = {"ok": True}
    if cmd.get("id") is not None:
        reply["id"] = cmd["id"]
    reply["state"] = state
    return reply


def handle_get_result(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    reply: Reply = {"ok": True}
    job_id = cmd.get("id")
    if job_id is not None:
        reply["id"] = job_id
    stored, result = broker.find_result(job_id)
    if stored:
        reply["result"] = result
    return reply


def handle_get_job_counts(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    return {"ok": True, "counts": broker.job_counts(options.queue_name(cmd))}


def handle_count(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    return {"ok": True, "count": broker.count_queued(options.queue_name(cmd))}

