"""A lean asyncio client for the bunqueue TCP protocol.

Every frame is a 4-byte big-endian payload length followed by one MessagePack map. Requests carry a
``reqId`` that the server echoes, so replies are matched by id and may arrive in any order. Frames
without a pending ``reqId`` (queue events, replies to frames written with :meth:`Connection.send_raw`)
are delivered to :attr:`Connection.events`.

The hot path allocates one future and one pending-map entry per request and never starts a task.
"""
from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Iterable, Mapping
from ssl import SSLContext
from typing import Any

import msgpack

from bunqueue.errors import AuthenticationError, BunqueueError, ProtocolError

__all__ = (
    "AuthenticationError",
    "BunqueueError",
    "Connection",
    "PreparedCommand",
    "ProtocolError",
    "connect",
    "decode_payload",
    "encode_frame",
    "prepare",
)

_HEADER = struct.Struct(">I")
_pack_header = _HEADER.pack
_unpack_header = _HEADER.unpack_from

# Prefix of generated request ids; tests tend to pick plain numbers or words for their own ids.
_REQ_ID_PREFIX = "~"
_REQ_ID_KEY = msgpack.packb("reqId")


def _ext_hook(code: int, data: bytes) -> Any:
    # msgpackr writes JS `undefined` as fixext1 type 0 (d4 00 00); to Python it means "no value".
    if code == 0:
        return None
    return msgpack.ExtType(code, data)


def decode_payload(payload: bytes | memoryview) -> Any:
    """Decode one frame payload (without its length prefix)."""
    return msgpack.unpackb(payload, raw=False, strict_map_key=False, ext_hook=_ext_hook)


def encode_frame(obj: Any) -> bytes:
    """Encode any object as one length-prefixed frame, e.g. for :meth:`Connection.send_raw`."""
    payload = msgpack.packb(obj, use_bin_type=True)
    return _pack_header(len(payload)) + payload


def _map_header(n: int) -> bytes:
    if n <= 0x0F:
        return bytes((0x80 | n,))
    if n <= 0xFFFF:
        return b"\xde" + n.to_bytes(2, "big")
    return b"\xdf" + n.to_bytes(4, "big")


class PreparedCommand:
    """A command packed once and sent many times; each send only appends its ``reqId``.

    Packing dominates the client cost of large or repeated commands (a PUSHB of 1000 jobs, the
    same PULL issued by many consumers), so benchmarks and hot loops prepare them up front.
    """

    __slots__ = ("_prefix", "cmd")

    cmd: dict[str, Any]
    _prefix: bytes

    def __init__(self, cmd: Mapping[str, Any]) -> None:
        if "reqId" in cmd:
            raise ValueError("a prepared command gets its reqId when sent")
        self.cmd = dict(cmd)
        packer = msgpack.Packer(use_bin_type=True, autoreset=False)
        for key, value in self.cmd.items():
            packer.pack(key)
            packer.pack(value)
        # The map header counts the reqId entry that every send appends.
        self._prefix = _map_header(len(self.cmd) + 1) + packer.bytes() + _REQ_ID_KEY

    def frame(self, packed_req_id: bytes) -> bytes:
        size = len(self._prefix) + len(packed_req_id)
        return b"".join((_pack_header(size), self._prefix, packed_req_id))

    def __repr__(self) -> str:
        return f"PreparedCommand({self.cmd!r})"


def prepare(cmd: Mapping[str, Any]) -> PreparedCommand:
    """Pack ``cmd`` once for repeated use with :meth:`Connection.request` and friends."""
    return PreparedCommand(cmd)


Command = Mapping[str, Any] | PreparedCommand


