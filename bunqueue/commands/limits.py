"""Queue limits and stall settings: RateLimit, RateLimitClear, SetConcurrency, ClearConcurrency,
GetQueueLimits, SetStallConfig and GetStallConfig."""
from __future__ import annotations

from typing import Any

from bunqueue import errors, options
from bunqueue._core.jobs import wire_number
from bunqueue.broker.engine import Engine, Session
from bunqueue.errors import CommandError

Reply = dict[str, Any]


def _limit(cmd: dict[str, Any]) -> float:
    limit = options.js_finite(cmd.get("limit"))
    if limit is None:
        raise CommandError(errors.must_be_finite("limit"))
    return limit


def _positive(cmd: dict[str, Any], field: str) -> float | None:
    # duration and ttl that are not positive finite numbers fall back to their defaults, as in the spec.
    value = options.js_finite(cmd.get(field))
    return value if value is not None and value > 0 else None


def handle_rate_limit(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue = options.queue_name(cmd)
    limit = _limit(cmd)
    broker.set_rate_limit(queue, limit, _positive(cmd, "duration"), _positive(cmd, "ttl"))
    return {"ok": True}


def handle_rate_limit_clear(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    broker.clear_rate_limit(options.queue_name(cmd))
    return {"ok": True}


def handle_set_concurrency(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue = options.queue_name(cmd)
    broker.set_concurrency(queue, _limit(cmd))
    return {"ok": True}


def handle_clear_concurrency(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    broker.clear_concurrency(options.queue_name(cmd))
    return {"ok": True}


def handle_get_queue_limits(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue = options.queue_name(cmd)
    # maxJobs that is not a number is ignored, as the reference's comparison ignores it.
    max_jobs = options.js_finite(cmd.get("maxJobs"))
    return {"ok": True, "data": {"limits": broker.queue_limits(queue, max_jobs)}}


def handle_set_stall_config(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    broker.set_stall_config(options.queue_name(cmd), cmd.get("config"))
    return {"ok": True}


def handle_get_stall_config(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    config = broker.stall_config(options.queue_name(cmd))
    return {"ok": True, "config": {key: _wire(value) for key, value in config.items()}}


def _wire(value: Any) -> Any:
    return wire_number(value) if type(value) is float else value
