"""Tests of the asyncio client.

Tests that need a bunqueue server use the ``server_addr`` fixture: our own server, or the one at
``BUNQUEUE_TEST_ADDR`` (host:port) with ``BUNQUEUE_TEST_TOKEN`` when it requires auth. The framing tests
run against in-process fakes.
"""
from __future__ import annotations

import asyncio
import os
import struct
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import msgpack
import pytest
import pytest_asyncio

from bunqueue.client import (
    AuthenticationError,
    Connection,
    ProtocolError,
    connect,
    decode_payload,
    encode_frame,
    prepare,
)

pytestmark = pytest.mark.timeout(30)



# -- fixtures -------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def server_addr(request: pytest.FixtureRequest) -> tuple[str, int]:
    """Our own server by default; ``BUNQUEUE_TEST_ADDR`` points the same tests at another (the Bun original)."""
    raw = os.environ.get("BUNQUEUE_TEST_ADDR")
    if not raw:
        addr: tuple[str, int] = request.getfixturevalue("server").addr
        return addr
    host, _, port = raw.rpartition(":")
    return (host or "127.0.0.1", int(port))


@pytest.fixture(scope="session")
def server_token() -> str | None:
    return os.environ.get("BUNQUEUE_TEST_TOKEN") or None


@pytest_asyncio.fixture
async def conn(server_addr: tuple[str, int], server_token: str | None) -> AsyncIterator[Connection]:
    c = await connect(*server_addr, token=server_token)
    try:
        yield c
    finally:
        await c.close()


@pytest_asyncio.fixture
async def queue(server_addr: tuple[str, int], server_token: str | None) -> AsyncIterator[str]:
    """A queue name no other test uses; obliterated afterwards so the server does not accumulate."""
    name = f"test-client-{uuid.uuid4().hex[:12]}"
    yield name
    c = await connect(*server_addr, token=server_token)
    try:
        await c.request({"cmd": "Obliterate", "queue": name})
    finally:
        await c.close()


