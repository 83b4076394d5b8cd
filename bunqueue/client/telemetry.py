"""Structured events of a TCP transport's life, for an application's ``on_telemetry`` callback.

The published SDK's kinds and fields: ``connect {host, port, generation, duration_ms}``, ``auth {ok}``,
``disconnect {host, port, generation}``, ``reconnect_scheduled {host, port, attempt, delay_ms}``,
``command {cmd, req_id, duration_ms, ok}``, ``command_timeout {cmd, req_id}`` and ``error {operation,
error}`` (operation: ``connect``, ``tls``, ``write`` or ``serialize``); each dict also has ``type``.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("bunqueue.client")

TelemetryEvent = dict[str, Any]
TelemetryHandler = Callable[[TelemetryEvent], None]


def now_ms() -> float:
    return time.monotonic() * 1000


class Telemetry:
    """Calls the handler with one event; a handler that raises is logged and never breaks the client."""

    __slots__ = ("handler",)

    def __init__(self, handler: TelemetryHandler) -> None:
        self.handler = handler

    def emit(self, kind: str, **fields: Any) -> None:
        try:
            self.handler({"type": kind, **fields})
        except Exception:  # noqa: BLE001 - observing must not change what the client does
            log.warning("the on_telemetry callback raised on %r", kind, exc_info=True)
