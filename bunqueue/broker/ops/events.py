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
    """Hear every queue's job events and every system event until ``unlisten_all``; idempotent: True when
    this call started the listening."""
    hub = broker.events
    if on_job in hub.taps:
        return False
    hub.add_tap(on_job)
    hub.notices.append(on_system)
    return True


def unlisten_all(broker: Wiring, on_job: JobListener, on_system: SystemListener) -> None:
    hub = broker.events
    if on_job in hub.taps:
        hub.remove_tap(on_job)
        hub.notices.remove(on_system)


def hears_system_events(broker: Wiring) -> bool:
    """Whether a system event would reach anyone: callers build its data only then."""
    return bool(broker.events.notices)


def system_event(broker: Wiring, name: str, data: dict[str, Any]) -> None:
    broker.events.notify(name, data)
