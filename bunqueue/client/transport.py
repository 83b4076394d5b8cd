"""How the high-level client reaches a broker: a pool of TCP connections, or the engine in this process.

Both kinds answer ``call(command)`` with the reply of an ``{ok: true}`` command and raise
:class:`~bunqueue.errors.RemoteCommandError` for ``{ok: false}``; ``subscribe`` opens an event stream of one
queue. A TCP transport connects lazily, pipelines every command on its connections (requests are matched by
``reqId``), reconnects with backoff after a loss, authenticates each new connection with its token and can
use TLS.

While the server is unreachable a call does not wait for it: it raises ConnectionClosedError, after at
most the wait until the next connection attempt (``RECONNECT_BACKOFF_S``: 0.5 s after the first failure,
then 1 s, 2 s and 5 s). A call in flight when the connection drops raises the same error; whether its
command took effect is unknown, so retrying is the caller's choice. The first call after the server is
back opens a new connection, and every object on the transport works again.
"""
from __future__ import annotations

import asyncio
import itertools
import ssl
from collections.abc import Callable
from typing import Any, Protocol

from bunqueue.client.connection import Connection, connect
from bunqueue.client.connectionoptions import ConnectionOptions, TlsOption
from bunqueue.client.telemetry import Telemetry, now_ms
from bunqueue.errors import (
    CLIENT_CLOSED,
    AuthenticationError,
    CommandTimeoutError,
    ConnectionClosedError,
    RemoteCommandError,
    SerializationError,
)

Reply = dict[str, Any]
EventCallback = Callable[[dict[str, Any]], None]

#: Waits between reconnect attempts, then the last one repeated.
RECONNECT_BACKOFF_S = (0.5, 1.0, 2.0, 5.0)
PROTOCOL_VERSION = 2


def checked(reply: Reply, command: dict[str, Any]) -> Reply:
    if not reply.get("ok"):
        raise RemoteCommandError(str(reply.get("error", "unknown server error")))
    return reply


class Subscription(Protocol):
    async def close(self) -> None: ...


class Transport(Protocol):
    async def call(self, command: dict[str, Any], timeout: float | None = None) -> Reply: ...

    async def subscribe(self, queue: str, on_event: EventCallback) -> Subscription: ...

    async def close(self) -> None: ...

    @property
    def connected(self) -> bool: ...


def ssl_context(tls: TlsOption) -> ssl.SSLContext | None:
    """The SSLContext of a ``tls`` option; None: plain TCP."""
    if tls is None or tls is False:
        return None
    if isinstance(tls, ssl.SSLContext):
        return tls
    ctx = ssl.create_default_context()
    if isinstance(tls, dict):
        if tls.get("ca_file"):
            ctx = ssl.create_default_context(cafile=tls["ca_file"])
        if tls.get("verify") is False:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
    return ctx


