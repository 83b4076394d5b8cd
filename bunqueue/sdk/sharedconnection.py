"""The synchronous Connection: a TCP transport that Queue and FlowProducer objects can share."""
from __future__ import annotations

from typing import Any

from bunqueue.client.connectionoptions import DEFAULT_PORT, ConnectionOptions, TlsOption
from bunqueue.client.transport import PROTOCOL_VERSION, TcpTransport, Transport
from bunqueue.errors import CommandError, CommandTimeoutError, ConnectionClosedError
from bunqueue.sdk.blocking import run
from bunqueue.sdk.telemetry import TelemetryHandler


class Connection:
    """Pipelined TCP connection to a server: connects on first use, reconnects with backoff after a loss.

    Any thread may call it. ``on_telemetry`` receives the SDK's structured events of the connection's life
    and of every command (see ``bunqueue.client.telemetry``), on the client's loop thread.
    """

    def __init__(
        self,
        host: str = "localhost",
        port: int = DEFAULT_PORT,
        token: str | None = None,
        tls: TlsOption = None,
        connect_timeout: float = 5.0,
        command_timeout: float = 10.0,
        on_telemetry: TelemetryHandler | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.token = token
        self.tls = tls
        self.connect_timeout = connect_timeout
        self.command_timeout = command_timeout
        self.transport: Transport = TcpTransport(ConnectionOptions(
            host, port, token, tls, connect_timeout, command_timeout, on_telemetry=on_telemetry))

    @classmethod
    def over(cls, transport: Transport) -> Connection:
        """The Connection of a transport an object made for itself (``Queue(...).connection``, as in the
        SDK); an embedded engine's has no host or port (None)."""
        conn = cls.__new__(cls)
        conn.transport = transport
        conn.host = getattr(transport, "host", None)  # type: ignore[assignment]
        conn.port = getattr(transport, "port", None)  # type: ignore[assignment]
        conn.token = getattr(transport, "token", None)
        conn.tls = getattr(transport, "ssl", None)
        conn.connect_timeout = getattr(transport, "connect_timeout", 0.0)
        conn.command_timeout = getattr(transport, "command_timeout", 0.0)
        return conn

    def call(self, command: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        """Send ``command`` and return its reply; RemoteCommandError (a CommandError) for ``ok: false``."""
        return run(self.transport.call(command, timeout))

    def connect(self) -> None:
        if isinstance(self.transport, TcpTransport):
            run(self.transport.connection())

    def ping(self) -> bool:
        """True when the server answers; a refused token still raises AuthError, as in the SDK."""
        try:
            reply = self.call({"cmd": "Ping"})
        except (ConnectionClosedError, CommandTimeoutError, CommandError):
            return False
        data = reply.get("data")
        return bool(isinstance(data, dict) and data.get("pong"))

    def hello(self) -> dict[str, Any]:
        return self.call({"cmd": "Hello", "protocolVersion": PROTOCOL_VERSION, "capabilities": ["pipelining"]})

    @property
    def connected(self) -> bool:
        return self.transport.connected

    @property
    def generation(self) -> int:
        return int(getattr(self.transport, "generation", 0))

    def close(self) -> None:
        run(self.transport.close())


def shared_transport(connection: Connection | None) -> Transport | None:
    """The transport an object given ``connection`` shares; None: the object opens its own."""
    return connection.transport if connection is not None else None
