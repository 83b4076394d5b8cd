"""A real server in a subprocess on free ports, and a raw-frame socket for byte-level tests."""
from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgpack

if TYPE_CHECKING:
    from bunqueue.client import Connection


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """``python -m bunqueue start`` on loopback, stopped with SIGTERM."""

    def __init__(self, env: Mapping[str, str] | None = None, args: list[str] | None = None) -> None:
        self.port = free_port()
        self.http_port = free_port()
        self.env = dict(os.environ)
        self.env.update(env or {})
        self.args = args or []
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def addr(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def start(self, timeout: float = 15.0) -> ServerProcess:
        cmd = [
            sys.executable, "-m", "bunqueue", "start", "--host", "127.0.0.1",
            "--tcp-port", str(self.port), "--http-port", str(self.http_port), *self.args,
        ]
        self.proc = subprocess.Popen(cmd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                _, err = self.proc.communicate()
                raise RuntimeError(f"server exited with {self.proc.returncode}: {err.decode()}")
            try:
                socket.create_connection(self.addr, timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("server did not start listening")

    def stop(self, timeout: float = 10.0) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.terminate()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def stderr(self) -> str:
        assert self.proc is not None and self.proc.stderr is not None
        return self.proc.stderr.read().decode()


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
        self.sock.sendall(struct.pack(">I", len(body)) + body)

    def raw_frame(self) -> bytes:
        while len(self.buf) < 4 or len(self.buf) < 4 + struct.unpack(">I", self.buf[:4])[0]:
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
