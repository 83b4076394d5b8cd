"""The TCP protocol against a recording transport: replies per read, backpressure, unencodable replies."""
from __future__ import annotations

import asyncio
from typing import Any

import msgpack

from bunqueue import errors
from bunqueue._core.packer import ReplyPacker
from bunqueue._testbase.frames import frame
from bunqueue.broker.facade import Broker
from bunqueue.broker.session import Session
from bunqueue.config import Settings
from bunqueue.server.runner import CommandRunner
from bunqueue.server.tcp import BACKLOG_LIMIT, WRITE_HIGH_WATER, BrokerProtocol
from bunqueue.storage import MemoryStore


class RecordingTransport:
    """Keeps what is written; reports a write buffer as full as the test says."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.buffered = 0
        self.reading = True
        self.closing = False

    def set_write_buffer_limits(self, high: int) -> None:
        self.high = high

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def is_closing(self) -> bool:
        return self.closing

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def close(self) -> None:
        self.closing = True

    abort = close

    def replies(self) -> list[dict[str, Any]]:
        unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
        out = []
        for data in self.writes:
            view = memoryview(data)
            while view:
                n = int.from_bytes(view[:4], "big")
                unpacker.feed(view[4 : 4 + n])
                out.extend(unpacker)
                view = view[4 + n :]
        return out


def connection(handlers: dict[str, Any] | None = None) -> tuple[BrokerProtocol, RecordingTransport]:
    broker = Broker()
    runner = CommandRunner(broker, MemoryStore(), frozenset())
    if handlers:
        runner.handlers = {**runner.handlers, **handlers}
    settings = Settings.load(env={"RATE_LIMIT_MAX_REQUESTS": "0"})
    protocol = BrokerProtocol(runner, settings, ReplyPacker(), set())
    transport = RecordingTransport()
    protocol.connection_made(transport)  # type: ignore[arg-type]
    return protocol, transport


def request(**fields: Any) -> bytes:
    return frame(msgpack.packb(fields))


def nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def unencodable(broker: Broker, cmd: dict[str, Any], session: Session) -> dict[str, Any]:
    return {"ok": True, "value": nested(2000)}


async def test_small_replies_of_one_read_go_out_in_one_write() -> None:
    protocol, transport = connection()
    protocol.data_received(b"".join(request(cmd="Ping", reqId=i) for i in range(100)))
    assert len(transport.writes) == 1
    assert [r["reqId"] for r in transport.replies()] == list(range(100))


async def test_an_unencodable_reply_costs_only_itself() -> None:
    protocol, transport = connection({"Unencodable": unencodable})
    protocol.data_received(
        request(cmd="Ping", reqId="a") + request(cmd="Unencodable", reqId="b") + request(cmd="Ping", reqId="c")
    )
    first, bad, last = transport.replies()
    assert first["reqId"] == "a" and last["reqId"] == "c"
    assert bad == {"ok": False, "error": errors.REPLY_NOT_ENCODABLE, "reqId": "b"}
    assert not transport.closing


async def test_frames_wait_while_the_client_does_not_read() -> None:
    protocol, transport = connection()
    protocol.data_received(request(cmd="Ping", reqId=0))
    protocol.pause_writing()
    transport.buffered = WRITE_HIGH_WATER + 1
    protocol.data_received(b"".join(request(cmd="Ping", reqId=i) for i in range(1, 50)))
    assert [r["reqId"] for r in transport.replies()] == [0]
    assert not transport.reading and len(protocol.backlog) == 49
    protocol.data_received(request(cmd="Ping", reqId=50))
    assert len(protocol.backlog) == 50
    transport.buffered = 0
    protocol.resume_writing()
    assert [r["reqId"] for r in transport.replies()] == list(range(51))
    assert transport.reading and not protocol.backlog


async def test_a_handler_that_raises_answers_internal_error_and_keeps_the_connection() -> None:
    def broken(broker: Broker, cmd: dict[str, Any], session: Session) -> dict[str, Any]:
        raise RuntimeError("bug")

    protocol, transport = connection({"Broken": broken})
    protocol.data_received(request(cmd="Broken", reqId=1) + request(cmd="Ping", reqId=2))
    assert transport.replies()[0] == {"ok": False, "error": errors.INTERNAL_ERROR, "reqId": 1}
    assert transport.replies()[1]["reqId"] == 2


def waiting(release: asyncio.Event) -> Any:
    """A handler whose commands wait until ``release`` is set."""
    async def waits() -> dict[str, Any]:
        await release.wait()
        return {"ok": True}
    return lambda broker, cmd, session: waits()


async def test_waiting_commands_beyond_the_limit_wait_their_turn() -> None:
    release = asyncio.Event()
    protocol, transport = connection({"Wait": waiting(release)})
    protocol.data_received(b"".join(request(cmd="Wait", reqId=i) for i in range(60)) + request(cmd="Ping", reqId="p"))
    # A few frames waiting their turn do not stop reading: a client that goes away is noticed at once.
    assert len(protocol.tasks) == 50 and len(protocol.backlog) == 11 and transport.reading
    protocol.data_received(request(cmd="Ping", blob="x" * BACKLOG_LIMIT, reqId="big"))
    assert not transport.reading and len(protocol.backlog) == 12
    release.set()
    for _ in range(5):
        await asyncio.sleep(0)
    answered = [r["reqId"] for r in transport.replies()]
    assert sorted(answered, key=str) == sorted([*range(60), "p", "big"], key=str)
    assert transport.reading and not protocol.backlog


async def test_replies_of_commands_that_finish_together_go_out_in_one_write() -> None:
    release = asyncio.Event()
    protocol, transport = connection({"Wait": waiting(release)})
    protocol.data_received(b"".join(request(cmd="Wait", reqId=i) for i in range(10)))
    assert transport.writes == []
    release.set()
    for _ in range(5):
        await asyncio.sleep(0)
    assert len(transport.writes) == 1
    assert [r["reqId"] for r in transport.replies()] == list(range(10))
