"""The TCP listener: length-prefixed frames in, length-prefixed replies out, and backpressure.

One ``asyncio.Protocol`` per connection. Each frame goes to the ``CommandRunner`` as it is cut; replies
that are ready at once are packed together, up to ``PACK_BATCH`` at a time, so a read burst of small
replies costs one packing call and one write. While the client does not read (the transport's buffer is
above its high-water mark) frame handling and reading pause: a connection's memory stays bounded by the
high-water mark plus one batch of replies, however much the client pipelines. Frames beyond ``MAX_IN_FLIGHT`` waiting
commands wait their turn in a backlog, and reading pauses too once that holds ``BACKLOG_LIMIT`` bytes.
"""
from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any

from bunqueue import errors
from bunqueue._core.framing import FrameReader, FrameTooLarge
from bunqueue._core.packer import ReplyPacker
from bunqueue.config import Settings
from bunqueue.server.ratelimit import RequestRateLimiter
from bunqueue.server.runner import CommandRunner, Reply, failed

log = logging.getLogger("bunqueue.tcp")

MAX_IN_FLIGHT = 50
# Frame handling pauses while this much is queued for a slow reader; the connection is dropped past
# ``tcp_max_write_queue_bytes``.
WRITE_HIGH_WATER = 4 * 1024 * 1024
# Reading also stops while this much of a client's frames waits for its turn (MAX_IN_FLIGHT commands
# waiting): a small backlog keeps reading, so a client that goes away is noticed at once.
BACKLOG_LIMIT = 1024 * 1024
# Replies ready at once are packed this many at a time, in one call (few enough that the replies packed
# before the client's backpressure is seen stay small, even when each is a PULLB of a thousand jobs)...
PACK_BATCH = 8
# ...and handed to the transport once the packed ones add up to this much, not only at the end of a read.
WRITE_CHUNK = 256 * 1024


