"""Server-Sent Events (`/events`, `/events/queues/:q`) and the WebSocket channel (`/ws`, `/ws/queues/:q`).

Both hang off one `EventFeed`, which the broker's event hub calls for every job event and every system
event (`client:connected`, `queue:created`, ...), but only while a stream or socket is open. Job events
also schedule a `queue:counts` snapshot of their queue, coalesced over 10 ms as the original does. SSE
messages carry one id counter per server and the last 1000 job events are kept for `Last-Event-ID`
replay. A WebSocket runs any protocol command through the shared runner (its pulled jobs belong to it and
return when it closes) and receives either every job event of its filter as the raw event object, or,
after `Subscribe`, the named events only.
"""
from __future__ import annotations

import asyncio
import inspect
import json
import logging
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from aiohttp import WSMsgType, web

from bunqueue import errors
from bunqueue.broker.components import eventnames
from bunqueue.server.http.encoding import dumps
from bunqueue.server.ratelimit import RequestRateLimiter
from bunqueue.server.runner import CommandRunner

log = logging.getLogger("bunqueue")

Event = dict[str, Any]
MAX_CLIENTS = 1000
REPLAY_EVENTS = 1000
WS_MAX_MESSAGE = 1024 * 1024
WS_IDLE_TIMEOUT_S = 120.0
HEARTBEAT_S = 30.0
COUNTS_DELAY_S = 0.010
# The fields of a `queue:counts` event, in the original's order, as GetJobCounts names them.
COUNTS_FIELDS = ("waiting", "prioritized", "active", "completed", "failed", "delayed")
# How a job event's type reads on a stream: a pulled job is "active" there.
STREAM_NAMES = {"pulled": "active"}
EVENT_FIELDS = ("error", "progress", "prev", "delay")
# Of those, the ones a subscribed socket gets only when set (not empty), as the original tests them.
SET_FIELDS = ("error", "prev")
# The periodic events and their periods in seconds, as the original sends them to every open stream.
PERIODIC_S = ((eventnames.STATS_SNAPSHOT, 5.0), (eventnames.HEALTH_STATUS, 10.0), (eventnames.STORAGE_STATUS, 30.0))


def stream_name(event: Event) -> str:
    kind = str(event.get("eventType"))
    return f"job:{STREAM_NAMES.get(kind, kind)}"


def sse_data(event: Event) -> Event:
    data: Event = {"queue": event.get("queue"), "jobId": event.get("jobId"), "timestamp": event.get("timestamp")}
    for name in EVENT_FIELDS:
        if name in event:
            data[name] = event[name]
    return data


def socket_data(event: Event) -> Event:
    """A job event's data for a subscribed socket."""
    data: Event = {"queue": event.get("queue"), "jobId": event.get("jobId")}
    for name in EVENT_FIELDS:
        if name in event and (name not in SET_FIELDS or event[name]):
            data[name] = event[name]
    return data


class SseClient:
    __slots__ = ("queue", "response")

    def __init__(self, response: web.StreamResponse, queue: str | None) -> None:
        self.response = response
        self.queue = queue


class WsClient:
    """A WebSocket as the command runner sees it (see `server.commands.Client`)."""

    __slots__ = ("closed", "limiter", "queue", "session", "socket", "subscribed", "tasks")

    def __init__(self, socket: web.WebSocketResponse, runner: CommandRunner, queue: str | None) -> None:
        self.socket = socket
        self.session = runner.new_session()
        self.session.authenticated = True
        self.limiter: RequestRateLimiter | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.closed = False
        self.queue = queue
        # The names and patterns Subscribe added, in order (a dict as an ordered set), or None before any.
        self.subscribed: dict[str, None] | None = None

    def deliver(self, replies: list[dict[str, Any]]) -> None:
        for reply in replies:
            self.send(reply)

    def send(self, doc: Any) -> None:
        if not self.closed:
            asyncio.ensure_future(self.socket.send_str(dumps(doc)))

    def task_done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)

    def wants(self, name: str) -> bool:
        return self.subscribed is not None and eventnames.matches(name, self.subscribed)


