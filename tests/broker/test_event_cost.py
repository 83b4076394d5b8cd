"""With no stream, subscriber or webhook, a batch push or pull builds no event: the hub is never called."""
from __future__ import annotations

from typing import Any

import pytest

from bunqueue._testbase.clock import T0, FakeClock
from bunqueue.broker.components.eventhub import EventHub
from bunqueue.broker.facade import Broker
from bunqueue.broker.session import Session
from bunqueue.commands import HANDLERS


def test_pushb_and_pullb_of_100_call_no_event_path_while_nobody_listens(monkeypatch: pytest.MonkeyPatch) -> None:
    broker = Broker(clock=FakeClock(T0))
    hub = broker.events
    calls: list[str] = []

    def counting(name: str) -> Any:
        real = getattr(EventHub, name)

        def call(self: EventHub, *args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            return real(self, *args, **kwargs)
        return call

    for name in ("emit", "emit_many", "notify"):
        monkeypatch.setattr(EventHub, name, counting(name))
    assert hub.wanted is False and hub.notices == []
    reply = HANDLERS["PUSHB"](broker, {"cmd": "PUSHB", "queue": "q", "jobs": [{"data": i} for i in range(100)]},
                              Session())
    assert reply["ok"] is True and len(reply["ids"]) == 100
    pulled = HANDLERS["PULLB"](broker, {"cmd": "PULLB", "queue": "q", "count": 100}, Session())
    assert len(pulled["jobs"]) == 100
    assert calls == []
    # The same with a system-event listener goes through the hub (the counter can count): one event a batch.
    told: list[str] = []
    hub.notices.append(lambda name, data: told.append(name))
    HANDLERS["PUSHB"](broker, {"cmd": "PUSHB", "queue": "q", "jobs": [{"data": 1}, {"data": 2}]}, Session())
    HANDLERS["PULLB"](broker, {"cmd": "PULLB", "queue": "q", "count": 2}, Session())
    HANDLERS["PUSHB"](broker, {"cmd": "PUSHB", "queue": "q", "jobs": [{"data": 3}]}, Session())
    HANDLERS["Drain"](broker, {"cmd": "Drain", "queue": "q"}, Session())
    assert told == ["batch:pushed", "batch:pulled", "queue:drained"]
    assert calls == ["notify"] * 3
