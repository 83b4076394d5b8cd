# cython: freethreading_compatible = False
"""One HTTP/1.1 connection, read by ``RequestReader`` and answered by ``HttpApi`` in the order requests came.

Most requests are answered in the call that parsed them: no task, no request or response object beyond
two small ones. A request whose answer waits (a long-poll, a change that must reach the disk first) gets
a task, and the requests pipelined behind it wait their turn. A stream (`/ws...`, `/events...`) hands the
connection, with the request's bytes, to the stream handler (aiohttp, loaded by the first stream).

Compiled: a keep-alive request's way from the socket to the answer written is a handful of C calls, where
the same steps in Python were a third of a health probe's time in the server.
"""
import asyncio
import json
import logging
from collections import deque

from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

from bunqueue import errors
from bunqueue._core.httprequest cimport HttpRequest, RequestReader
from bunqueue._core.httpresponse cimport HttpResponse

from bunqueue._core.httprequest import PARSED, UPGRADED
from bunqueue._core.httpresponse import TEXT_TYPE
from bunqueue.server.http.api import STREAM

log = logging.getLogger("bunqueue.http")

MAX_BODY_BYTES = 64 * 1024 * 1024
# The request line and headers together (Bun allows 16 KiB); the body does not count. A read is parsed
# this much at a time, so what the parser holds of an unfinished header grows by at most this per step.
MAX_HEAD_BYTES = 64 * 1024
# Parsed requests waiting behind one that is being answered before the connection stops reading.
MAX_PIPELINED = 32
# An idle keep-alive connection is closed after this long (aiohttp's default).
KEEPALIVE_S = 75.0
# After its last answer, how long a connection reads (and drops) what the client still sends.
LINGER_S = 2.0
INTERNAL_ERROR = json.dumps({"ok": False, "error": errors.INTERNAL_ERROR}, separators=(",", ":")).encode()


def text_answer(int status, str text):
    return HttpResponse(status, text.encode(), TEXT_TYPE)


# The answers that refuse a request the reader could not take, by status.
REFUSALS = {
    400: text_answer(400, "Bad Request"),
    413: text_answer(413, "Request Entity Too Large"),
    431: text_answer(431, "Request Header Fields Too Large"),
}
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


cdef double monotonic():
    """The loop's clock (CLOCK_MONOTONIC, as ``loop.time()``), without a call into the loop."""
    cdef timespec now
    clock_gettime(CLOCK_MONOTONIC, &now)
    return now.tv_sec + now.tv_nsec * 1e-9