class BrokerProtocol(asyncio.Protocol):
    # Slots: every frame reads several of these.
    __slots__ = (
        "backlog", "backlog_bytes", "chunked", "chunks", "closed", "connections", "limiter", "outbox", "packer",
        "partial_timer", "reader", "ready", "runner", "session", "settings", "tasks", "transport",
        "writing_paused",
    )

    def __init__(
        self,
        runner: CommandRunner,
        settings: Settings,
        packer: ReplyPacker,
        connections: set[BrokerProtocol],
    ) -> None:
        self.runner = runner
        self.settings = settings
        self.packer = packer
        self.connections = connections
        self.reader = FrameReader(errors.MAX_FRAME_BYTES)
        self.session = runner.new_session()
        limit = settings.rate_limit_max_requests
        self.limiter = RequestRateLimiter(limit, settings.rate_limit_window_ms) if limit > 0 else None
        self.transport: asyncio.Transport | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        # Frames cut but not handled yet, because the client stopped reading or too many commands wait.
        self.backlog: deque[bytes] = deque()
        self.backlog_bytes = 0
        self.writing_paused = False
        # Replies ready but not yet packed (at most ``PACK_BATCH``), then packed ones not yet written.
        self.ready: list[Reply] = []
        self.chunks: list[bytes] = []
        self.chunked = 0
        self.partial_timer: asyncio.TimerHandle | None = None
        # Event frames and replies of commands that waited, written together at the end of the loop turn that
        # made them.
        self.outbox: list[dict[str, Any]] = []
        self.closed = False

    # -- connection lifecycle ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, though they have its methods.
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)  # type: ignore[attr-defined]
        self.transport = transport  # type: ignore[assignment]
        self.session.deliver = self.deliver_event
        self.connections.add(self)
        self.announce("client:connected")

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.connections.discard(self)
        if self.partial_timer is not None:
            self.partial_timer.cancel()
        self.backlog.clear()
        self.backlog_bytes = 0
        self.outbox = []
        self.ready.clear()
        self.runner.release(self)
        self.announce("client:disconnected")

    def announce(self, name: str) -> None:
        """Tell the event streams (if any is open) that this connection came or went."""
        broker = self.runner.broker
        if broker.hears_system_events():
            broker.system_event(name, {"clientId": self.session.client_id(), "transport": "tcp"})

    def pause_writing(self) -> None:
        self.writing_paused = True
        self.throttle()

    def resume_writing(self) -> None:
        self.writing_paused = False
        if not self.closed:
            self.run_backlog()

    # -- frames ------------------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        try:
            frames = self.reader.feed(data)
        except FrameTooLarge as exc:
            if self.backlog or self.must_wait():
                self.postpone(exc.frames)
            else:
                self.run_frames(exc.frames)
            self.send([{"ok": False, "error": errors.frame_too_large(exc.length)}])
            if self.transport is not None:
                self.transport.close()
            return
        # ``must_wait``, inlined: this runs once for every read.
        if self.backlog or self.writing_paused or len(self.tasks) >= MAX_IN_FLIGHT or self.closed:
            self.postpone(frames)
        else:
            self.run_frames(frames)
        if self.reader.buffered or self.partial_timer is not None:
            self.watch_partial_frame()

    def run_frames(self, frames: list[bytes]) -> None:
        """Handle frames in order until the connection must wait; keep the rest in the backlog.

        The caller has checked ``must_wait``; that changes only when a command waits or replies are written.
        """
        runner = self.runner
        limiter = self.limiter
        allowed = len(frames) if limiter is None else limiter.allow_many(len(frames))
        ready = self.ready
        i = 0
        for body in frames:
            reply = runner.run_frame(body, self, i < allowed)
            i += 1
            if reply is None:
                if self.must_wait():
                    break
            else:
                ready.append(reply)
                if len(ready) >= PACK_BATCH and self.pack_ready() and self.must_wait():
                    break
        else:
            self.flush()
            return
        if limiter is not None and allowed > i:
            # Counted again when they run from the backlog.
            limiter.give_back(allowed - i)
        self.postpone(frames[i:])
        self.flush()

    def must_wait(self) -> bool:
        """Frames wait while the client does not read, too many commands wait, or the connection is gone."""
        return self.writing_paused or len(self.tasks) >= MAX_IN_FLIGHT or self.closed

    def run_backlog(self) -> None:
        backlog = self.backlog
        runner = self.runner
        limiter = self.limiter
        ready = self.ready
        while backlog and not self.must_wait():
            body = backlog.popleft()
            self.backlog_bytes -= len(body)
            reply = runner.run_frame(body, self, limiter is None or limiter.allow())
            if reply is not None:
                ready.append(reply)
                if len(ready) >= PACK_BATCH:
                    self.pack_ready()
        self.flush()
        self.throttle()

    def postpone(self, frames: list[bytes]) -> None:
        self.backlog.extend(frames)
        self.backlog_bytes += sum(map(len, frames))
        self.throttle()

    def throttle(self) -> None:
        """Read only while the client reads its replies and its waiting frames are few."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if self.writing_paused or self.backlog_bytes > BACKLOG_LIMIT:
            transport.pause_reading()
        else:
            transport.resume_reading()

    # -- replies that come later -------------------------------------------------------------------

    def deliver(self, replies: list[Reply]) -> None:
        """Replies of commands that waited, written with the event frames at the end of the loop turn: the
        commands one flush of the store answers finish together, and their replies go in one write."""
        if self.closed:
            return
        self.outbox.extend(replies)
        if len(self.outbox) == len(replies):
            asyncio.get_running_loop().call_soon(self.flush_events)

    def task_done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if not self.closed:
            self.run_backlog()

    def deliver_event(self, frame: dict[str, Any]) -> None:
        if self.closed:
            return
        self.outbox.append(frame)
        if len(self.outbox) == 1:
            asyncio.get_running_loop().call_soon(self.flush_events)

    def flush_events(self) -> None:
        frames, self.outbox = self.outbox, []
        if frames and not self.closed:
            self.send(frames)

    # -- writing -----------------------------------------------------------------------------------

    def send(self, replies: list[Reply]) -> None:
        self.ready.extend(replies)
        self.flush()

    def pack_ready(self) -> bool:
        """Pack the ready replies; write once the packed ones add up to ``WRITE_CHUNK``. True when it wrote
        (the client may have stopped reading since)."""
        data = self.pack(self.ready)
        self.chunks.append(data)
        self.chunked += len(data)
        if self.chunked >= WRITE_CHUNK:
            self.flush()
            return True
        return False

    def flush(self) -> None:
        """Write every ready reply in one call."""
        chunks = self.chunks
        if chunks:
            if self.ready:
                chunks.append(self.pack(self.ready))
            self.chunks = []
            self.chunked = 0
            data = b"".join(chunks)
        elif self.ready:
            # The usual case: the replies of one read, packed and written at once.
            data = self.pack(self.ready)
        else:
            return
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        transport.write(data)
        limit = self.settings.tcp_max_write_queue_bytes
        if limit and transport.get_write_buffer_size() > limit:
            log.warning("closing a connection whose unsent replies exceed %d bytes", limit)
            transport.abort()

    def pack(self, replies: list[Reply]) -> bytes:
        """The frames of ``replies`` in one bytes object; the list is emptied in place (the frame loops
        hold it)."""
        try:
            data = self.packer.frames(replies)
        except Exception:
            data = b"".join(map(self.pack_alone, replies))
        replies.clear()
        return data

    def pack_alone(self, reply: Reply) -> bytes:
        # A reply that cannot be encoded costs only itself: its client learns so under its reqId (always
        # encodable: the runner refuses any other).
        try:
            return self.packer.frame(reply)
        except Exception:
            log.warning("a reply could not be encoded", exc_info=True)
            return self.packer.frame(failed(reply, errors.REPLY_NOT_ENCODABLE))

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