class TcpTransport:
    """``options.pool_size`` pipelined connections to one server, used in turn (the options' ``embedded``
    and ``data_path`` are not its business)."""

    def __init__(self, options: ConnectionOptions) -> None:
        if options.pool_size < 1:
            raise ValueError("pool_size must be >= 1")
        self.host = options.host
        self.port = options.port
        self.token = options.token
        self.ssl = ssl_context(options.tls)
        self.connect_timeout = options.connect_timeout
        self.command_timeout = options.command_timeout
        self.slots: list[Connection | None] = [None] * options.pool_size
        self.turn = itertools.cycle(range(options.pool_size))
        self.opening: dict[int, asyncio.Task[Connection]] = {}
        self.failures = 0
        self.retry_at = 0.0
        self.closed = False
        #: Bumped on every new connection: a worker registers itself again on a new one.
        self.generation = 0
        self.telemetry = Telemetry(options.on_telemetry) if options.on_telemetry is not None else None
        self.last_req_id = 0

    @property
    def connected(self) -> bool:
        return any(c is not None and not c.is_closed() for c in self.slots)

    async def connection(self) -> Connection:
        index = next(self.turn)
        conn = self.slots[index]
        if conn is not None and not conn.is_closed():
            return conn
        task = self.opening.get(index)
        if task is None:
            task = self.opening[index] = asyncio.ensure_future(self._open(index))
            task.add_done_callback(lambda _: self.opening.pop(index, None))
        return await asyncio.shield(task)

    async def _open(self, index: int) -> Connection:
        if self.closed:
            raise ConnectionClosedError(CLIENT_CLOSED)
        loop = asyncio.get_running_loop()
        wait = self.retry_at - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)
        started = now_ms()
        try:
            conn = await connect(self.host, self.port, token=self.token, timeout=self.connect_timeout, ssl=self.ssl)
        except AuthenticationError:
            if self.telemetry is not None:
                self.telemetry.emit("auth", ok=False)
            raise
        except (TimeoutError, OSError) as exc:
            # ssl.SSLError is an OSError: a refused certificate is retried like a refused connection.
            operation = "tls" if isinstance(exc, ssl.SSLError) else "connect"
            self._schedule_retry(loop, operation, exc)
            raise ConnectionClosedError(f"{operation} to {self.host}:{self.port} failed: {exc}") from exc
        self.failures = 0
        self.retry_at = 0.0
        self.generation += 1
        if self.closed:
            await conn.close()
            raise ConnectionClosedError(CLIENT_CLOSED)
        self.slots[index] = conn
        if self.telemetry is not None:
            self._observe(conn, started, self.telemetry)
        return conn

    def _schedule_retry(self, loop: asyncio.AbstractEventLoop, operation: str, exc: BaseException) -> None:
        delay = RECONNECT_BACKOFF_S[min(self.failures, len(RECONNECT_BACKOFF_S) - 1)]
        self.retry_at = loop.time() + delay
        self.failures += 1
        if self.telemetry is not None:
            self.telemetry.emit("reconnect_scheduled", host=self.host, port=self.port, attempt=self.failures,
                                delay_ms=delay * 1000)
            self.telemetry.emit("error", operation=operation, error=str(exc))

    def _observe(self, conn: Connection, started: float, telemetry: Telemetry) -> None:
        generation = self.generation
        if self.token is not None:
            telemetry.emit("auth", ok=True)
        telemetry.emit("connect", host=self.host, port=self.port, generation=generation,
                       duration_ms=now_ms() - started)
        conn.closed.add_done_callback(lambda _: telemetry.emit(
            "disconnect", host=self.host, port=self.port, generation=generation))

    async def call(self, command: dict[str, Any], timeout: float | None = None) -> Reply:
        if self.telemetry is not None:
            return await self._observed_call(command, timeout, self.telemetry)
        return checked(await self._reply(command, timeout), command)

    async def _reply(self, command: dict[str, Any], timeout: float | None, telemetry: Telemetry | None = None,
                     ) -> Reply:
        """The reply of ``command``, ``ok`` or not."""
        conn = await self.connection()
        try:
            future = conn.request_nowait(command)
        except (TypeError, ValueError, OverflowError) as exc:
            if telemetry is not None:
                telemetry.emit("error", operation="serialize", error=str(exc))
            raise SerializationError(f"cannot pack {command.get('cmd')}: {exc}") from exc
        except ConnectionError as exc:
            if telemetry is not None:
                telemetry.emit("error", operation="write", error=str(exc))
            raise ConnectionClosedError(str(exc)) from exc
        try:
            async with asyncio.timeout(self.command_timeout if timeout is None else timeout):
                return await future
        except TimeoutError:
            if telemetry is not None:
                telemetry.emit("command_timeout", cmd=command.get("cmd"), req_id=command.get("reqId"))
            raise CommandTimeoutError(f"no reply to {command.get('cmd')} within the timeout") from None
        except ConnectionError as exc:
            raise ConnectionClosedError(str(exc)) from exc

    async def _observed_call(self, command: dict[str, Any], timeout: float | None, telemetry: Telemetry) -> Reply:
        # The transport numbers the request itself, so that its events can name it.
        self.last_req_id += 1
        command = {**command, "reqId": str(self.last_req_id)}
        started = now_ms()
        reply = await self._reply(command, timeout, telemetry)
        telemetry.emit("command", cmd=command.get("cmd"), req_id=command["reqId"], duration_ms=now_ms() - started,
                       ok=bool(reply.get("ok")))
        return checked(reply, command)

    async def subscribe(self, queue: str, on_event: EventCallback) -> Subscription:
        stream = TcpEventStream(self, queue, on_event)
        await stream.ready.wait()
        if stream.error is not None:
            raise stream.error
        return stream

    async def close(self) -> None:
        self.closed = True
        for task in list(self.opening.values()):
            task.cancel()
        conns = [c for c in self.slots if c is not None]
        self.slots = [None] * len(self.slots)
        for conn in conns:
            await conn.close()


class TcpEventStream:
    """A connection of its own subscribed to one queue's events; subscribes again after a reconnect."""

    def __init__(self, transport: TcpTransport, queue: str, on_event: EventCallback) -> None:
        self.transport = transport
        self.queue = queue
        self.on_event = on_event
        self.ready = asyncio.Event()
        self.error: BaseException | None = None
        self.conn: Connection | None = None
        self.task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        t = self.transport
        failures = 0
        while True:
            try:
                self.conn = await connect(t.host, t.port, token=t.token, timeout=t.connect_timeout, ssl=t.ssl)
                checked(await self.conn.request({"cmd": "SubscribeEvents", "queue": self.queue}), {})
                failures = 0
                self.ready.set()
                await self._read(self.conn)
            except asyncio.CancelledError:
                raise
            except (AuthenticationError, RemoteCommandError) as exc:
                self.error = exc
                self.ready.set()
                return
            except (TimeoutError, OSError):
                pass
            await asyncio.sleep(RECONNECT_BACKOFF_S[min(failures, len(RECONNECT_BACKOFF_S) - 1)])
            failures += 1

    async def _read(self, conn: Connection) -> None:
        events = conn.events
        closed = conn.closed
        while not closed.done():
            getter = asyncio.ensure_future(events.get())
            await asyncio.wait((getter, closed), return_when=asyncio.FIRST_COMPLETED)
            if not getter.done():
                getter.cancel()
                return
            frame = getter.result()
            if type(frame) is dict and frame.get("type") == "event" and type(frame.get("event")) is dict:
                self.on_event(frame["event"])

    async def close(self) -> None:
        self.task.cancel()
        try:
            await self.task
        except (asyncio.CancelledError, Exception):  # noqa: BLE001 - closing
            pass
        if self.conn is not None:
            await self.conn.close()
