"""Job group getters and controls: GetGroupJobsCount, GetGroupsJobsCount, GetGroupActiveCount, the group
rate limit and concurrency overrides, PauseGroup/ResumeGroup/IsGroupPaused and RateLimitGroup."""
from __future__ import annotations

import math
from typing import Any

from bunqueue import options
from bunqueue._core.jobs import wire_number
from bunqueue.broker.engine import Engine, Session

Reply = dict[str, Any]
# GetGroupRateLimitTtl maxJobs above this compare as "more than any window holds".
MAX_JOBS_CAP = 2**62


def _target(cmd: dict[str, Any]) -> tuple[str, str]:
    return options.queue_name(cmd), options.group_id_arg(cmd)


def _data(**fields: Any) -> Reply:
    return {"ok": True, "data": fields}


def handle_get_group_jobs_count(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue, group_id = _target(cmd)
    return _data(count=broker.group_jobs_count(queue, group_id))


def handle_get_groups_jobs_count(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    # maxCount is accepted and, as in the reference, does not cap the count.
    queue = options.queue_name(cmd)
    return _data(count=broker.groups_count(queue))


def handle_get_group_active_count(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue, group_id = _target(cmd)
    return _data(count=broker.group_active_count(queue, group_id))


def handle_set_group_rate_limit(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue, group_id = _target(cmd)
    max_jobs = options.positive_safe_integer(cmd.get("max"), "max")
    duration = options.positive_safe_integer(cmd.get("duration"), "duration")
    broker.set_group_rate_limit(queue, group_id, max_jobs, duration)
    return {"ok": True}


def handle_get_group_rate_limit(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue, group_id = _target(cmd)
    return _data(limit=broker.group_rate_limit(queue, group_id))


def handle_remove_group_rate_limit(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue, group_id = _target(cmd)
    return _data(removed=broker.remove_group_rate_limit(queue, group_id))


def handle_get_group_rate_limit_ttl(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue, group_id = _target(cmd)
    # A window "has room" while its count is below maxJobs; for whole counts that is below ceil(maxJobs).
    max_jobs = options.js_finite(cmd.get("maxJobs"))
    cap = min(math.ceil(max_jobs), MAX_JOBS_CAP) if max_jobs is not None and max_jobs > 0 else -1
    return _data(ttl=wire_number(broker.group_rate_limit_ttl(queue, group_id, cap)))


def handle_set_group_concurrency(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue, group_id = _target(cmd)
    concurrency = options.positive_safe_integer(cmd.get("concurrency"), "concurrency")
    broker.set_group_concurrency(queue, group_id, concurrency)
    return {"ok": True}


def handle_get_group_concurrency(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue, group_id = _target(cmd)
    return _data(concurrency=broker.group_concurrency(queue, group_id))


def handle_remove_group_concurrency(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue, group_id = _target(cmd)
    return _data(removed=broker.remove_group_concurrency(queue, group_id))


def handle_pause_group(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue, group_id = _target(cmd)
    return _data(changed=broker.pause_group(queue, group_id))


def handle_resume_group(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue, group_id = _target(cmd)
    return _data(changed=broker.resume_group(queue, group_id))


def handle_is_group_paused(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue, group_id = _target(cmd)
    return _data(paused=broker.is_group_paused(queue, group_id))


def handle_rate_limit_group(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue, group_id = _target(cmd)
    duration = options.positive_safe_integer(cmd.get("duration"), "duration")
    broker.rate_limit_group(queue, group_id, duration)
    return {"ok": True}

