"""What Queue, Worker, QueueEvents and FlowProducer share: opening their transport, and starting at once
when made inside a running loop."""
from __future__ import annotations

import asyncio
from typing import Self

from bunqueue.client import embedded
from bunqueue.client.connectionoptions import ConnectionOptions
from bunqueue.client.transport import TcpTransport, Transport


def open_transport(options: ConnectionOptions, shared: Transport | None = None) -> tuple[Transport, bool]:
    """The transport to use and whether the caller owns it (closes it with itself).

    A ``shared`` transport (an object's ``connection`` argument) is used and left open; ``embedded`` (or
    ``BUNQUEUE_EMBEDDED=1``) uses the broker of ``data_path`` in this process; otherwise a pool of TCP
    connections, whose life ``on_telemetry`` observes (see ``bunqueue.client.telemetry``).
    """
    if shared is not None:
        return shared, False
    if options.embedded or embedded.forced():
        return embedded.EmbeddedTransport(options.data_path), True
    return TcpTransport(options), True


class TransportUser:
    """An object on one transport: its own (closed with it) or a shared one, left open. ``async with``
    closes it."""

    transport: Transport
    _owns_transport: bool

    def _open(self, options: ConnectionOptions, shared: Transport | None) -> None:
        self.transport, self._owns_transport = open_transport(options, shared)

    @property
    def connection(self) -> Transport:
        """The transport, shareable with other objects through their ``connection`` argument."""
        return self.transport

    async def close(self) -> None:
        if self._owns_transport:
            await self.transport.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


def loop_running() -> bool:
    """Whether this thread runs an event loop: ``autorun`` starts an object only then (made elsewhere,
    it waits for ``start()``)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
