"""Queue limits and stall settings: RateLimit, RateLimitClear, SetConcurrency, ClearConcurrency and
GetQueueLimits over ``timers.ratelimits.QueueLimitControls`` (which also wakes the pulls a limit held back);
SetStallConfig and GetStallConfig change and read a queue's stall settings here."""
from __future__ import annotations

from typing import Any

from bunqueue.broker.components import eventnames
from bunqueue.broker.components.stallconfig import DEFAULT_STALL_CONFIG, merged_config
from bunqueue.broker.timers.stalls import config_of
from bunqueue.broker.wiring import Wiring


def set_stall_config(broker: Wiring, queue: str, update: Any) -> None:
    q = broker.queue(queue)
    config = merged_config(config_of(q), update)
    q.stall_config = None if config == DEFAULT_STALL_CONFIG else config
    broker.store.queue_changed(q.name, q.settings())
    broker.stalls.config_changed(q, broker.clock())
    if broker.events.notices:
        broker.events.notify(eventnames.CONFIG_STALL_CHANGED, {"queue": queue, "config": update})


def stall_config(broker: Wiring, queue: str) -> dict[str, Any]:
    return config_of(broker.queues.get(queue))


def set_rate_limit(broker: Wiring, queue: str, limit: float, duration: float | None, ttl: float | None) -> None:
    broker.limit_controls.set_rate_limit(queue, limit, duration, ttl, broker.clock())


def clear_rate_limit(broker: Wiring, queue: str) -> None:
    broker.limit_controls.clear_rate_limit(queue)


def set_concurrency(broker: Wiring, queue: str, limit: float) -> None:
    broker.limit_controls.set_concurrency(queue, limit)


def clear_concurrency(broker: Wiring, queue: str) -> None:
    broker.limit_controls.clear_concurrency(queue)


def queue_limits(broker: Wiring, queue: str, max_jobs: float | None) -> dict[str, Any]:
    """GetQueueLimits' ``limits``: the rate limit and its remaining room (against ``max_jobs`` when given)
    and the concurrency limit."""
    return broker.limit_controls.status(queue, max_jobs, broker.clock())
