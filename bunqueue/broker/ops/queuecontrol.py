"""Queue controls: Pause, Resume, IsPaused. A paused queue hands out nothing; resuming wakes its pullers.

Every Pause and Resume is an event (`queue:paused` then `paused`, `queue:resumed` then `resumed`), a
repeated one too, as in the reference; only a change of state is stored.
"""
from __future__ import annotations

from bunqueue.broker.wiring import Wiring


def pause(broker: Wiring, queue: str) -> None:
    q = broker.queue(queue)
    if not q.paused:
        q.paused = True
        broker.store.queue_changed(q.name, q.settings())
    broker.counters.on_event(q.name)
    broker.events.queue_paused(q.name, True)


def resume(broker: Wiring, queue: str) -> None:
    q = broker.queue(queue)
    if q.paused:
        q.paused = False
        broker.store.queue_changed(q.name, q.settings())
        q.wake(len(q.waiters))
    broker.counters.on_event(q.name)
    broker.events.queue_paused(q.name, False)


def is_paused(broker: Wiring, queue: str) -> bool:
    q = broker.queues.get(queue)
    return q is not None and q.paused
