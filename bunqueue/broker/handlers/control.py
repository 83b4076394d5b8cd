"""Queue controls and event subscriptions: Pause, Resume, IsPaused, SubscribeEvents, UnsubscribeEvents."""
from __future__ import annotations

from typing import Any

from bunqueue.broker import events, options
from bunqueue.broker.broker import Broker
from bunqueue.broker.session import Session

Reply = dict[str, Any]


def handle_pause(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    q = broker.queue(options.queue_name(cmd))
    if not q.paused:
        q.paused = True
        broker.store.queue_changed(q.name, q.settings())
        # Queue-level events carry an empty jobId: clients reject an event whose jobId is not a string.
        broker.events.emit(q.name, events.PAUSED, "")
    return {"ok": True}


def handle_resume(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    q = broker.queue(options.queue_name(cmd))
    if q.paused:
        q.paused = False
        broker.store.queue_changed(q.name, q.settings())
        broker.wake(q, len(q.waiters))
        broker.events.emit(q.name, events.RESUMED, "")
    return {"ok": True}


def handle_is_paused(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    q = broker.queues.get(options.queue_name(cmd))
    return {"ok": True, "paused": q is not None and q.paused}


def handle_subscribe_events(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    broker.events.subscribe(session, options.queue_name(cmd))
    return {"ok": True}


def handle_unsubscribe_events(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    broker.events.unsubscribe(session)
    return {"ok": True}