class FakeTransport(asyncio.Transport):
    """Collects writes so framing can be tested without sockets."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.closing = True


def _fake_connection() -> tuple[Connection, FakeTransport]:
    conn = Connection(asyncio.get_running_loop())
    transport = FakeTransport()
    conn.connection_made(transport)
    return conn, transport


def _written_requests(transport: FakeTransport) -> list[dict[str, Any]]:
    data = b"".join(transport.written)
    out, pos = [], 0
    while pos < len(data):
        (size,) = struct.unpack_from(">I", data, pos)
        out.append(decode_payload(data[pos + 4 : pos + 4 + size]))
        pos += 4 + size
    return out


async def _fake_server(
    handler: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
) -> tuple[asyncio.AbstractServer, int]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def _read_frame(reader: asyncio.StreamReader) -> Any:
    (size,) = struct.unpack(">I", await reader.readexactly(4))
    return decode_payload(await reader.readexactly(size))


# -- framing, without a server --------------------------------------------------------------------


def test_undefined_ext_decodes_to_none() -> None:
    # {"a": undefined, "b": 1} as msgpackr writes it
    assert decode_payload(b"\x82\xa1a\xd4\x00\x00\xa1b\x01") == {"a": None, "b": 1}


def test_other_ext_types_are_kept() -> None:
    assert decode_payload(msgpack.packb(msgpack.ExtType(5, b"xy"))) == msgpack.ExtType(5, b"xy")


def test_integer_map_keys_decode() -> None:
    assert decode_payload(msgpack.packb({1: "a"})) == {1: "a"}


def test_encode_frame_prefix() -> None:
    frame = encode_frame({"cmd": "Ping"})
    assert struct.unpack(">I", frame[:4])[0] == len(frame) - 4
    assert msgpack.unpackb(frame[4:]) == {"cmd": "Ping"}


async def test_prepared_command_matches_plain_encoding() -> None:
    conn, transport = _fake_connection()
    cmd = {"cmd": "PUSH", "queue": "q", "name": "n", "data": {"x": [1, 2, 3]}, "priority": 5}
    conn.request_nowait(prepare(cmd))
    conn.request_nowait(prepare({f"k{i}": i for i in range(15)}))  # header grows to map16 with reqId
    sent = _written_requests(transport)
    assert sent[0] == {**cmd, "reqId": sent[0]["reqId"]}
    assert sent[1] == {**{f"k{i}": i for i in range(15)}, "reqId": sent[1]["reqId"]}
    assert len(sent[1]) == 16
    with pytest.raises(ValueError):
        prepare({"cmd": "Ping", "reqId": "x"})


async def test_request_ids_are_unique_and_caller_dict_untouched() -> None:
    conn, transport = _fake_connection()
    cmd = {"cmd": "Ping"}
    futs = conn.pipeline_nowait([cmd, cmd, cmd])
    conn.request_nowait(cmd)
    assert cmd == {"cmd": "Ping"}
    ids = [r["reqId"] for r in _written_requests(transport)]
    assert len(set(ids)) == 4 and all(isinstance(i, str) for i in ids)
    assert len(transport.written) == 2  # the pipeline went out in one write
    assert all(not f.done() for f in futs)


async def test_replies_matched_out_of_order_and_split_anywhere() -> None:
    conn, transport = _fake_connection()
    futs = conn.pipeline_nowait([{"cmd": "Ping"} for _ in range(3)])
    ids = [r["reqId"] for r in _written_requests(transport)]
    replies = b"".join(encode_frame({"ok": True, "n": i, "reqId": ids[i]}) for i in (2, 0, 1))
    event = encode_frame({"type": "event", "event": {"eventType": "pushed"}})
    stream = replies + event
    for i in range(len(stream)):  # one byte at a time
        conn.data_received(stream[i : i + 1])
    assert [f.result()["n"] for f in futs] == [0, 1, 2]
    assert conn.events.get_nowait() == {"type": "event", "event": {"eventType": "pushed"}}
    assert conn.pending_count == 0


async def test_large_frame_in_chunks_and_many_frames_in_one_chunk() -> None:
    conn, transport = _fake_connection()
    big = conn.request_nowait({"cmd": "GetJobs"})
    rid = _written_requests(transport)[0]["reqId"]
    frame = encode_frame({"ok": True, "blob": b"x" * 3_000_000, "reqId": rid})
    for i in range(0, len(frame), 65536):
        conn.data_received(frame[i : i + 65536])
    assert len(big.result()["blob"]) == 3_000_000

    futs = conn.pipeline_nowait([{"cmd": "Ping"} for _ in range(100)])
    ids = [r["reqId"] for r in _written_requests(transport)[1:]]
    conn.data_received(b"".join(encode_frame({"ok": True, "reqId": r}) for r in ids))
    assert all(f.result()["ok"] for f in futs)


async def test_unsolicited_frames_go_to_events() -> None:
    conn, _ = _fake_connection()
    conn.data_received(encode_frame({"ok": False, "error": "Invalid command"}))
    conn.data_received(encode_frame({"ok": True, "reqId": "nobody"}))
    conn.data_received(encode_frame({"ok": True, "reqId": ["unhashable"]}))
    conn.data_received(encode_frame([1, 2]))
    assert [conn.events.get_nowait() for _ in range(4)] == [
        {"ok": False, "error": "Invalid command"},
        {"ok": True, "reqId": "nobody"},
        {"ok": True, "reqId": ["unhashable"]},
        [1, 2],
    ]


async def test_caller_reqid_is_kept_and_duplicates_refused() -> None:
    conn, transport = _fake_connection()
    fut = conn.request_nowait({"cmd": "Ping", "reqId": "mine"})
    with pytest.raises(ValueError):
        conn.request_nowait({"cmd": "Ping", "reqId": "mine"})
    with pytest.raises(ValueError):
        conn.pipeline_nowait([{"cmd": "Ping", "reqId": "a"}, {"cmd": "Ping", "reqId": "a"}])
    assert conn.pending_count == 1  # the refused pipeline left nothing behind
    assert len(transport.written) == 1
    conn.data_received(encode_frame({"ok": True, "reqId": "mine"}))
    assert fut.result() == {"ok": True, "reqId": "mine"}


async def test_connection_lost_fails_pending_requests() -> None:
    conn, _ = _fake_connection()
    single = conn.request_nowait({"cmd": "Ping"})
    batch = conn.pipeline_nowait([{"cmd": "Ping"}, {"cmd": "Ping"}])
    cause = OSError("reset")
    conn.connection_lost(cause)
    for fut in [single, *batch]:
        with pytest.raises(ConnectionError):
            fut.result()
    assert conn.closed.result() is cause
    assert conn.is_closed()
    with pytest.raises(ConnectionError):
        await conn.request({"cmd": "Ping"})
    with pytest.raises(ConnectionError):
        conn.send_raw(b"\x00")


async def test_undecodable_frame_drops_connection() -> None:
    conn, transport = _fake_connection()
    fut = conn.request_nowait({"cmd": "Ping"})
    conn.data_received(b"\x00\x00\x00\x01\xc1")  # 0xc1 is never valid MessagePack
    with pytest.raises(ProtocolError):
        fut.result()
    assert transport.closing
    assert isinstance(conn.closed.result(), ProtocolError)


# -- against in-process fake servers ---------------------------------------------------------------


async def test_server_close_fails_pending_request() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_frame(reader)
        writer.close()

    server, port = await _fake_server(handler)
    async with server:
        conn = await connect("127.0.0.1", port)
        with pytest.raises(ConnectionError):
            await conn.request({"cmd": "PULL", "queue": "q", "timeout": 5000})
        assert (await asyncio.wait_for(conn.closed, 5)) is None
        assert conn.is_closed()


async def test_auth_refused_raises() -> None:
    seen: list[Any] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        req = await _read_frame(reader)
        seen.append(req)
        writer.write(encode_frame({"ok": False, "error": "Invalid token", "reqId": req["reqId"]}))
        await writer.drain()
        await reader.read()
        writer.close()

    server, port = await _fake_server(handler)
    async with server:
        with pytest.raises(AuthenticationError, match="Invalid token"):
            await connect("127.0.0.1", port, token="wrong")
    assert seen[0]["cmd"] == "Auth" and seen[0]["token"] == "wrong"


async def test_connect_timeout() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # never answers Auth
        writer.close()

    server, port = await _fake_server(handler)
    async with server:
        with pytest.raises(TimeoutError):
            await connect("127.0.0.1", port, token="t", timeout=0.2)


# -- against a bunqueue server --------------------------------------------------------------------


async def test_ping(conn: Connection) -> None:
    reply = await conn.request({"cmd": "Ping"})
    assert reply["ok"] is True
    assert isinstance(reply["reqId"], str)


async def test_caller_reqid_echoed(conn: Connection) -> None:
    reply = await conn.request({"cmd": "Ping", "reqId": "ping-1"})
    assert reply["reqId"] == "ping-1"


async def test_error_reply_is_returned_not_raised(conn: Connection) -> None:
    reply = await conn.request({"cmd": "NoSuchCommand"})
    assert reply["ok"] is False
    assert isinstance(reply["error"], str)


async def test_concurrent_requests(conn: Connection) -> None:
    replies = await asyncio.gather(*(conn.request({"cmd": "Ping"}) for _ in range(200)))
    assert len({r["reqId"] for r in replies}) == 200
    assert conn.pending_count == 0


async def test_pipeline_keeps_request_order_when_replies_do_not(conn: Connection, queue: str) -> None:
    # The long-poll PULL is answered only after the PUSH that follows it, so its reply comes last.
    pull, ping, push = await conn.pipeline(
        [
            {"cmd": "PULL", "queue": queue, "timeout": 3000},
            {"cmd": "Ping"},
            {"cmd": "PUSH", "queue": queue, "name": "n", "data": {"x": 1}},
        ]
    )
    assert ping["ok"] and push["ok"]
    assert pull["ok"] and pull["job"]["id"] == push["id"]
    assert pull["job"]["data"] == {"x": 1}
    ack = await conn.request({"cmd": "ACK", "id": push["id"]})
    assert ack["ok"]


async def test_push_pull_ack_with_lock(conn: Connection, queue: str) -> None:
    pushed = await conn.request({"cmd": "PUSH", "queue": queue, "name": "job", "data": {"k": "v"}})
    assert pushed["ok"] and isinstance(pushed["id"], str)
    pulled = await conn.request({"cmd": "PULL", "queue": queue, "owner": "w1", "lockTtl": 30000})
    assert pulled["job"]["id"] == pushed["id"]
    assert pulled["job"]["name"] == "job"
    assert isinstance(pulled["token"], str)
    acked = await conn.request({"cmd": "ACK", "id": pushed["id"], "token": pulled["token"]})
    assert acked["ok"]
    empty = await conn.request({"cmd": "PULL", "queue": queue, "owner": "w1", "timeout": 0})
    assert empty["job"] is None and empty["token"] is None


async def test_batch_commands(conn: Connection, queue: str) -> None:
    jobs = [{"name": "b", "data": {"i": i}} for i in range(25)]
    pushed = await conn.request(prepare({"cmd": "PUSHB", "queue": queue, "jobs": jobs}))
    assert pushed["ok"] and len(pushed["ids"]) == 25
    pulled = await conn.request({"cmd": "PULLB", "queue": queue, "count": 100})
    assert sorted(j["id"] for j in pulled["jobs"]) == sorted(pushed["ids"])
    acked = await conn.request({"cmd": "ACKB", "ids": [j["id"] for j in pulled["jobs"]]})
    assert acked["ok"]
    counts = (await conn.request({"cmd": "GetJobCounts", "queue": queue}))["counts"]
    assert counts["waiting"] == 0 and counts["active"] == 0 and counts["completed"] == 25


async def test_fail_moves_job_on(conn: Connection, queue: str) -> None:
    pushed = await conn.request(
        {"cmd": "PUSH", "queue": queue, "name": "f", "data": None, "maxAttempts": 1}
    )
    pulled = await conn.request({"cmd": "PULL", "queue": queue, "owner": "w", "lockTtl": 30000})
    failed = await conn.request(
        {"cmd": "FAIL", "id": pushed["id"], "error": "boom", "token": pulled["token"]}
    )
    assert failed["ok"]
    counts = (await conn.request({"cmd": "GetJobCounts", "queue": queue}))["counts"]
    assert counts["active"] == 0 and counts["failed"] == 1


async def test_events_are_delivered_apart_from_replies() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        req = await _read_frame(reader)
        # An unsolicited event frame lands between the request and its reply.
        event = {"eventType": "pushed", "queue": "q", "jobId": "j1", "timestamp": 1.7e12}
        writer.write(encode_frame({"type": "event", "event": event}))
        writer.write(encode_frame({"ok": True, "reqId": req["reqId"]}))
        await writer.drain()
        await reader.read()
        writer.close()

    server, port = await _fake_server(handler)
    async with server:
        conn = await connect("127.0.0.1", port)
        assert (await conn.request({"cmd": "SubscribeEvents", "queue": "q"}))["ok"]
        event = await asyncio.wait_for(conn.events.get(), 5)
        assert event["type"] == "event" and event["event"]["jobId"] == "j1"
        await conn.close()


async def test_send_raw_partial_frames(conn: Connection) -> None:
    frame = encode_frame({"cmd": "Ping", "reqId": "raw-1"})
    conn.send_raw(frame[:3])
    await asyncio.sleep(0.05)
    conn.send_raw(frame[3:])
    reply = await asyncio.wait_for(conn.events.get(), 5)
    assert reply["ok"] and reply["reqId"] == "raw-1"


async def test_send_raw_undecodable_payload_gets_error_reply(conn: Connection) -> None:
    conn.send_raw(b"\x00\x00\x00\x03\xc1\xc1\xc1")
    reply = await asyncio.wait_for(conn.events.get(), 5)
    assert reply["ok"] is False
    assert reply.get("reqId") is None  # the server echoes `undefined`


async def test_close(server_addr: tuple[str, int], server_token: str | None) -> None:
    conn = await connect(*server_addr, token=server_token)
    await conn.close()
    assert conn.is_closed()
    assert conn.closed.done()
    with pytest.raises(ConnectionError):
        await conn.request({"cmd": "Ping"})
