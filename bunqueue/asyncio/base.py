"""What Queue, Worker, QueueEvents and FlowProducer share: opening their transport, and starting at once
when made inside a running loop."""
from __future__ import annotations

import asyncio

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


def loop_running() -> bool:
    """Whether this thread runs an event loop: ``autorun`` starts an object only then (made elsewhere,
    it waits for ``start()``)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
