"""Event listeners: SubscribeEvents and UnsubscribeEvents (one queue per client session), and the
listeners the servers attach (the HTTP streams' taps, a TCP client's connect notice), over
``components.eventhub.EventHub``."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bunqueue.broker.session import Session
from bunqueue.broker.wiring import Wiring

JobListener = Callable[[dict[str, Any]], None]
SystemListener = Callable[[str, dict[str, Any]], None]


def subscribe_events(broker: Wiring, session: Session, queue: str) -> None:
    broker.events.subscribe(session, queue)


def unsubscribe_events(broker: Wiring, session: Session) -> None:
    broker.events.unsubscribe(session)


def listen_all(broker: Wiring, on_job: JobListener, on_system: SystemListener) -> bool:
    return broker.events.listen_all(on_job, on_system)


def unlisten_all(broker: Wiring, on_job: JobListener, on_system: SystemListener) -> None:
    broker.events.unlisten_all(on_job, on_system)


def hears_system_events(broker: Wiring) -> bool:
    """Whether a system event would reach anyone: callers build its data only then."""
    return bool(broker.events.notices)


def system_event(broker: Wiring, name: str, data: dict[str, Any]) -> None:
    broker.events.notify(name, data)
