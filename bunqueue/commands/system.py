"""Connection-level commands that touch no job: Hello and Ping."""
from __future__ import annotations

from typing import Any

from bunqueue import __version__
from bunqueue.broker.engine import Session
from bunqueue.broker.facade import Broker

PROTOCOL_VERSION = 3
CAPABILITIES = ("pipelining", "separate-job-name")


def handle_hello(broker: Broker, cmd: dict[str, Any], session: Session) -> dict[str, Any]:
    # The answer does not depend on what the client claims: it states what this server speaks.
    return {
        "ok": True,
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": list(CAPABILITIES),
        "server": "bunqueue",
        "version": __version__,
    }


def handle_ping(broker: Broker, cmd: dict[str, Any], session: Session) -> dict[str, Any]:
    return {"ok": True, "data": {"pong": True, "time": broker.clock()}}


def handle_storage_status(broker: Broker, cmd: dict[str, Any], session: Session) -> dict[str, Any]:
    return {"ok": True, "data": dict(broker.store.status)}