class EventFeed:
    def __init__(self, runner: CommandRunner, origin: str) -> None:
        self.runner = runner
        self.broker = runner.broker
        self.origin = origin
        self.streams: set[SseClient] = set()
        self.sockets: set[WsClient] = set()
        self.next_id = 0
        self.replay: deque[tuple[int, str | None, str]] = deque(maxlen=REPLAY_EVENTS)
        # Queues whose job events since the last `queue:counts` round want a snapshot, in order of change.
        self.counts_due: dict[str, None] = {}
        self.counts_timer: asyncio.TimerHandle | None = None
        # The periodic events' timers, running only while a stream or socket is open.
        self.periodic: dict[str, asyncio.TimerHandle] = {}

    @property
    def listening(self) -> bool:
        return bool(self.streams or self.sockets)

    def joined(self) -> None:
        # The hub calls the feed only while a stream or socket is open, so jobs pay nothing otherwise.
        if self.broker.listen_all(self.job_event, self.system_event):
            for name, period in PERIODIC_S:
                self.schedule_periodic(name, period)

    def left(self) -> None:
        if not self.listening:
            self.broker.unlisten_all(self.job_event, self.system_event)
            self.stop_periodic()

    # -- events in ---------------------------------------------------------------------------------

    def job_event(self, event: Event) -> None:
        """Called by the event hub for every job event (only while a stream or socket is open)."""
        name = stream_name(event)
        queue = event.get("queue")
        if self.streams:
            self.next_id += 1
            message = f"id: {self.next_id}\nevent: {name}\ndata: {dumps(sse_data(event))}\n\n"
            self.replay.append((self.next_id, queue, message))
            for client in self.streams:
                if not client.queue or client.queue == queue:
                    self.write(client, message)
        for socket in self.sockets:
            if socket.subscribed is None:
                if not socket.queue or socket.queue == queue:
                    socket.send(event)
            elif socket.wants(name):
                socket.send({"event": name, "ts": event.get("timestamp"), "data": socket_data(event)})
        if queue is not None:
            self.counts_due[queue] = None
            if self.counts_timer is None:
                self.counts_timer = asyncio.get_running_loop().call_later(COUNTS_DELAY_S, self.send_counts)

    def send_counts(self) -> None:
        """One `queue:counts` per queue that changed since the last round."""
        self.counts_timer = None
        due, self.counts_due = self.counts_due, {}
        if not self.listening:
            return
        for queue in due:
            self.when_read(self.broker.job_counts(queue, split_paused=False), partial(self.send_queue_counts, queue))

    def send_queue_counts(self, queue: str, counts: dict[str, int]) -> None:
        data: Event = {"queue": queue}
        for name in COUNTS_FIELDS:
            data[name] = counts.get(name, 0)
        self.system_event("queue:counts", data)

    def when_read(self, reading: Any, then: Callable[[Any], None]) -> None:
        """``then(reading)`` now, or once it is read when the engine answers after a round trip (the
        PostgreSQL engine's readings are coroutines)."""
        if inspect.isawaitable(reading):
            asyncio.ensure_future(self._after(reading, then))
        else:
            then(reading)

    async def _after(self, reading: Awaitable[Any], then: Callable[[Any], None]) -> None:
        try:
            value = await reading
        except Exception as exc:
            log.warning("a stream event was not sent: %s", exc)
            return
        if self.listening:
            then(value)

    def schedule_periodic(self, name: str, period: float) -> None:
        self.periodic[name] = asyncio.get_running_loop().call_later(period, self.send_periodic, name, period)

    def stop_periodic(self) -> None:
        for handle in self.periodic.values():
            handle.cancel()
        self.periodic.clear()

    def send_periodic(self, name: str, period: float) -> None:
        """One periodic event, built only if an open stream or a subscribed socket takes it; each kind of
        client is told its own connection count in ``health:status``, as the original's two handlers do."""
        self.schedule_periodic(name, period)
        sockets = any(socket.wants(name) for socket in self.sockets)
        if not (self.streams or sockets):
            return
        broker = self.broker
        if name == eventnames.HEALTH_STATUS:
            if self.streams:
                self.when_read(broker.health_snapshot("sse", len(self.streams)),
                               lambda data: self.send_streams(name, data))
            if sockets:
                self.when_read(broker.health_snapshot("ws", len(self.sockets)),
                               lambda data: self.send_sockets(name, data))
            return
        data = broker.stats_snapshot() if name == eventnames.STATS_SNAPSHOT else broker.storage_snapshot()
        self.when_read(data, lambda data: self.system_event(name, data))

    def system_event(self, name: str, data: Event) -> None:
        """Called by the event hub for every system event (only while a stream or socket is open)."""
        if self.streams:
            self.send_streams(name, data)
        self.send_sockets(name, data)

    def send_streams(self, name: str, data: Event) -> None:
        self.next_id += 1
        message = f"id: {self.next_id}\nevent: {name}\ndata: {dumps(data)}\n\n"
        for client in self.streams:
            self.write(client, message)

    def send_sockets(self, name: str, data: Event) -> None:
        for socket in self.sockets:
            if socket.wants(name):
                socket.send({"event": name, "ts": self.broker.clock(), "data": data})

    def write(self, client: SseClient, message: str) -> None:
        asyncio.ensure_future(self._write(client, message))

    async def _write(self, client: SseClient, message: str) -> None:
        try:
            await client.response.write(message.encode())
        except (ConnectionError, RuntimeError):
            self.streams.discard(client)
            self.left()

    # -- SSE ---------------------------------------------------------------------------------------

    async def sse(self, request: web.BaseRequest, queue: str | None) -> web.StreamResponse:
        if len(self.streams) >= MAX_CLIENTS:
            return web.Response(text="Too many SSE connections", status=503)
        response = web.StreamResponse(headers={
            "Content-Type": "text/event-stream", "Cache-Control": "no-cache", "Connection": "keep-alive",
            "Access-Control-Allow-Origin": self.origin})
        await response.prepare(request)
        hello = json.dumps({"connected": True, "clientId": str(uuid.uuid4())})
        await response.write(f"retry: 3000\ndata: {hello}\n\n".encode())
        client = SseClient(response, queue)
        last = request.headers.get("Last-Event-ID", "")
        if last.isdigit() and int(last) > 0:
            for event_id, event_queue, message in list(self.replay):
                if event_id > int(last) and (not queue or queue == event_queue):
                    await response.write(message.encode())
        self.streams.add(client)
        self.joined()
        try:
            while not (request.transport is None or request.transport.is_closing()):
                await asyncio.sleep(HEARTBEAT_S)
                await response.write(b":heartbeat\n\n")
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self.streams.discard(client)
            self.left()
        return response

    # -- WebSocket ---------------------------------------------------------------------------------

    async def websocket(self, request: web.BaseRequest, queue: str | None, on_text: Callable[[WsClient, str], None],
                        ) -> web.StreamResponse:
        if len(self.sockets) >= MAX_CLIENTS:
            return web.json_response({"ok": False, "error": "Too many WebSocket connections"}, status=503)
        socket = web.WebSocketResponse(max_msg_size=WS_MAX_MESSAGE, receive_timeout=WS_IDLE_TIMEOUT_S)
        if not socket.can_prepare(request).ok:
            return web.Response(text="WebSocket upgrade failed", status=400)
        await socket.prepare(request)
        client = WsClient(socket, self.runner, queue)
        self.sockets.add(client)
        self.joined()
        try:
            async for message in socket:
                if message.type == WSMsgType.TEXT:
                    on_text(client, message.data)
                elif message.type == WSMsgType.ERROR:
                    break
        except (TimeoutError, asyncio.CancelledError):
            pass
        finally:
            client.closed = True
            self.sockets.discard(client)
            self.left()
            self.runner.release(client)
        return socket

    def handle_text(self, client: WsClient, text: str) -> None:
        try:
            request = json.loads(text)
        except ValueError:
            client.send({"ok": False, "error": "Invalid JSON"})
            return
        if not isinstance(request, dict) or not request.get("cmd"):
            client.send({"ok": False, "error": "Invalid command"})
            return
        name = request["cmd"]
        if name in ("Subscribe", "Unsubscribe"):
            client.send(self.subscription(client, request))
            return
        reply = self.runner.run(request, client)
        if reply is not None:
            client.send(reply)

    def subscription(self, client: WsClient, request: dict[str, Any]) -> dict[str, Any]:
        events = request.get("events")
        reply: dict[str, Any]
        if request["cmd"] == "Subscribe":
            if not isinstance(events, list) or not events:
                reply = {"ok": False, "error": errors.EVENTS_NOT_EMPTY_ARRAY}
            else:
                # Only the original's fixed names and patterns, compared exactly (not as wildcards).
                unknown = [e for e in events if type(e) is not str or e not in eventnames.SUBSCRIBABLE]
                if unknown:
                    reply = {"ok": False, "error": errors.invalid_subscriptions(unknown)}
                else:
                    if client.subscribed is None:
                        client.subscribed = {}
                    client.subscribed.update(dict.fromkeys(events))
                    reply = {"ok": True, "subscribed": list(client.subscribed)}
        else:
            if client.subscribed is not None:
                if isinstance(events, list) and events:
                    for event in events:
                        if isinstance(event, str):
                            client.subscribed.pop(event, None)
                else:
                    client.subscribed.clear()
            reply = {"ok": True, "subscribed": list(client.subscribed or ())}
        if "reqId" in request:
            reply["reqId"] = request["reqId"]
        return reply

    async def close(self) -> None:
        if self.counts_timer is not None:
            self.counts_timer.cancel()
            self.counts_timer = None
        self.stop_periodic()
        for socket in list(self.sockets):
            await socket.socket.close()
        for client in list(self.streams):
            client.response.force_close()
