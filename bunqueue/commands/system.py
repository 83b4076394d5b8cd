"""Commands that touch no job: Hello, Ping and StorageStatus."""
from __future__ import annotations

from typing import Any

from bunqueue import __version__
from bunqueue.broker.engine import Engine, Session

PROTOCOL_VERSION = 3
CAPABILITIES = ("pipelining", "separate-job-name")


def handle_hello(broker: Engine, cmd: dict[str, Any], session: Session) -> dict[str, Any]:
    # The answer does not depend on what the client claims: it states what this server speaks.
    return {
        "ok": True,
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": list(CAPABILITIES),
        "server": "bunqueue",
        "version": __version__,
    }


def handle_ping(broker: Engine, cmd: dict[str, Any], session: Session) -> dict[str, Any]:
    return {"ok": True, "data": {"pong": True, "time": broker.clock()}}


def handle_storage_status(broker: Engine, cmd: dict[str, Any], session: Session) -> dict[str, Any]:
    return {"ok": True, "data": broker.storage_status()}