cdef class HttpConnection:
    """An asyncio protocol (the loop calls its methods by name)."""

    def __init__(self, listener, api):
        self.listener = listener
        self.api = api
        self.loop = asyncio.get_running_loop()
        self.transport = None
        self.queue = deque()
        self.reader = RequestReader(self.queue, MAX_HEAD_BYTES, MAX_BODY_BYTES)
        self.waiting = None
        self.final = None
        self.closing = False
        self.streaming = None
        self.paused = False
        self.write_paused = False
        self.ended = False
        self.linger = None
        self.last_seen = monotonic()
        self.idle_timer = None

    # -- transport ---------------------------------------------------------------------------------

    def connection_made(self, transport):
        self.transport = transport
        self.listener.connections.add(self)
        self.idle_timer = self.loop.call_later(KEEPALIVE_S, self.check_idle)

    def connection_lost(self, exc):
        self.transport = None
        self.listener.connections.discard(self)
        if self.idle_timer is not None:
            self.idle_timer.cancel()
        if self.linger is not None:
            self.linger.cancel()
        if self.waiting is not None:
            # The client went away before the answer: what it waits for stops with it.
            self.waiting.cancel()
        self.queue.clear()

    def pause_writing(self):
        self.write_paused = True
        self.update_reading()

    def resume_writing(self):
        self.write_paused = False
        self.update_reading()

    def eof_received(self):
        return None

    cdef update_reading(self):
        transport = self.transport
        if transport is None or self.streaming is not None or self.ended:
            return
        cdef bint pause = self.write_paused or len(self.queue) >= MAX_PIPELINED
        if pause != self.paused:
            self.paused = pause
            if pause:
                transport.pause_reading()
            else:
                transport.resume_reading()

    def data_received(self, data):
        self.last_seen = monotonic()
        if self.streaming is not None:
            self.streaming.rest += data
            return
        if self.ended or self.final is not None:
            return
        cdef Py_ssize_t size = len(data), start
        if size <= MAX_HEAD_BYTES:
            self.feed(data, data, 0)
        else:
            view = memoryview(data)
            for start in range(0, size, MAX_HEAD_BYTES):
                if not self.feed(view[start:start + MAX_HEAD_BYTES], data, start):
                    break
        self.answer_queued()

    cdef bint feed(self, object piece, object data, Py_ssize_t start) except -1:
        """Parse ``piece``, which starts at ``start`` in ``data``; whether parsing goes on."""
        reader = self.reader
        outcome = reader.feed(piece)
        if reader.continues:
            # Each request that asked for it hears "go on" before its answer (not one refused meanwhile).
            if self.transport is not None and not reader.refused:
                self.transport.write(CONTINUE * reader.continues)
            reader.continues = 0
        if outcome == PARSED:
            return True
        if outcome == UPGRADED:
            # Only a stream may take the connection over; any other request is answered, then it closes.
            if self.queue:
                (<HttpRequest>self.queue[-1]).rest = data[start + reader.upgrade_at:]
            self.final = REFUSALS[400] if not self.queue else None
            self.closing = True
            return False
        self.final = self.final or REFUSALS[reader.refused]
        return False

    def check_idle(self):
        """Close a connection that has had nothing to do for ``KEEPALIVE_S``."""
        self.idle_timer = None
        transport = self.transport
        if transport is None or self.streaming is not None:
            return
        idle_for = monotonic() - self.last_seen
        if idle_for >= KEEPALIVE_S and not self.queue and self.waiting is None:
            transport.close()
        else:
            self.idle_timer = self.loop.call_later(max(KEEPALIVE_S - idle_for, 1.0), self.check_idle)

    # -- answers -----------------------------------------------------------------------------------

    cdef answer_queued(self):
        """Answer what was parsed, in order, until an answer has to wait."""
        queue = self.queue
        cdef HttpRequest request
        while queue and self.waiting is None and self.writable():
            request = queue.popleft()
            try:
                answer = self.api.handle(request)
            except Exception:
                log.exception("HTTP request failed")
                answer = HttpResponse(500, INTERNAL_ERROR)
            if type(answer) is HttpResponse:
                self.write(request, <HttpResponse>answer)
            elif answer is STREAM:
                self.hand_over(request)
                return
            else:
                self.waiting = self.loop.create_task(self.answer_later(request, answer))
        # A keep-alive connection has neither a final answer nor a close to make.
        if (self.final is not None or self.closing) and self.waiting is None and self.writable():
            if self.final is not None:
                self.write(None, self.final)
            elif self.closing and not queue:
                self.end()
        if self.paused != (self.write_paused or len(queue) >= MAX_PIPELINED):
            self.update_reading()

    cdef bint writable(self) except -1:
        """Whether answers can still be written (not after the last one, nor once the connection closes)."""
        return not self.ended and self.transport is not None and not self.transport.is_closing()

    async def answer_later(self, HttpRequest request, pending):
        try:
            answer = await pending
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("HTTP request failed")
            answer = HttpResponse(500, INTERNAL_ERROR)
        self.waiting = None
        self.last_seen = monotonic()
        if self.writable():
            self.write(request, answer)
            self.answer_queued()

    cdef write(self, HttpRequest request, HttpResponse answer):
        transport = self.transport
        cdef bint keep_alive = (request is not None and request.keep_alive and not self.closing
                                and not self.listener.closing)
        if request is None:
            transport.write(answer.message(keep_alive, "1.1", True))
        else:
            transport.write(answer.message(keep_alive, request.version, request.method != "HEAD"))
        if not keep_alive:
            self.end()

    cdef end(self):
        """Close after the last answer: the write side at once, the connection when the client closes its
        side or after ``LINGER_S``. What the client still sends meanwhile is read and dropped: bytes left
        unread would make the kernel reset the connection, and a reset can destroy the answer in flight."""
        transport = self.transport
        self.ended = True
        self.queue.clear()
        if not transport.can_write_eof():
            transport.close()
            return
        transport.write_eof()
        if self.paused:
            self.paused = False
            transport.resume_reading()
        self.linger = self.loop.call_later(LINGER_S, transport.close)

    cdef hand_over(self, HttpRequest request):
        """Give the connection to the stream handler, which reads ``request`` again from its bytes."""
        self.streaming = request
        self.queue.clear()
        if self.idle_timer is not None:
            self.idle_timer.cancel()
            self.idle_timer = None
        if self.paused:
            self.paused = False
            self.transport.resume_reading()
        self.listener.with_stream_server(self.take_over)

    def take_over(self, server):
        transport = self.transport
        request = self.streaming
        if transport is None or request is None:
            return
        if server is None:
            transport.close()
            return
        self.listener.connections.discard(self)
        handler = server()
        transport.set_protocol(handler)
        handler.connection_made(transport)
        handler.data_received(request.raw())

    def close_if_idle(self):
        """At shutdown: close now unless a request is being answered (then after its answer)."""
        if self.transport is None:
            return
        if self.waiting is None and not self.queue:
            self.transport.close()
        else:
            self.closing = True