class Connection(asyncio.Protocol):
    """One TCP connection to a bunqueue server. Create it with :func:`connect`."""

    __slots__ = (
        "_buf",
        "_loop",
        "_lost",
        "_need",
        "_next_id",
        "_packer",
        "_pending",
        "_transport",
        "closed",
        "events",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._transport: asyncio.Transport | None = None
        self._pending: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        # Bytes of an incomplete frame, and how many bytes it needs before it is worth parsing.
        self._buf = bytearray()
        self._need = 0
        self._next_id = 0
        self._packer = msgpack.Packer(use_bin_type=True)
        self._lost = False
        #: Frames that answer no pending request: ``{type: 'event', ...}`` frames and replies to
        #: frames written with :meth:`send_raw`. Unbounded: whoever subscribes should read it.
        self.events: asyncio.Queue[Any] = asyncio.Queue()
        #: Resolves when the connection is gone, with the exception that ended it or None.
        self.closed: asyncio.Future[BaseException | None] = loop.create_future()

    # -- asyncio.Protocol -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop transports do not subclass asyncio.Transport, so no isinstance check here.
        self._transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except (OSError, AttributeError):
                pass

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        if buf:
            buf += data
            # A large frame arrives in many chunks; only reparse once it can be complete.
            if len(buf) < self._need:
                return
            data = bytes(buf)
            buf.clear()

        view = memoryview(data)
        end = len(data)
        pos = 0
        pending = self._pending
        unpackb = msgpack.unpackb
        while end - pos >= 4:
            (size,) = _unpack_header(data, pos)
            start = pos + 4
            stop = start + size
            if stop > end:
                break
            try:
                # decode_payload(), inlined: this loop runs once per reply.
                msg = unpackb(view[start:stop], raw=False, strict_map_key=False, ext_hook=_ext_hook)
            except Exception as exc:
                self._abort(ProtocolError(f"undecodable frame of {size} bytes: {exc!r}"))
                return
            pos = stop
            if type(msg) is dict:
                rid = msg.get("reqId")
                if rid is not None:
                    try:
                        fut = pending.pop(rid, None)
                    except TypeError:  # an unhashable reqId echoed from a raw frame
                        fut = None
                    if fut is not None:
                        if not fut.done():
                            fut.set_result(msg)
                        continue
            self.events.put_nowait(msg)

        if pos < end:
            buf += view[pos:]
            self._need = 4 + _unpack_header(data, pos)[0] if end - pos >= 4 else 4

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._fail_pending(exc)
        if not self.closed.done():
            self.closed.set_result(exc)

    # -- public API ---------------------------------------------------------------------------------

    def request_nowait(self, cmd: Command) -> asyncio.Future[dict[str, Any]]:
        """Write one command and return the future of its reply."""
        transport = self._check_open()
        rid, frame = self._encode(cmd)
        fut = self._loop.create_future()
        self._pending[rid] = fut
        transport.write(frame)
        return fut

    async def request(self, cmd: Command) -> dict[str, Any]:
        """Send one command and wait for the reply carrying the same ``reqId``.

        A ``reqId`` already in ``cmd`` is used as is; otherwise a unique one is generated (the
        caller's mapping is not modified). Raises :class:`ConnectionError` if the connection is lost
        before the reply arrives.
        """
        return await self.request_nowait(cmd)

    def pipeline_nowait(self, cmds: Iterable[Command]) -> list[asyncio.Future[dict[str, Any]]]:
        """Write all commands in a single transport write; return one reply future per command."""
        transport = self._check_open()
        encode = self._encode
        pending = self._pending
        create_future = self._loop.create_future
        frames: list[bytes] = []
        futures: list[asyncio.Future[dict[str, Any]]] = []
        rids: list[Any] = []
        try:
            for cmd in cmds:
                rid, frame = encode(cmd)
                fut = create_future()
                # Registered at once so that a caller-chosen id repeated in this batch is refused.
                pending[rid] = fut
                rids.append(rid)
                frames.append(frame)
                futures.append(fut)
        except BaseException:
            for rid in rids:
                pending.pop(rid, None)
            raise
        transport.write(b"".join(frames))
        return futures

    async def pipeline(self, cmds: Iterable[Command]) -> list[dict[str, Any]]:
        """Send all commands in one write and return their replies in request order."""
        return [await fut for fut in self.pipeline_nowait(cmds)]

    def send_raw(self, data: bytes) -> None:
        """Write bytes as they are: partial frames, bad length prefixes, undecodable payloads.

        Replies to such frames reach :attr:`events` unless they echo the ``reqId`` of a pending
        request.
        """
        self._check_open().write(data)

    def is_closed(self) -> bool:
        return self._lost or self._transport is None or self._transport.is_closing()

    async def close(self) -> None:
        """Close the connection and wait until the transport is gone."""
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()
        await asyncio.shield(self.closed)

    def abort(self) -> None:
        """Drop the connection at once, discarding unsent data."""
        if self._transport is not None:
            self._transport.abort()

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default) if self._transport else default

    async def __aenter__(self) -> Connection:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- internals ----------------------------------------------------------------------------------

    def _check_open(self) -> asyncio.Transport:
        transport = self._transport
        if self._lost or transport is None or transport.is_closing():
            raise ConnectionError("connection is closed")
        return transport

    def _new_req_id(self) -> str:
        self._next_id += 1
        return f"{_REQ_ID_PREFIX}{self._next_id:x}"

    def _encode(self, cmd: Command) -> tuple[Any, bytes]:
        rid: Any
        if isinstance(cmd, PreparedCommand):
            rid = self._new_req_id()
            return rid, cmd.frame(self._packer.pack(rid))
        rid = cmd.get("reqId")
        if rid is None:
            rid = self._new_req_id()
            payload = self._packer.pack({**cmd, "reqId": rid})
        else:
            existing = self._pending.get(rid)
            if existing is not None and not existing.done():
                raise ValueError(f"reqId {rid!r} is already in flight")
            payload = self._packer.pack(cmd)
        return rid, _pack_header(len(payload)) + payload

    def _fail_pending(self, exc: BaseException | None) -> None:
        pending = self._pending
        if not pending:
            return
        reason = f"connection lost: {exc}" if exc is not None else "connection closed"
        for fut in pending.values():
            if not fut.done():
                # A fresh instance per future: a shared one would collect every awaiter's traceback.
                if isinstance(exc, ProtocolError):
                    err: ConnectionError = ProtocolError(*exc.args)
                else:
                    err = ConnectionError(reason)
                    err.__cause__ = exc
                fut.set_exception(err)
                # Replies nobody awaits (pipelines abandoned midway) should not log warnings.
                fut.exception()
        pending.clear()

    def _abort(self, exc: BaseException) -> None:
        self._lost = True
        self._fail_pending(exc)
        if not self.closed.done():
            self.closed.set_result(exc)
        if self._transport is not None:
            self._transport.abort()


async def connect(
    host: str,
    port: int,
    *,
    token: str | None = None,
    timeout: float = 10.0,
    ssl: SSLContext | None = None,
) -> Connection:
    """Open a connection; with ``token``, authenticate and raise :class:`AuthenticationError` on refusal.

    ``timeout`` bounds connecting and authenticating together; ``ssl`` makes it a TLS connection.
    """
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(timeout):
        _, conn = await loop.create_connection(lambda: Connection(loop), host, port, ssl=ssl)
        try:
            if token is not None:
                reply = await conn.request({"cmd": "Auth", "token": token})
                if not reply.get("ok"):
                    raise AuthenticationError(reply.get("error") or "authentication failed")
        except BaseException:
            conn.abort()
            raise
    return conn
