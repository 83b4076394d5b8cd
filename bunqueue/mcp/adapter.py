"""The one way the MCP tools reach a broker: protocol commands, sent to the engine in this process
(embedded mode) or to a running server over the package's TCP client (tcp mode).

The mode comes from the environment, as the original's: ``BUNQUEUE_MODE`` (``embedded``, the default, or
``tcp``), ``BUNQUEUE_HOST``, ``BUNQUEUE_PORT``, ``BUNQUEUE_TOKEN`` and ``BUNQUEUE_POOL_SIZE`` for tcp mode;
``DATA_PATH`` (or the other data-path variables of ``bunqueue.client.embedded``) for embedded mode, which
keeps its jobs in memory without one.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bunqueue.client.connectionoptions import DEFAULT_PORT, ConnectionOptions
from bunqueue.client.embedded import EmbeddedTransport
from bunqueue.client.transport import TcpTransport, Transport
from bunqueue.errors import RemoteCommandError

Reply = dict[str, Any]
#: Extra seconds a long-polling command may take beyond its own timeout before the client gives up.
LONG_POLL_MARGIN_S = 5.0
DEFAULT_POOL_SIZE = 2


class ToolFailure(Exception):
    """A tool that cannot answer: its result is the error ``{"error": message, **extra}``."""

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.payload = {"error": message, **extra}


@dataclass(frozen=True)
class Mode:
    name: str
    host: str = "localhost"
    port: int = DEFAULT_PORT
    token: str | None = None
    pool_size: int = DEFAULT_POOL_SIZE

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Mode:
        env = os.environ if env is None else env
        name = env.get("BUNQUEUE_MODE") or "embedded"
        if name not in ("embedded", "tcp"):
            raise ValueError(f"BUNQUEUE_MODE must be embedded or tcp, not {name!r}")
        return cls(
            name=name,
            host=env.get("BUNQUEUE_HOST") or "localhost",
            port=_positive(env, "BUNQUEUE_PORT", DEFAULT_PORT),
            token=env.get("BUNQUEUE_TOKEN") or None,
            pool_size=_positive(env, "BUNQUEUE_POOL_SIZE", DEFAULT_POOL_SIZE),
        )


def _positive(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be a positive integer, not {raw!r}") from None
    if value < 1:
        raise ValueError(f"{name} must be a positive integer, not {raw!r}")
    return value


class Adapter:
    """Protocol commands to one broker, whatever the mode."""

    def __init__(self, transport: Transport, mode: Mode) -> None:
        self.transport = transport
        self.mode = mode

    @classmethod
    def open(cls, mode: Mode) -> Adapter:
        transport: Transport
        if mode.name == "tcp":
            transport = TcpTransport(ConnectionOptions(mode.host, mode.port, mode.token, pool_size=mode.pool_size))
        else:
            # The data path comes from the environment, read by the embedded engine itself.
            transport = EmbeddedTransport()
        return cls(transport, mode)

    async def connect(self) -> None:
        """Reach the broker once now, so that a wrong address fails at start rather than at the first tool."""
        await self.call({"cmd": "Ping"})

    async def send(self, command: dict[str, Any], wait_ms: float | None = None) -> Reply:
        """The reply of ``command``, ``ok`` or not; ``wait_ms`` is how long the command itself may wait."""
        timeout = None if wait_ms is None else wait_ms / 1000 + LONG_POLL_MARGIN_S
        try:
            return await self.transport.call(_compact(command), timeout)
        except RemoteCommandError as exc:
            return {"ok": False, "error": str(exc)}

    async def call(self, command: dict[str, Any], wait_ms: float | None = None) -> Reply:
        """The reply of ``command``; a refusal raises :class:`ToolFailure` with the broker's text."""
        reply = await self.send(command, wait_ms)
        if not reply.get("ok"):
            raise ToolFailure(str(reply.get("error", "unknown server error")))
        return reply

    async def succeeded(self, command: dict[str, Any]) -> bool:
        """Whether the broker did ``command``: the ``success`` of the tools that report a boolean."""
        return bool((await self.send(command)).get("ok"))

    async def close(self) -> None:
        await self.transport.close()


def _compact(command: dict[str, Any]) -> dict[str, Any]:
    """``command`` without its unset options: an absent option takes the broker's default."""
    return {key: value for key, value in command.items() if value is not None}
