"""Queue limits and stall settings: SetStallConfig and GetStallConfig change and read a queue's stall
settings here; the rate and concurrency limits are ``timers.ratelimits.RateLimitWakeups``."""
from __future__ import annotations

from typing import Any

from bunqueue.broker.components import eventnames
from bunqueue.broker.components.queues import DEFAULT_STALL_CONFIG, merged_config
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
