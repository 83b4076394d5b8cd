"""Queue controls: Pause, Resume, IsPaused. A paused queue hands out nothing; resuming wakes its pullers."""
from __future__ import annotations

from bunqueue.broker.broker import Broker


def pause(broker: Broker, queue: str) -> None:
    q = broker.queue(queue)
    if not q.paused:
        q.paused = True
        broker.store.queue_changed(q.name, q.settings())
        broker.events.queue_paused(q.name, True)


def resume(broker: Broker, queue: str) -> None:
    q = broker.queue(queue)
    if q.paused:
        q.paused = False
        broker.store.queue_changed(q.name, q.settings())
        q.wake(len(q.waiters))
        broker.events.queue_paused(q.name, False)


def is_paused(broker: Broker, queue: str) -> bool:
    q = broker.queues.get(queue)
    return q is not None and q.paused
