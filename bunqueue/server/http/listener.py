"""Serving the HTTP API on the broker's event loop, and running its commands through the shared runner.

An HTTP request is a client of its own for the runner: it carries no connection identity, its bearer
token was checked before the command runs, and its one reply may come later (a long-poll, or a change
that must reach the disk first). Jobs it pulls are not tied to any connection, as in the Bun original.

Requests are parsed by httptools (``connection``) and answered by ``api``. The stream side (SSE and
WebSocket on aiohttp, about 14 MB) is loaded by the first stream request, on a worker thread so that the
loop keeps serving meanwhile: a broker whose HTTP clients only call the REST routes does not carry it.
"""
from __future__ import annotations

import asyncio
import importlib
import logging
import ssl
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from bunqueue.broker.session import Session
from bunqueue.config import Settings
from bunqueue.server.http.answers import Answers
from bunqueue.server.http.api import HttpApi
from bunqueue.server.http.connection import HttpConnection
from bunqueue.server.ratelimit import RequestRateLimiter
from bunqueue.server.runner import CommandRunner

if TYPE_CHECKING:
    from aiohttp import web

    from bunqueue.server.http.streams import EventFeed

log = logging.getLogger("bunqueue.http")

# The module that brings in aiohttp for the streams.
STREAM_MODULE = "bunqueue.server.http.streamserver"
# How long a shutdown lets requests being answered finish (aiohttp's own default).
SHUTDOWN_TIMEOUT_S = 60.0

Reply = dict[str, Any]
# The stream side's protocol factory (aiohttp's low-level server).
StreamServer = Callable[[], asyncio.Protocol]


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


class Commands:
    """Runs an HTTP request's command: ``now`` gives the reply, or an awaitable of it when it waits;
    calling the object awaits it in any case."""

    def __init__(self, runner: CommandRunner) -> None:
        self.runner = runner
        # The client of the commands whose replies come at once.
        self.client = RequestClient()

    def now(self, request: Reply, body_size: int = 0) -> Reply | Awaitable[Reply]:
        """A client is changed only by a reply that comes later, so one serves every command answered at
        once (most of them), and one that waits keeps the client it had; the next command gets a new one."""
        client = self.client
        client.session.frame_size = body_size
        reply = self.runner.run(request, client)
        if reply is not None:
            return reply
        self.client = RequestClient()
        return self.later(client)

    async def later(self, client: RequestClient) -> Reply:
        try:
            return await client.later()
        finally:
            # The HTTP client went away before the answer: its waiting command stops with it.
            client.closed = True
            for task in client.tasks:
                task.cancel()

    async def __call__(self, request: Reply) -> Reply:
        reply = self.now(request)
        return reply if type(reply) is dict else await reply  # type: ignore[misc]


class HttpListener:
    def __init__(self, settings: Settings, runner: CommandRunner, tcp_connections: Callable[[], int]) -> None:
        self.settings = settings
        self.runner = runner
        self.commands = Commands(runner)
        answers = Answers(self.commands, self.connection_counts, runner.broker.totals,
                          runner.broker.storage_status)
        self.api = HttpApi(
            self.commands.now, answers, tokens=settings.tokens, cors_origins=settings.cors_origin,
            metrics_auth=settings.metrics_need_token, rate_limit=settings.rate_limit_max_requests,
            rate_window_ms=settings.rate_limit_window_ms, engine=runner.broker,
        )
        self.tcp_connections = tcp_connections
        self.listening: asyncio.Server | None = None
        self.connections: set[HttpConnection] = set()
        self.closing = False
        # The stream side, once loaded: the event feed and aiohttp's low-level server (a protocol factory),
        # and the connections waiting for it meanwhile.
        self.feed: EventFeed | None = None
        self.stream_server: web.Server | None = None
        self.loading: asyncio.Future[ModuleType] | None = None
        self.waiting: list[Callable[[StreamServer | None], None]] = []

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
        return HttpConnection(self, self.api)

    def with_stream_server(self, then: Callable[[StreamServer | None], None]) -> None:
        """Call ``then`` with the stream side's protocol factory (None if it cannot be loaded)."""
        if self.stream_server is not None:
            then(self.stream_server)
            return
        self.waiting.append(then)
        if self.loading is None:
            loop = asyncio.get_running_loop()
            self.loading = loop.run_in_executor(None, importlib.import_module, STREAM_MODULE)
            self.loading.add_done_callback(self.loaded)

    def loaded(self, loading: asyncio.Future[ModuleType]) -> None:
        waiting, self.waiting = self.waiting, []
        try:
            stack = loading.result()
        except Exception:
            log.exception("the HTTP stream handler could not be loaded")
            self.loading = None
            for then in waiting:
                then(None)
            return
        self.feed = stack.EventFeed(self.runner, self.settings.cors_origin)
        self.stream_server = server = stack.build_stream_server(self.feed)
        for then in waiting:
            then(server)

    @property
    def port(self) -> int:
        assert self.listening is not None
        return int(self.listening.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self.listening is None:
            return
        self.listening.close()
        self.closing = True
        if self.feed is not None:
            await self.feed.close()
        # Let requests that arrived before the port closed start, then close idle connections and give
        # the busy ones their time.
        await asyncio.sleep(0)
        for conn in list(self.connections):
            conn.close_if_idle()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SHUTDOWN_TIMEOUT_S
        while self.connections and loop.time() < deadline:
            await asyncio.sleep(0.05)
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.abort()
        if self.stream_server is not None:
            self.stream_server.pre_shutdown()
            await self.stream_server.shutdown(SHUTDOWN_TIMEOUT_S)
