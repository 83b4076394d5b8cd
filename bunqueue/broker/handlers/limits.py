"""Queue limits and stall settings: RateLimit, RateLimitClear, SetConcurrency, ClearConcurrency,
GetQueueLimits, SetStallConfig and GetStallConfig."""
from __future__ import annotations

from typing import Any

from bunqueue import errors
from bunqueue._core.jobs import wire_number
from bunqueue.broker import limits, options, stalls
from bunqueue.broker.broker import Broker
from bunqueue.broker.clock import now_ms
from bunqueue.broker.session import Session
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


def handle_rate_limit(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    queue = options.queue_name(cmd)
    limit = _limit(cmd)
    limits.set_rate_limit(broker, queue, limit, _positive(cmd, "duration"), _positive(cmd, "ttl"))
    return {"ok": True}


def handle_rate_limit_clear(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    limits.clear_rate_limit(broker, options.queue_name(cmd))
    return {"ok": True}


def handle_set_concurrency(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    queue = options.queue_name(cmd)
    limits.set_concurrency(broker, queue, _limit(cmd))
    return {"ok": True}


def handle_clear_concurrency(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    limits.clear_concurrency(broker, options.queue_name(cmd))
    return {"ok": True}


def handle_get_queue_limits(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    queue = options.queue_name(cmd)
    # maxJobs that is not a number is ignored, as the reference's comparison ignores it.
    max_jobs = options.js_finite(cmd.get("maxJobs"))
    return {"ok": True, "data": {"limits": limits.status(broker, queue, max_jobs)}}


def handle_set_stall_config(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    q = broker.queue(options.queue_name(cmd))
    config = stalls.merged_config(stalls.config_of(q), cmd.get("config"))
    q.stall_config = None if config == stalls.DEFAULT_STALL_CONFIG else config
    broker.store.queue_changed(q.name, q.settings())
    broker.stalls.config_changed(q, now_ms())
    return {"ok": True}


def handle_get_stall_config(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    config = stalls.config_of(broker.queues.get(options.queue_name(cmd)))
    return {"ok": True, "config": {key: _wire(value) for key, value in config.items()}}


def _wire(value: Any) -> Any:
    return wire_number(value) if type(value) is float else value
