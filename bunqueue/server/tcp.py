"""The TCP listener: framing, the auth gate, rate limits and backpressure. No job rules here.

One ``asyncio.Protocol`` per connection. Commands that can answer at once are handled inline as their
frame is cut, and all replies of one read go out in one write; only a command that waits (a long-poll
pull) becomes a task, and at most ``MAX_IN_FLIGHT`` of them run per connection.
"""
from __future__ import annotations

import asyncio
import hmac
import logging
from collections import deque
from collections.abc import Awaitable
from typing import Any, Protocol

from bunqueue import errors
from bunqueue._core.framing import FrameReader, FrameTooLarge
from bunqueue._core.packer import ReplyPacker
from bunqueue.broker.broker import Broker
from bunqueue.broker.session import Session
from bunqueue.commands import HANDLERS
from bunqueue.config import Settings
from bunqueue.errors import CommandError
from bunqueue.server.codec import BadFrame, decode_command
from bunqueue.server.ratelimit import RequestRateLimiter
from bunqueue.storage import Store

log = logging.getLogger("bunqueue.tcp")

MAX_IN_FLIGHT = 50
# Reading pauses while this much is queued for a slow reader; the connection is dropped at the hard limit.
WRITE_HIGH_WATER = 4 * 1024 * 1024


class BrokerServer(Protocol):
    """What a connection uses of the running server (``bunqueue.server.app.BrokerServer``)."""

    broker: Broker
    settings: Settings
    packer: ReplyPacker
    store: Store
    tokens: Any
    connections: set[BrokerProtocol]

    def authenticate(self, token: Any, session: Session) -> dict[str, Any]: ...


