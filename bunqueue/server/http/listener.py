"""Serving the HTTP API on the broker's event loop, and running its commands through the shared runner.

An HTTP request is a client of its own for the runner: it carries no connection identity, its bearer
token was checked before the command runs, and its one reply may come later (a long-poll, or a change
that must reach the disk first). Jobs it pulls are not tied to any connection, as in the Bun original.

The port opens with the broker, but the HTTP stack (aiohttp, about 14 MB) is loaded by the first
connection, on a worker thread so that the loop keeps serving meanwhile: a broker used only over TCP does
not carry it. Connections that arrive while it loads keep their bytes until it is ready.
"""
from __future__ import annotations

import asyncio
import importlib
import logging
import ssl
from collections.abc import Callable
from functools import partial
from types import ModuleType
from typing import TYPE_CHECKING, Any

from bunqueue.broker.session import Session
from bunqueue.config import Settings
from bunqueue.monitoring.snapshot import totals
from bunqueue.server.http.answers import Answers
from bunqueue.server.ratelimit import RequestRateLimiter
from bunqueue.server.runner import CommandRunner

if TYPE_CHECKING:
    from aiohttp import web

    from bunqueue.server.http.streams import EventFeed

log = logging.getLogger("bunqueue.http")

# The module that brings in aiohttp; it imports the rest of the HTTP stack.
STACK_MODULE = "bunqueue.server.http.app"
# How long a shutdown lets HTTP handlers finish (aiohttp's own default).
SHUTDOWN_TIMEOUT_S = 60.0

Reply = dict[str, Any]


class RequestClient:
    """The runner's view of one HTTP request (or one WebSocket message): it waits for one reply."""

    __slots__ = ("closed", "future", "limiter", "session", "tasks")

    def __init__(self) -> None:
        # Not a connection: it is neither counted nor released, and the jobs it pulls belong to nobody.
        self.session = Session(authenticated=True)
        self.limiter: RequestRateLimiter | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.closed = False
        # Made only for a reply that comes later: most commands answer at once.
        self.future: asyncio.Future[Reply] | None = None

    def later(self) -> asyncio.Future[Reply]:
        if self.future is None:
            self.future = asyncio.get_running_loop().create_future()
        return self.future

    def deliver(self, replies: list[Reply]) -> None:
        future = self.later()
        if replies and not future.done():
            future.set_result(replies[0])

    def task_done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)


def executor(runner: CommandRunner) -> Callable[[Reply], Any]:
    async def execute(request: Reply) -> Reply:
        client = RequestClient()
        reply = runner.run(request, client)
        if reply is not None:
            return reply
        try:
            return await client.later()
        finally:
            # The HTTP client went away before the answer: its waiting command stops with it.
            client.closed = True
            for task in client.tasks:
                task.cancel()

    return execute


class HttpListener:
    def __init__(self, settings: Settings, runner: CommandRunner, tcp_connections: Callable[[], int]) -> None:
        self.settings = settings
        self.runner = runner
        self.execute = executor(runner)
        self.answers = Answers(self.execute, self.connection_counts, partial(totals, runner.broker))
        self.tcp_connections = tcp_connections
        self.listening: asyncio.Server | None = None
        # The HTTP stack, once loaded: the event feed and aiohttp's low-level server (a protocol factory).
        self.feed: EventFeed | None = None
        self.server: web.Server | None = None
        self.loading: asyncio.Future[ModuleType] | None = None
        # Connections that arrived while the stack was loading.
        self.waiting: set[PendingConnection] = set()

    def connection_counts(self) -> dict[str, int]:
        feed = self.feed
        return {
            "tcp": self.tcp_connections(),
            "ws": len(feed.sockets) if feed is not None else 0,
            "sse": len(feed.streams) if feed is not None else 0,
        }

    async def start(self, ssl_context: ssl.SSLContext | None) -> None:
        loop = asyncio.get_running_loop()
        self.listening = await loop.create_server(
            self.new_connection, self.settings.host, self.settings.http_port, ssl=ssl_context,
            reuse_address=True, backlog=1024,
        )

    def new_connection(self) -> asyncio.Protocol:
        if self.server is not None:
            return self.server()
        if self.loading is None:
            loop = asyncio.get_running_loop()
            self.loading = loop.run_in_executor(None, importlib.import_module, STACK_MODULE)
            self.loading.add_done_callback(self.loaded)
        return PendingConnection(self)

    def loaded(self, loading: asyncio.Future[ModuleType]) -> None:
        waiting = list(self.waiting)
        self.waiting.clear()
        try:
            stack = loading.result()
        except Exception:
            log.exception("the HTTP stack could not be loaded")
            self.loading = None
            for conn in waiting:
                conn.close()
            return
        settings = self.settings
        self.feed = stack.EventFeed(self.runner, settings.cors_origin)
        api = stack.HttpApi(
            self.execute, self.answers, self.feed, tokens=settings.tokens, cors_origins=settings.cors_origin,
            metrics_auth=settings.metrics_need_token, rate_limit=settings.rate_limit_max_requests,
            rate_window_ms=settings.rate_limit_window_ms,
        )
        self.server = server = stack.build_server(api)
        for conn in waiting:
            conn.hand_over(server())

    @property
    def port(self) -> int:
        assert self.listening is not None
        return int(self.listening.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self.listening is None:
            return
        self.listening.close()
        for conn in list(self.waiting):
            conn.close()
        if self.server is not None:
            assert self.feed is not None
            await self.feed.close()
            # Let requests that arrived before the port closed start, then close idle connections and
            # give the busy ones their time.
            await asyncio.sleep(0)
            self.server.pre_shutdown()
            await self.server.shutdown(SHUTDOWN_TIMEOUT_S)


class PendingConnection(asyncio.Protocol):
    """A connection that arrived while the HTTP stack was loading: it keeps what the client sends and
    passes the connection, bytes and all, to the stack's handler once that is ready."""

    def __init__(self, listener: HttpListener) -> None:
        self.listener = listener
        self.transport: asyncio.Transport | None = None
        self.received: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        server = self.listener.server
        if server is not None:
            # The stack finished loading between this connection's accept and now.
            self.hand_over(server())
        else:
            self.listener.waiting.add(self)

    def data_received(self, data: bytes) -> None:
        self.received.append(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.listener.waiting.discard(self)

    def hand_over(self, handler: asyncio.Protocol) -> None:
        transport = self.transport
        if transport is None:
            return
        transport.set_protocol(handler)
        handler.connection_made(transport)
        for data in self.received:
            handler.data_received(data)
        self.received = []

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
