"""Queue controls: Pause, Resume, IsPaused."""
from __future__ import annotations

from typing import Any

from bunqueue import options
from bunqueue.broker.facade import Broker
from bunqueue.broker.ops import queuecontrol
from bunqueue.broker.session import Session

Reply = dict[str, Any]


def handle_pause(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    queuecontrol.pause(broker, options.queue_name(cmd))
    return {"ok": True}


def handle_resume(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    queuecontrol.resume(broker, options.queue_name(cmd))
    return {"ok": True}


def handle_is_paused(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    return {"ok": True, "paused": queuecontrol.is_paused(broker, options.queue_name(cmd))}
