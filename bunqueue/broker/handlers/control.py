"""Queue controls: pause and resume."""
from __future__ import annotations

from typing import Any

from bunqueue.broker import options
from bunqueue.broker.broker import Broker
from bunqueue.broker.session import Session

Reply = dict[str, Any]


def handle_pause(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    q = broker.queue(options.queue_name(cmd))
    if not q.paused:
        q.paused = True
        broker.store.queue_changed(q.name, q.settings())
    return {"ok": True}


def handle_resume(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    q = broker.queue(options.queue_name(cmd))
    if q.paused:
        q.paused = False
        broker.store.queue_changed(q.name, q.settings())
        broker.wake(q, len(q.waiters))
    return {"ok": True}


def handle_is_paused(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    q = broker.queues.get(options.queue_name(cmd))
    return {"ok": True, "paused": q is not None and q.paused}
