"""What every server does around its command runner: listen on TCP and HTTP, run periodic checks, stop on a
signal and close its connections. ``app.BrokerServer`` (memory and SQLite) and ``postgres.PostgresServer``
add their engine's start and shutdown."""
from __future__ import annotations

import asyncio
import gc
import logging
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING

from bunqueue._core.packer import ReplyPacker
from bunqueue.broker.components import eventnames
from bunqueue.broker.components.eventhub import EventHub
from bunqueue.config import Settings
from bunqueue.server.runner import CommandRunner
from bunqueue.server.tcp import BrokerProtocol
from bunqueue.server.tls import server_context

if TYPE_CHECKING:
    from bunqueue.server.http.listener import HttpListener

log = logging.getLogger("bunqueue")


def tune_collector() -> None:
    """Collect young objects every 50,000 allocations instead of every 700.

    A busy broker allocates a few containers per job and makes no reference cycles of its own: at the
    default rate the cyclic collector spends much of the push path re-scanning the queued jobs it keeps
    (memory and SQLite) or the events and rows of each flush (PostgreSQL). Objects alive at start-up are
    frozen out of collection entirely.
    """
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


class Serving:
    """The listeners of ``runner`` and the way they stop; ``events`` hears ``server:shutdown``."""

    def __init__(self, settings: Settings, runner: CommandRunner, events: EventHub) -> None:
        self.settings = settings
        self.runner = runner
        self.events = events
        self.connections: set[BrokerProtocol] = set()
        # One packer for every connection: packing is synchronous, so they never interleave.
        self.packer = ReplyPacker()
        self.tcp_server: asyncio.base_events.Server | None = None
        self.http: HttpListener | None = None
        self.stopping: asyncio.Event | None = None
        # The periodic checks and the statistics line: their next run, by name.
        self.periodic: dict[str, asyncio.TimerHandle] = {}

    def handle_signals(self, loop: asyncio.AbstractEventLoop) -> None:
        """Before the port opens: whoever sees the port may stop the server at once."""
        self.stopping = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop, sig)

    async def listen(self) -> None:
        loop = asyncio.get_running_loop()
        tls = self.settings.tls_files
        ssl_context = server_context(*tls) if tls else None
        # HTTP first: a client that sees the TCP port open may use the HTTP port at once.
        if self.settings.http_port:
            from bunqueue.server.http.listener import HttpListener

            self.http = HttpListener(self.settings, self.runner, lambda: len(self.connections))
            await self.http.start(ssl_context)
        self.tcp_server = await loop.create_server(
            self.new_connection,
            self.settings.host,
            self.settings.tcp_port,
            reuse_address=True,
            backlog=1024,
            ssl=ssl_context,
        )

    def repeat(self, name: str, seconds: float, action: Callable[[], None]) -> None:
        """Run ``action`` every ``seconds`` until shutdown; a failure is logged and the next run still comes."""
        loop = asyncio.get_running_loop()

        def tick() -> None:
            self.periodic[name] = loop.call_later(seconds, tick)
            try:
                action()
            except Exception:
                log.exception("the periodic %s run failed", name)

        self.periodic[name] = loop.call_later(seconds, tick)

    def new_connection(self) -> BrokerProtocol:
        return BrokerProtocol(self.runner, self.settings, self.packer, self.connections)

    @property
    def tcp_address(self) -> tuple[str, int]:
        assert self.tcp_server is not None
        host, port = self.tcp_server.sockets[0].getsockname()[:2]
        return host, port

    def request_stop(self, sig: signal.Signals | None = None) -> None:
        if self.stopping is None:
            return
        # A signal's stop is told to the open streams (server:shutdown), once, as the original tells it.
        if sig is not None and not self.stopping.is_set() and self.events.notices:
            self.events.notify(eventnames.SERVER_SHUTDOWN, {"signal": sig.name})
        self.stopping.set()

    async def serve_until_stopped(self) -> None:
        assert self.stopping is not None
        await self.stopping.wait()
        log.info("shutting down")
        await self.shutdown()

    async def start(self) -> None:
        raise NotImplementedError

    async def shutdown(self) -> None:
        raise NotImplementedError

    def stop_accepting(self) -> None:
        if self.tcp_server is not None:
            self.tcp_server.close()

    async def close_listeners(self) -> None:
        """Close every connection and both listeners, and stop the periodic checks."""
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.close()
        if self.tcp_server is not None:
            await self.tcp_server.wait_closed()
        if self.http is not None:
            await self.http.close()
        for handle in self.periodic.values():
            handle.cancel()