class BrokerProtocol(asyncio.Protocol):
    def __init__(self, server: BrokerServer) -> None:
        self.server = server
        self.broker = server.broker
        self.settings = server.settings
        self.reader = FrameReader(errors.MAX_FRAME_BYTES)
        self.packer: ReplyPacker = server.packer
        self.store = server.store
        # Replies held until the commit that makes their change durable: ticket -> replies.
        self.deferred: dict[asyncio.Future[str | None], list[dict[str, Any]]] = {}
        self.session = Session(authenticated=not server.tokens)
        limit = self.settings.rate_limit_max_requests
        self.limiter = RequestRateLimiter(limit, self.settings.rate_limit_window_ms) if limit > 0 else None
        self.transport: asyncio.Transport | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        # Frames that arrived while MAX_IN_FLIGHT commands were waiting: handled in order as slots free.
        self.backlog: deque[bytes] = deque()
        self.partial_timer: asyncio.TimerHandle | None = None
        # Event frames for this client, written together at the end of the loop turn that made them.
        self.outbox: list[dict[str, Any]] = []
        self.closed = False

    # -- connection lifecycle ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, though they have its methods.
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)  # type: ignore[attr-defined]
        self.transport = transport  # type: ignore[assignment]
        self.session.deliver = self.deliver_event
        self.server.connections.add(self)
        self.broker.counters.connections += 1

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.broker.counters.connections -= 1
        self.server.connections.discard(self)
        if self.partial_timer is not None:
            self.partial_timer.cancel()
        for task in self.tasks:
            task.cancel()
        self.backlog.clear()
        self.broker.release_session(self.session)

    def pause_writing(self) -> None:
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.resume_reading()

    # -- frames ------------------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        out: list[dict[str, Any]] = []
        try:
            frames = self.reader.feed(data)
        except FrameTooLarge as exc:
            for body in exc.frames:
                self.handle_frame(body, out)
            out.append({"ok": False, "error": errors.frame_too_large(exc.length)})
            self.write(out)
            if self.transport is not None:
                self.transport.close()
            return
        if self.backlog or len(self.tasks) >= MAX_IN_FLIGHT:
            self.backlog.extend(frames)
        else:
            for i, body in enumerate(frames):
                if len(self.tasks) >= MAX_IN_FLIGHT:
                    self.backlog.extend(frames[i:])
                    break
                self.handle_frame(body, out)
        if out:
            self.write(out)
        self.watch_partial_frame()

    def handle_frame(self, body: bytes, out: list[dict[str, Any]]) -> None:
        session = self.session
        session.frame_size = len(body)
        try:
            cmd = decode_command(body)
        except BadFrame as exc:
            out.append({"ok": False, "error": exc.message})
            return
        req_id = cmd.get("reqId")
        reply = self.dispatch(cmd, session)
        if type(reply) is not dict:
            self.spawn(reply, req_id)
            return
        if req_id is not None:
            reply["reqId"] = req_id
        ticket = self.store.take_ticket()
        if ticket is None:
            out.append(reply)
        else:
            self.defer(ticket, reply)

    def dispatch(self, cmd: dict[str, Any], session: Session) -> Any:
        if self.limiter is not None and not self.limiter.allow():
            return {"ok": False, "error": errors.RATE_LIMIT_EXCEEDED}
        name = cmd.get("cmd")
        if name is None or name == "":
            return {"ok": False, "error": errors.INVALID_COMMAND}
        if name == "Auth":
            return self.server.authenticate(cmd.get("token"), session)
        if not session.authenticated:
            return {"ok": False, "error": errors.NOT_AUTHENTICATED}
        handler = HANDLERS.get(name) if type(name) is str else None
        if handler is None:
            return {"ok": False, "error": errors.unknown_command(name)}
        try:
            return handler(self.broker, cmd, session)
        except CommandError as exc:
            return {"ok": False, "error": exc.message}
        except Exception:
            log.exception("command %s failed", name)
            return {"ok": False, "error": errors.INTERNAL_ERROR}

    # -- waiting commands --------------------------------------------------------------------------

    def spawn(self, pending: Awaitable[dict[str, Any]], req_id: Any) -> None:
        task = asyncio.get_running_loop().create_task(self.reply_later(pending, req_id))
        self.tasks.add(task)
        task.add_done_callback(self.task_done)

    async def reply_later(self, pending: Awaitable[dict[str, Any]], req_id: Any) -> None:
        try:
            reply = await pending
        except CommandError as exc:
            reply = {"ok": False, "error": exc.message}
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("waiting command failed")
            reply = {"ok": False, "error": errors.INTERNAL_ERROR}
        if req_id is not None:
            reply["reqId"] = req_id
        ticket = self.store.take_ticket()
        if ticket is not None:
            self.defer(ticket, reply)
        elif not self.closed:
            self.write([reply])

    def deliver_event(self, frame: dict[str, Any]) -> None:
        if self.closed:
            return
        self.outbox.append(frame)
        if len(self.outbox) == 1:
            asyncio.get_running_loop().call_soon(self.flush_events)

    def flush_events(self) -> None:
        frames, self.outbox = self.outbox, []
        if frames and not self.closed:
            self.write(frames)

    def defer(self, ticket: asyncio.Future[str | None], reply: dict[str, Any]) -> None:
        held = self.deferred.get(ticket)
        if held is None:
            self.deferred[ticket] = [reply]
            ticket.add_done_callback(self.committed)
        else:
            held.append(reply)

    def committed(self, ticket: asyncio.Future[str | None]) -> None:
        replies = self.deferred.pop(ticket, [])
        failure = ticket.result()
        if failure is not None:
            # The change is kept and retried, but it is not durable yet: say so rather than acknowledge.
            replies = [_failed(reply, failure) for reply in replies]
        if not self.closed:
            self.write(replies)

    def task_done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if not self.backlog or self.closed:
            return
        out: list[dict[str, Any]] = []
        while self.backlog and len(self.tasks) < MAX_IN_FLIGHT:
            self.handle_frame(self.backlog.popleft(), out)
        if out:
            self.write(out)

    # -- writing -----------------------------------------------------------------------------------

    def write(self, replies: list[dict[str, Any]]) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        try:
            data = self.packer.frames(replies)
        except (TypeError, ValueError, OverflowError):
            # A reply that cannot be encoded (a result nested too deeply, say) must not cost the others.
            log.exception("a reply could not be encoded")
            data = self.packer.frames([self.encodable(reply) for reply in replies])
        transport.write(data)
        limit = self.settings.tcp_max_write_queue_bytes
        if limit and transport.get_write_buffer_size() > limit:
            log.warning("closing a connection whose unsent replies exceed %d bytes", limit)
            transport.abort()

    def encodable(self, reply: dict[str, Any]) -> dict[str, Any]:
        try:
            self.packer.pack(reply)
            return reply
        except (TypeError, ValueError, OverflowError):
            failed = {"ok": False, "error": errors.INTERNAL_ERROR}
            if "reqId" in reply:
                failed["reqId"] = reply["reqId"]
            return failed

    def watch_partial_frame(self) -> None:
        """Close a connection that leaves a frame half-sent for longer than the idle timeout."""
        timeout = self.settings.tcp_idle_timeout_ms
        if not timeout:
            return
        if self.reader.buffered:
            if self.partial_timer is None:
                self.partial_timer = asyncio.get_running_loop().call_later(
                    timeout / 1000.0, self.partial_frame_expired
                )
        elif self.partial_timer is not None:
            self.partial_timer.cancel()
            self.partial_timer = None

    def partial_frame_expired(self) -> None:
        self.partial_timer = None
        if self.transport is not None and self.reader.buffered:
            log.info("closing a connection idle in the middle of a frame")
            self.transport.abort()


def _failed(reply: dict[str, Any], error: str) -> dict[str, Any]:
    failed: dict[str, Any] = {"ok": False, "error": error}
    if "reqId" in reply:
        failed["reqId"] = reply["reqId"]
    return failed


def check_token(token: Any, tokens: frozenset[str]) -> bool:
    if type(token) is not str:
        return False
    given = token.encode()
    # Constant-time compare against every token, so timing tells nothing about which one nearly matched.
    found = False
    for candidate in tokens:
        if hmac.compare_digest(given, candidate.encode()):
            found = True
    return found
