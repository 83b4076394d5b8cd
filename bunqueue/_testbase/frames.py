"""A raw-frame socket for byte-level tests, and the reply helper for client-level ones."""
from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgpack

if TYPE_CHECKING:
    from bunqueue.client import Connection


def frame(body: bytes) -> bytes:
    """``body`` behind its 4-byte big-endian length."""
    return struct.pack(">I", len(body)) + body


def _ext(code: int, data: bytes) -> Any:
    return "<undefined>" if code == 0 else msgpack.ExtType(code, data)


class RawClient:
    """A blocking socket that speaks frames, for tests that must control every byte."""

    def __init__(self, addr: tuple[str, int], timeout: float = 5.0) -> None:
        self.sock = socket.create_connection(addr, timeout=timeout)
        self.buf = b""

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, obj: Any) -> None:
        body = msgpack.packb(obj, use_bin_type=True)
        self.sock.sendall(frame(body))

    def raw_frame(self, deadline: float | None = None) -> bytes:
        """The next frame's body; by ``deadline`` (``time.monotonic()``) if given, else TimeoutError."""
        while len(self.buf) < 4 or len(self.buf) < 4 + struct.unpack(">I", self.buf[:4])[0]:
            if deadline is not None:
                self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("closed by server")
            self.buf += chunk
        n = struct.unpack(">I", self.buf[:4])[0]
        body, self.buf = self.buf[4 : 4 + n], self.buf[4 + n :]
        return body

    def recv(self) -> Any:
        return msgpack.unpackb(self.raw_frame(), raw=False, strict_map_key=False, ext_hook=_ext)

    def call(self, obj: Any) -> Any:
        self.send(obj)
        return self.recv()

    def ok(self, obj: Any) -> dict[str, Any]:
        """The reply to a command that must succeed."""
        reply = self.call(obj)
        assert reply["ok"] is True, reply
        return dict(reply)

    def poll(self, obj: Any, until: Callable[[Any], bool], timeout: float = 5.0) -> dict[str, Any]:
        """Send ``obj`` until ``until(reply)`` holds, and return that reply; fail after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            reply = self.call(obj)
            if until(reply):
                return dict(reply)
            assert time.monotonic() < deadline, f"never true within {timeout} s: {reply}"
            time.sleep(0.02)

    def is_closed(self, wait: float = 2.0) -> bool:
        self.sock.settimeout(wait)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()


async def call(conn: Connection, cmd: dict[str, Any]) -> dict[str, Any]:
    """The reply without the reqId the client generated, so whole replies can be compared."""
    reply = await conn.request(cmd)
    reply.pop("reqId", None)
    return reply


async def ok(conn: Connection, cmd: dict[str, Any]) -> dict[str, Any]:
    """The reply to a command that must succeed."""
    reply = await conn.request(cmd)
    assert reply["ok"], (cmd, reply)
    return reply


async def error_of(conn: Connection, cmd: dict[str, Any]) -> str:
    """The error text of a command that must fail, with nothing else in the reply."""
    reply = await conn.request(cmd)
    assert reply["ok"] is False and set(reply) <= {"ok", "error", "reqId"}, reply
    return str(reply["error"])
