"""Listing queries: GetJobs, GetCountsPerPriority, ListQueues."""
from __future__ import annotations

from typing import Any

from bunqueue import errors, options
from bunqueue.broker.engine import Engine, Session
from bunqueue.commands.queries import job_view
from bunqueue.errors import CommandError

Reply = dict[str, Any]
DEFAULT_LIMIT = 100.0


def _state_filter(cmd: dict[str, Any]) -> tuple[list[str] | None, str | None]:
    """(states to list or None for all, the single state name to report on every job or None)."""
    state = cmd.get("state")
    if state is None or state == "":
        return None, None
    if type(state) is str:
        return [state], state
    if type(state) is not list or any(type(s) is not str for s in state):
        raise CommandError(errors.must_be_string_or_array("state"))
    return (state or None), None


def handle_get_jobs(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue = options.queue_name(cmd)
    wanted, single = _state_filter(cmd)
    limit = options.number_arg(cmd, "limit", DEFAULT_LIMIT)
    offset = options.number_arg(cmd, "offset", 0.0)
    asc = options.flag_or(cmd, "asc", True)
    assert limit is not None and offset is not None
    now = broker.clock()
    jobs = broker.jobs_page(queue, wanted, now, offset, limit, asc)
    views = []
    for job in jobs:
        view = job_view(broker, job, now)
        if single is not None:
            # A single-state filter is echoed as every job's state, as the reference reports it.
            view["state"] = single
        views.append(view)
    return {"ok": True, "jobs": views}


def handle_get_counts_per_priority(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue = options.queue_name(cmd)
    return {"ok": True, "queue": queue, "counts": broker.counts_per_priority(queue)}


def handle_list_queues(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    return {"ok": True, "queues": broker.list_queues()}
