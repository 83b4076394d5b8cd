"""Byte-level behaviour: bad frames, oversized frames, reassembly, odd encodings, idle partial frames."""
from __future__ import annotations

import struct
import time

import msgpack
import pytest

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.server import ServerProcess


def frame(obj: object) -> bytes:
    body = msgpack.packb(obj, use_bin_type=True)
    return struct.pack(">I", len(body)) + body


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        (b"", "Invalid command format"),
        (b"\x91\x81\xa3cmd", "Invalid command format"),
        (msgpack.packb([{"cmd": "Ping"}]), "Invalid command"),
        (b"\x07", "Invalid command"),
        (b"\xc0", "Invalid command format"),
        (msgpack.packb("Ping"), "Invalid command"),
        (b"\xc1", "Invalid command"),
        (b"\x81\xa3", "Invalid command format"),
        (msgpack.packb({"cmd": "Ping"}) + b"\x01\x02", "Invalid command format"),
    ],
)
def test_bad_frame_gets_an_error_and_keeps_the_connection(raw: RawClient, payload: bytes, error: str) -> None:
    raw.send_bytes(struct.pack(">I", len(payload)) + payload)
    assert raw.recv() == {"ok": False, "error": error}
    assert raw.call({"cmd": "Ping", "reqId": "after"})["reqId"] == "after"


@pytest.mark.parametrize(
    ("request_", "error"),
    [
        ({"cmd": "Nope", "reqId": "u1"}, "Unknown command: Nope"),
        ({"cmd": "ping"}, "Unknown command: ping"),
        ({"cmd": 5, "reqId": 7}, "Unknown command: 5"),
        ({"cmd": b"Ping"}, "Unknown command: 80,105,110,103"),
        ({"queue": "q", "reqId": "no-cmd"}, "Invalid command"),
        ({"cmd": ""}, "Invalid command"),
    ],
)
def test_unknown_and_missing_commands(raw: RawClient, request_: dict, error: str) -> None:
    reply = raw.call(request_)
    assert reply["ok"] is False and reply["error"] == error
    assert reply.get("reqId") == request_.get("reqId")


def test_reqid_is_echoed_verbatim(raw: RawClient) -> None:
    assert raw.call({"cmd": "Ping", "reqId": 42})["reqId"] == 42
    assert "reqId" not in raw.call({"cmd": "Ping"}), "an absent reqId is left out, not sent as nil"


def test_oversized_frame_is_refused_then_closed(raw: RawClient) -> None:
    assert raw.call({"cmd": "Ping"})["ok"]
    raw.send_bytes(struct.pack(">I", 64 * 1024 * 1024 + 1))
    assert raw.recv() == {"ok": False, "error": "Frame too large: 67108865 bytes exceeds maximum 67108864"}
    assert raw.is_closed()


def test_frame_reassembly(raw: RawClient) -> None:
    data = frame({"cmd": "Ping", "reqId": "chunked"})
    for i in range(0, len(data), 3):
        raw.send_bytes(data[i : i + 3])
        time.sleep(0.005)
    assert raw.recv()["reqId"] == "chunked"
    raw.send_bytes(frame({"cmd": "Ping", "reqId": "x1"}) + frame({"cmd": "Ping", "reqId": "x2"}))
    assert [raw.recv()["reqId"], raw.recv()["reqId"]] == ["x1", "x2"]


def test_alternative_msgpack_encodings(raw: RawClient) -> None:
    # map16, str8 and integer map keys are plain maps to the server.
    raw.send_bytes(bytes.fromhex("00000016de0002a3636d64a450696e67a57265714964a36d3136"))
    assert raw.recv()["reqId"] == "m16"
    raw.send_bytes(bytes.fromhex("0000001582d903636d64d90450696e67a57265714964a27338"))
    assert raw.recv()["reqId"] == "s8"
    raw.send_bytes(bytes.fromhex("0000001c8301a36f6e65a3636d64a450696e67a57265714964a6696e746b6579"))
    assert raw.recv()["reqId"] == "intkey"


def test_js_undefined_values_read_as_absent(raw: RawClient) -> None:
    # {cmd: 'PUSH', queue: 'undef-q', name: 'j', data: 1, delay: undefined, reqId: undefined}
    body = (b"\x86\xa3cmd\xa4PUSH\xa5queue\xa7undef-q\xa4name\xa1j\xa4data\x01"
            b"\xa5delay\xd4\x00\x00\xa5reqId\xd4\x00\x00")
    raw.send_bytes(struct.pack(">I", len(body)) + body)
    reply = raw.recv()
    assert reply["ok"] is True and "reqId" not in reply


def test_js_undefined_inside_data_and_results_round_trips(raw: RawClient) -> None:
    # The TS client sends results such as {n: 1, by: undefined}; the reference keeps and returns them.
    undefined = msgpack.ExtType(0, b"\x00")
    pushed = raw.call({"cmd": "PUSH", "queue": "undef-nested", "data": {"a": undefined, "b": [1, undefined]}})
    assert raw.call({"cmd": "GetJob", "id": pushed["id"]})["job"]["data"] == {
        "a": "<undefined>", "b": [1, "<undefined>"]}
    assert raw.call({"cmd": "PULL", "queue": "undef-nested"})["job"]["id"] == pushed["id"]
    assert raw.call({"cmd": "ACK", "id": pushed["id"], "result": {"n": 1, "by": undefined}})["ok"]
    raw.send({"cmd": "GetResult", "id": pushed["id"]})
    assert b"\xa2by\xd4\x00\x00" in raw.raw_frame()


def test_replies_of_one_burst_arrive_together(raw: RawClient) -> None:
    raw.send_bytes(b"".join(frame({"cmd": "Ping", "reqId": i}) for i in range(20)))
    assert [raw.recv()["reqId"] for _ in range(20)] == list(range(20))


def test_half_sent_frame_is_dropped_after_the_idle_timeout() -> None:
    proc = ServerProcess(env={"TCP_IDLE_TIMEOUT_MS": "300"}).start()
    try:
        client = RawClient(proc.addr)
        client.send_bytes(b"\x00\x00\x00\x10\x81")
        assert client.is_closed(wait=3.0)
        idle = RawClient(proc.addr)
        time.sleep(0.6)
        assert idle.call({"cmd": "Ping"})["ok"], "a connection with no partial frame is never closed"
    finally:
        proc.stop()
