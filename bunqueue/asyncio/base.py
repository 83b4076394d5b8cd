"""What Queue, Worker, QueueEvents and FlowProducer share: choosing their transport."""
from __future__ import annotations

from bunqueue.client import embedded as _embedded
from bunqueue.client.telemetry import TelemetryHandler
from bunqueue.client.transport import DEFAULT_PORT, TcpTransport, TlsOption, Transport


def open_transport(
    *,
    host: str = "localhost",
    port: int = DEFAULT_PORT,
    token: str | None = None,
    tls: TlsOption = None,
    connection: Transport | None = None,
    command_timeout: float = 10.0,
    embedded: bool = False,
    data_path: str | None = None,
    pool_size: int = 1,
    on_telemetry: TelemetryHandler | None = None,
) -> tuple[Transport, bool]:
    """The transport to use and whether the caller owns it (closes it with itself).

    A given ``connection`` is shared and left open; ``embedded=True`` (or ``BUNQUEUE_EMBEDDED=1``) uses
    the broker of ``data_path`` in this process; otherwise a pool of TCP connections to host:port, whose
    life ``on_telemetry`` observes (see ``bunqueue.client.telemetry``).
    """
    if connection is not None:
        return connection, False
    if embedded or _embedded.forced():
        return _embedded.EmbeddedTransport(data_path), True
    return TcpTransport(host, port, token, tls, command_timeout=command_timeout, pool_size=pool_size,
                        on_telemetry=on_telemetry), True
