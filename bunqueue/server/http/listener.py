"""Serving the HTTP API on the broker's event loop, and running its commands through the shared runner.

An HTTP request is a client of its own for the runner: it carries no connection identity, its bearer
token was checked before the command runs, and its one reply may come later (a long-poll, or a change
that must reach the disk first). Jobs it pulls are not tied to any connection, as in the Bun original.
"""
from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from functools import partial
from typing import Any

from aiohttp import web

from bunqueue.broker.session import Session
from bunqueue.config import Settings
from bunqueue.monitoring.snapshot import totals
from bunqueue.server.http.answers import Answers
from bunqueue.server.http.app import HttpApi, build_server
from bunqueue.server.http.streams import EventFeed
from bunqueue.server.ratelimit import RequestRateLimiter
from bunqueue.server.runner import CommandRunner

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
        self.execute = executor(runner)
        self.answers = Answers(self.execute, self.connection_counts, partial(totals, runner.broker))
        self.feed = EventFeed(runner, settings.cors_origin)
        self.tcp_connections = tcp_connections
        self.api = HttpApi(
            self.execute, self.answers, self.feed, tokens=settings.tokens, cors_origins=settings.cors_origin,
            metrics_auth=settings.metrics_need_token, rate_limit=settings.rate_limit_max_requests,
            rate_window_ms=settings.rate_limit_window_ms,
        )
        self.runner: web.ServerRunner | None = None

    def connection_counts(self) -> dict[str, int]:
        return {"tcp": self.tcp_connections(), "ws": len(self.feed.sockets), "sse": len(self.feed.streams)}

    async def start(self, ssl_context: ssl.SSLContext | None) -> None:
        self.runner = web.ServerRunner(build_server(self.api), handle_signals=False)
        await self.runner.setup()
        site = web.TCPSite(self.runner, self.settings.host, self.settings.http_port, ssl_context=ssl_context,
                           reuse_address=True, backlog=1024)
        await site.start()

    @property
    def port(self) -> int:
        assert self.runner is not None
        server = self.runner.addresses
        return int(server[0][1])

    async def close(self) -> None:
        if self.runner is not None:
            await self.feed.close()
            await self.runner.cleanup()
