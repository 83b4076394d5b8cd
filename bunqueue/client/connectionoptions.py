"""Where and how a client object reaches a broker, as one value.

Queue, Worker, QueueEvents, FlowProducer (asyncio and synchronous) and the SDK's Connection take these as
arguments of their own and gather them into a ``ConnectionOptions``: the TCP transport is made from it
(``TcpTransport``), and ``bunqueue.asyncio.base.open_transport`` chooses between TCP and the embedded
engine with it, so that every default and that choice are written once.
"""
from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any

from bunqueue.client.telemetry import TelemetryHandler

DEFAULT_PORT = 6789
#: True (system CAs), an SSLContext, or ``{"ca_file": path, "verify": bool}``.
TlsOption = bool | ssl.SSLContext | dict[str, Any] | None


@dataclass(frozen=True)
class ConnectionOptions:
    """A pool of ``pool_size`` TCP connections to host:port (authenticated with ``token``, over TLS when
    ``tls`` says so, observed by ``on_telemetry``), or with ``embedded`` the engine of ``data_path`` in
    this process."""

    host: str = "localhost"
    port: int = DEFAULT_PORT
    token: str | None = None
    tls: TlsOption = None
    connect_timeout: float = 5.0
    command_timeout: float = 10.0
    pool_size: int = 1
    on_telemetry: TelemetryHandler | None = None
    embedded: bool = False
    data_path: str | None = None
