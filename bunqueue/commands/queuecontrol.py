"""Queue controls: Pause, Resume, IsPaused."""
from __future__ import annotations

from typing import Any

from bunqueue import options
from bunqueue.broker.engine import Session
from bunqueue.broker.facade import Broker

Reply = dict[str, Any]


def handle_pause(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    broker.pause(options.queue_name(cmd))
    return {"ok": True}


def handle_resume(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    broker.resume(options.queue_name(cmd))
    return {"ok": True}


def handle_is_paused(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    return {"ok": True, "paused": broker.is_paused(options.queue_name(cmd))}
