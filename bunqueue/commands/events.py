"""Event subscriptions: SubscribeEvents, UnsubscribeEvents (see ``bunqueue.broker.components.eventhub``)."""
from __future__ import annotations

from typing import Any

from bunqueue import options
from bunqueue.broker.engine import Session
from bunqueue.broker.facade import Broker

Reply = dict[str, Any]


def handle_subscribe_events(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    broker.events.subscribe(session, options.queue_name(cmd))
    return {"ok": True}


def handle_unsubscribe_events(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    broker.events.unsubscribe(session)
    return {"ok": True}
