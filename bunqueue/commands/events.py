"""Event subscriptions: SubscribeEvents, UnsubscribeEvents."""
from __future__ import annotations

from typing import Any

from bunqueue import options
from bunqueue.broker.engine import Engine, Session

Reply = dict[str, Any]


def handle_subscribe_events(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    broker.subscribe_events(session, options.queue_name(cmd))
    return {"ok": True}


def handle_unsubscribe_events(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    broker.unsubscribe_events(session)
    return {"ok": True}
