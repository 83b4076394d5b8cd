"""Embedded mode: the broker in this process, reached without a socket.

This is the client's one doorway into the server side: every server or broker name the embedded mode uses
is imported here. An ``Engine`` is what ``bunqueue start`` runs minus its listeners: the same broker,
store, recovery, deadline timers and ``CommandRunner``. Each request is packed to a MessagePack frame and
handed to ``CommandRunner.run_frame`` as a TCP frame would be, and each reply is packed and unpacked as it
would travel back, so embedded and remote clients see the same answers and share no objects with the
broker.

One engine per data path (memory-only without one) serves every object of the process, on the client's
background loop thread (``bunqueue.client.loopthread``); callers on other loops hop to it.
"""
from __future__ import annotations

import asyncio
import itertools
import os
from typing import Any

import msgpack

from bunqueue.client.connection import decode_payload
from bunqueue.client.loopthread import at_exit, hop
from bunqueue.client.transport import EventCallback, Reply, Subscription, checked
from bunqueue.config import Settings
from bunqueue.errors import CLIENT_CLOSED, ConnectionClosedError, SerializationError
from bunqueue.server.app import BrokerServer
from bunqueue.server.ratelimit import RequestRateLimiter
from bunqueue.server.runner import CommandRunner
from bunqueue.server.scheduler import DeadlineScheduler

#: Where an embedded engine keeps its jobs when no data path is given, in this order (as the original).
DATA_PATH_ENV = ("BUNQUEUE_DATA_PATH", "BQ_DATA_PATH", "DATA_PATH", "SQLITE_PATH")
EMBEDDED_ENV = "BUNQUEUE_EMBEDDED"


def forced() -> bool:
    """``BUNQUEUE_EMBEDDED=1`` makes every client object embedded."""
    return os.environ.get(EMBEDDED_ENV) == "1"


def resolve_data_path(data_path: str | None) -> str | None:
    if data_path is None:
        data_path = next((os.environ[name] for name in DATA_PATH_ENV if os.environ.get(name)), None)
    return os.path.abspath(data_path) if data_path else None


class Engine:
    """The broker of one data path, started on the background loop."""

    def __init__(self, data_path: str | None) -> None:
        self.server = BrokerServer(Settings(data_path=data_path, tcp_port=0, http_port=0))
        self.runner: CommandRunner = self.server.runner
        self.packer = self.server.packer
        self.closed = False

    def start(self) -> None:
        server = self.server
        loop = asyncio.get_running_loop()
        server.recover(loop)
        deadlines = server.deadlines = DeadlineScheduler(loop, server.broker.deadline_handlers())
        server.broker.wake_at = deadlines.arm
        for kind, due in server.broker.pending_deadlines():
            deadlines.arm(kind, due)

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.server.deadlines is not None:
            self.server.deadlines.cancel()
        await self.server.webhook_delivery.close(0.0)
        await self.server.store.close()

    def copy(self, obj: Any) -> Any:
        """``obj`` as the far side of a socket would decode it."""
        return decode_payload(self.packer.pack(obj))


_engines: dict[str | None, Engine] = {}


def engine(data_path: str | None) -> Engine:
    """The engine of ``data_path`` (already resolved); call on the background loop."""
    found = _engines.get(data_path)
    if found is None or found.closed:
        found = _engines[data_path] = Engine(data_path)
        found.start()
        if len(_engines) == 1:
            at_exit(close_engines)
    return found


async def close_engines() -> None:
    """Close every engine: their stores write what is left (at exit, or for a test)."""
    engines = list(_engines.values())
    _engines.clear()
    for found in engines:
        await found.close()


class EngineClient:
    """One in-process client of an engine, as the ``CommandRunner`` sees a connection."""

    def __init__(self, found: Engine) -> None:
        self.engine = found
        self.runner = found.runner
        self.session = self.runner.new_session()
        self.limiter: RequestRateLimiter | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.closed = False
        self.pending: dict[str, asyncio.Future[Reply]] = {}
        self.ids = itertools.count(1)

    def request(self, command: dict[str, Any]) -> asyncio.Future[Reply]:
        if self.closed or self.engine.closed:
            raise ConnectionClosedError(CLIENT_CLOSED)
        rid = f"~{next(self.ids):x}"
        try:
            body = msgpack.packb({**command, "reqId": rid}, use_bin_type=True)
        except (TypeError, ValueError, OverflowError) as exc:
            raise SerializationError(f"cannot pack {command.get('cmd')}: {exc}") from exc
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self.pending[rid] = future
        reply = self.runner.run_frame(body, self, True)
        if reply is not None:
            self.deliver([reply])
        return future

    def deliver(self, replies: list[Reply]) -> None:
        for reply in replies:
            future = self.pending.pop(reply.get("reqId"), None)  # type: ignore[arg-type]
            if future is not None and not future.done():
                future.set_result(self.engine.copy(reply))

    def task_done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if not self.engine.closed:
            self.runner.release(self)
        for future in self.pending.values():
            if not future.done():
                future.set_exception(ConnectionClosedError(CLIENT_CLOSED))
        self.pending.clear()


class EmbeddedTransport:
    """The transport of an embedded Queue, Worker, QueueEvents or FlowProducer."""

    def __init__(self, data_path: str | None = None) -> None:
        self.data_path = resolve_data_path(data_path)
        self.client: EngineClient | None = None
        self.streams: list[EmbeddedEventStream] = []
        self.closed = False
        self.generation = 1

    @property
    def connected(self) -> bool:
        return not self.closed

    def _client(self) -> EngineClient:
        if self.closed:
            raise ConnectionClosedError(CLIENT_CLOSED)
        if self.client is None or self.client.closed:
            self.client = EngineClient(engine(self.data_path))
        return self.client

    async def _call(self, command: dict[str, Any]) -> Reply:
        return await self._client().request(command)

    async def call(self, command: dict[str, Any], timeout: float | None = None) -> Reply:
        # No command timeout: nothing can be lost between this process and itself.
        return checked(await hop(self._call(command)), command)

    async def subscribe(self, queue: str, on_event: EventCallback) -> Subscription:
        loop = asyncio.get_running_loop()

        def forward(event: dict[str, Any]) -> None:
            if loop.is_closed():
                return
            if loop is asyncio.get_running_loop():
                on_event(event)
            else:
                loop.call_soon_threadsafe(on_event, event)

        stream = await hop(self._subscribe(queue, forward))
        self.streams.append(stream)
        return stream

    async def _subscribe(self, queue: str, on_event: EventCallback) -> EmbeddedEventStream:
        return await EmbeddedEventStream.open(self._client().engine, queue, on_event)

    async def _close(self) -> None:
        if self.client is not None:
            self.client.close()

    async def close(self) -> None:
        if self.closed:
            return
        for stream in self.streams:
            await stream.close()
        await hop(self._close())
        self.closed = True


class EmbeddedEventStream:
    def __init__(self, client: EngineClient) -> None:
        self.client = client

    @classmethod
    async def open(cls, found: Engine, queue: str, on_event: EventCallback) -> EmbeddedEventStream:
        client = EngineClient(found)

        def deliver(frame: dict[str, Any]) -> None:
            on_event(found.copy(frame["event"]))

        client.session.deliver = deliver
        checked(await client.request({"cmd": "SubscribeEvents", "queue": queue}), {})
        return cls(client)

    async def _close(self) -> None:
        self.client.close()

    async def close(self) -> None:
        await hop(self._close())
