"""Hostile frames cost only themselves: never another reply, another job, the connection or the memory."""
from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import msgpack
import pytest

from bunqueue import errors
from bunqueue._testbase.frames import RawClient, frame
from bunqueue._testbase.server import ServerProcess

NESTED_REQ_ID = bytes.fromhex("82a3636d64a450696e67a57265714964") + b"\x91" * 600 + b"\x01"
TIMESTAMP_REQ_ID = bytes.fromhex("82a3636d64a450696e67a57265714964d6ff00000001")
NESTED_CMD = bytes.fromhex("82a3636d64") + b"\x91" * 1000 + bytes.fromhex("01a57265714964a26332")


def ping(req_id: str) -> bytes:
    return frame(msgpack.packb({"cmd": "Ping", "reqId": req_id}))


def replies(client: RawClient, n: int) -> list[dict]:
    return [client.recv() for _ in range(n)]


def test_unechoable_req_ids_are_refused_and_cost_no_other_reply(raw: RawClient) -> None:
    raw.send_bytes(
        ping("before") + frame(NESTED_REQ_ID) + frame(TIMESTAMP_REQ_ID) + frame(NESTED_CMD) + ping("after")
    )
    first, nested, timestamp, nested_cmd, last = replies(raw, 5)
    assert first["reqId"] == "before" and first["ok"] is True
    assert nested == {"ok": False, "error": errors.INVALID_REQ_ID}
    assert timestamp == {"ok": False, "error": errors.INVALID_REQ_ID}
    assert nested_cmd["ok"] is False and nested_cmd["reqId"] == "c2"
    assert nested_cmd["error"].startswith("Unknown command: ")
    assert len(nested_cmd["error"]) <= len("Unknown command: ") + errors.MAX_SHOWN_CHARS
    assert last["reqId"] == "after" and last["ok"] is True
    assert raw.call({"cmd": "Ping", "reqId": "still-open"})["reqId"] == "still-open"


def test_unknown_command_text_is_bounded(raw: RawClient) -> None:
    reply = raw.call({"cmd": "x" * 100_000, "reqId": "long"})
    assert reply["reqId"] == "long"
    assert reply["error"] == "Unknown command: " + "x" * errors.MAX_SHOWN_CHARS


@pytest.mark.parametrize("field", ["dedup", "repeat", "backoff", "group", "jobOptions", "jobs", "data"])
def test_option_nested_beyond_the_recursion_limit_gets_one_reply(raw: RawClient, field: str) -> None:
    head = msgpack.packb({"cmd": "PUSH", "queue": "deep", "name": "n", "reqId": "d"})
    body = bytes([head[0] + 1]) + head[1:] + msgpack.packb(field) + b"\x91" * 900 + b"\x81\xa1k\xd4\x00\x00"
    raw.send_bytes(frame(body) + ping("after"))
    deep, after = replies(raw, 2)
    assert deep["ok"] is False and deep["error"] != errors.INTERNAL_ERROR
    assert after["reqId"] == "after"


@pytest.mark.parametrize("cmd", ["ACK", "FAIL", "ExtendLock"])
def test_error_texts_quote_client_values_bounded(raw: RawClient, cmd: str) -> None:
    reply = raw.call({"cmd": cmd, "id": "j" * 100_000, "token": "t", "reqId": "r"})
    assert reply["ok"] is False and reply["reqId"] == "r"
    assert len(reply["error"]) < 100 + errors.MAX_SHOWN_CHARS, reply["error"][:300]


@pytest.mark.parametrize(
    "request_fields",
    [
        {"cmd": "PULL", "timeout": 100},
        {"cmd": "PULLB", "count": 1, "timeout": 100},
        {"cmd": "WaitJob", "id": "no-such-job", "timeout": 100},
    ],
    ids=["PULL", "PULLB", "WaitJob"],
)
def test_waiting_command_with_unechoable_req_id_answers_at_once_and_loses_no_job(
    server: ServerProcess, queue_name: str, request_fields: dict
) -> None:
    fields = dict(request_fields, queue=queue_name)
    # The same map with one more key, reqId, nested 600 levels: built by hand, msgpack-python refuses it.
    head = bytes([0x80 | (len(fields) + 1)]) + msgpack.packb(fields)[1:]
    body = head + b"\xa5reqId" + b"\x91" * 600 + b"\x01"
    waiter = RawClient(server.addr)
    producer = RawClient(server.addr)
    try:
        waiter.send_bytes(frame(body))
        assert waiter.recv() == {"ok": False, "error": errors.INVALID_REQ_ID}
        pushed = producer.call({"cmd": "PUSH", "queue": queue_name, "name": "n", "data": {"k": 1}})
        assert pushed["ok"] is True
        time.sleep(0.2)
        # Nothing claimed the job while nobody could be told about it.
        assert producer.call({"cmd": "Count", "queue": queue_name})["count"] == 1
        pulled = waiter.call({"cmd": "PULL", "queue": queue_name, "reqId": "w"})
        assert pulled["reqId"] == "w" and pulled["job"]["id"] == pushed["id"]
    finally:
        waiter.close()
        producer.close()


def test_undecodable_frames_count_toward_the_rate_limit() -> None:
    proc = ServerProcess(env={"RATE_LIMIT_MAX_REQUESTS": "5"}).start()
    try:
        client = RawClient(proc.addr)
        client.send_bytes(frame(b"\xc1\xc1") * 5)
        assert replies(client, 5) == [{"ok": False, "error": errors.INVALID_COMMAND_FORMAT}] * 5
        assert client.call({"cmd": "Ping", "reqId": "p"}) == {
            "ok": False, "error": errors.RATE_LIMIT_EXCEEDED, "reqId": "p",
        }
        client.close()
    finally:
        proc.stop()


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


@pytest.fixture
def own_server() -> Iterator[ServerProcess]:
    proc = ServerProcess(env={"RATE_LIMIT_MAX_REQUESTS": "0"}).start()
    yield proc
    proc.stop()


def test_pipelined_large_replies_to_a_client_that_does_not_read_keep_memory_bounded(
    own_server: ServerProcess,
) -> None:
    """300 GetJobs replies of ~500 KB each: 150 MB if they were all packed before the write limit is
    checked. The server must stop reading instead, then answer every one once the client reads."""
    assert own_server.proc is not None
    pid = own_server.proc.pid
    setup = RawClient(own_server.addr)
    jobs = [{"name": "big", "data": {"blob": "x" * 10_240, "i": i}} for i in range(50)]
    assert setup.call({"cmd": "PUSHB", "queue": "big", "jobs": jobs})["ok"] is True
    setup.close()
    before = rss_bytes(pid)
    requests = b"".join(
        frame(msgpack.packb({"cmd": "GetJobs", "queue": "big", "state": "waiting", "limit": 50, "reqId": i}))
        for i in range(300)
    )
    client = RawClient(own_server.addr, timeout=30)
    client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    client.send_bytes(requests)
    time.sleep(1.5)
    grown = rss_bytes(pid) - before
    assert grown < 48 * 1024 * 1024, f"server grew by {grown / 1e6:.0f} MB"
    answered = sorted(client.recv()["reqId"] for _ in range(300))
    assert answered == list(range(300))
    assert len(client.call({"cmd": "GetJobs", "queue": "big", "limit": 50, "reqId": "x"})["jobs"]) == 50
    client.close()
