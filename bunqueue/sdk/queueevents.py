"""The synchronous QueueEvents: one queue's events, to listeners called on a thread of their own."""
from __future__ import annotations

from bunqueue.asyncio import queueevents as aio
from bunqueue.client.connectionoptions import DEFAULT_PORT, TlsOption
from bunqueue.sdk.blocking import Bridged, ThreadedEmitter, run
from bunqueue.sdk.sharedconnection import Connection, shared_transport


class _Bridged(Bridged, aio.QueueEvents):
    pass


class QueueEvents(ThreadedEmitter):
    """``on(name, callback)`` with the TS client's event names (see ``bunqueue.asyncio.queueevents``)."""

    def __init__(
        self,
        name: str,
        host: str = "localhost",
        port: int = DEFAULT_PORT,
        token: str | None = None,
        tls: TlsOption = None,
        connection: Connection | None = None,
        prefix_key: str = "",
        *,
        embedded: bool = False,
        data_path: str | None = None,
    ) -> None:
        super().__init__()
        self._aio = _Bridged(name, host, port, token, tls, shared_transport(connection), prefix_key,
                             autorun=False, embedded=embedded, data_path=data_path)
        self._aio.outer = self
        self.name = self._aio.name
        run(self._aio.wait_until_ready())

    def wait_until_ready(self) -> None:
        run(self._aio.wait_until_ready())

    def close(self) -> None:
        run(self._aio.close())
        self._settle_listeners()

    def __enter__(self) -> QueueEvents:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
