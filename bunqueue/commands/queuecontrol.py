"""Queue controls: Pause, Resume, IsPaused."""
from __future__ import annotations

from typing import Any

from bunqueue import options
from bunqueue.broker.engine import Engine, Session

Reply = dict[str, Any]


def handle_pause(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    broker.pause(options.queue_name(cmd))
    return {"ok": True}


def handle_resume(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    broker.resume(options.queue_name(cmd))
    return {"ok": True}


def handle_is_paused(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    return {"ok": True, "paused": broker.is_paused(options.queue_name(cmd))}
