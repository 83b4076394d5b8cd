"""Where and how a client object reaches a broker, as one value, and the transport it opens.

Queue, Worker, QueueEvents, FlowProducer (asyncio and synchronous) and the SDK's Connection take these as
arguments of their own; each gathers them into a ``ConnectionOptions`` and opens its transport here, so
that TCP or embedded, and every default, is decided in one place.
"""
from __future__ import annotations

from dataclasses import dataclass

from bunqueue.client import embedded
from bunqueue.client.telemetry import TelemetryHandler
from bunqueue.client.transport import DEFAULT_PORT, TcpTransport, TlsOption, Transport


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

    def tcp_transport(self) -> TcpTransport:
        return TcpTransport(self.host, self.port, self.token, self.tls, self.connect_timeout, self.command_timeout,
                            self.pool_size, self.on_telemetry)


def open_transport(options: ConnectionOptions, shared: Transport | None = None) -> tuple[Transport, bool]:
    """The transport to use and whether the caller owns it (closes it with itself).

    A ``shared`` transport is used and left open; ``embedded`` (or ``BUNQUEUE_EMBEDDED=1``) uses the
    broker of ``data_path`` in this process; otherwise a pool of TCP connections.
    """
    if shared is not None:
        return shared, False
    if options.embedded or embedded.forced():
        return embedded.EmbeddedTransport(options.data_path), True
    return options.tcp_transport(), True
