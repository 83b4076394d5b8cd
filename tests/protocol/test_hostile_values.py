"""Values the encoder cannot write back never reach a job, and bad arguments never crash a command.

Frames are built by hand: msgpack-python's own packer refuses the nesting these tests need.
"""
from __future__ import annotations

import struct
import time
from typing import Any

import msgpack
import pytest

from bunqueue._testbase.frames import RawClient
from bunqueue.errors import MAX_VALUE_DEPTH

TIMESTAMP = b"\xd6\xff\x00\x00\x00\x01"  # msgpack timestamp 32: one second after the epoch
NESTED_ERROR = f"must not be nested more than {MAX_VALUE_DEPTH} levels deep"


def nested(levels: int, leaf: bytes = b"\x01") -> bytes:
    """``levels`` one-element arrays around ``leaf``, as raw MessagePack."""
    return b"\x91" * levels + leaf


def request(fields: dict[str, Any], raw_fields: dict[str, bytes] | None = None) -> bytes:
    """A frame of a map of ``fields`` plus fields whose values are given as raw MessagePack."""
    raw_fields = raw_fields or {}
    body = bytearray(b"\xde" + struct.pack(">H", len(fields) + len(raw_fields)))
    for key, value in fields.items():
        body += msgpack.packb(key) + msgpack.packb(value, use_bin_type=True)
    for key, raw_value in raw_fields.items():
        body += msgpack.packb(key) + raw_value
    return struct.pack(">I", len(body)) + bytes(body)


def call(raw: RawClient, fields: dict[str, Any], raw_fields: dict[str, bytes] | None = None) -> Any:
    raw.send_bytes(request(fields, raw_fields))
    return raw.recv()


def test_timestamp_data_is_delivered_with_the_healthy_job_of_the_same_batch(
    raw: RawClient, queue_name: str
) -> None:
    healthy = call(raw, {"cmd": "PUSH", "queue": queue_name, "data": {"n": 1}, "maxAttempts": 1})
    stamped = call(raw, {"cmd": "PUSH", "queue": queue_name}, {"data": TIMESTAMP})
    assert healthy["ok"] is True and stamped["ok"] is True

    raw.send({"cmd": "PULLB", "queue": queue_name, "count": 10, "owner": "w", "lockTtl": 300})
    body = raw.raw_frame()
    reply = msgpack.unpackb(body, raw=False, strict_map_key=False)
    assert reply["ok"] is True
    assert [job["id"] for job in reply["jobs"]] == [healthy["id"], stamped["id"]]
    # The timestamp goes back out as the same six bytes the client wrote.
    assert b"\xa4data" + TIMESTAMP in body
    assert reply["jobs"][1]["data"] == msgpack.Timestamp(1, 0)

    for job_id, token in zip([healthy["id"], stamped["id"]], reply["tokens"], strict=True):
        assert call(raw, {"cmd": "ACK", "id": job_id, "token": token}) == {"ok": True}
    time.sleep(0.5)  # past the 300 ms lease: an undelivered job would be failed by now
    assert call(raw, {"cmd": "GetState", "id": healthy["id"]})["state"] == "completed"

    raw.send({"cmd": "GetJob", "id": stamped["id"]})
    assert b"\xa4data" + TIMESTAMP in raw.raw_frame()


@pytest.mark.parametrize("cmd", ["PULL", "GetJob"])
def test_timestamp_data_round_trips_through_pull_and_get_job(raw: RawClient, queue_name: str, cmd: str) -> None:
    pushed = call(raw, {"cmd": "PUSH", "queue": queue_name}, {"data": b"\x81\xa2at" + TIMESTAMP})
    raw.send({"cmd": cmd, "queue": queue_name, "id": pushed["id"]})
    body = raw.raw_frame()
    assert msgpack.unpackb(body, raw=False)["ok"] is True
    assert b"\xa2at" + TIMESTAMP in body


def test_deepest_admitted_data_is_delivered(raw: RawClient, queue_name: str) -> None:
    pushed = call(raw, {"cmd": "PUSH", "queue": queue_name}, {"data": nested(MAX_VALUE_DEPTH)})
    assert pushed["ok"] is True
    raw.send({"cmd": "PULLB", "queue": queue_name, "count": 5})
    body = raw.raw_frame()
    assert msgpack.unpackb(body, raw=False)["ok"] is True
    assert b"\xa4data" + nested(MAX_VALUE_DEPTH) in body


@pytest.mark.parametrize("levels", [MAX_VALUE_DEPTH + 1, 1000])
def test_push_refuses_data_nested_too_deeply(raw: RawClient, queue_name: str, levels: int) -> None:
    reply = call(raw, {"cmd": "PUSH", "queue": queue_name}, {"data": nested(levels)})
    assert reply == {"ok": False, "error": f"data {NESTED_ERROR}"}
    assert call(raw, {"cmd": "Count", "queue": queue_name})["count"] == 0


def test_pushb_refuses_the_batch_naming_the_deep_job(raw: RawClient, queue_name: str) -> None:
    jobs = b"\x92" + msgpack.packb({"data": 1}) + b"\x81\xa4data" + nested(MAX_VALUE_DEPTH + 1)
    reply = call(raw, {"cmd": "PUSHB", "queue": queue_name}, {"jobs": jobs})
    assert reply == {"ok": False, "error": f"jobs[1]: data {NESTED_ERROR}"}
    assert call(raw, {"cmd": "Count", "queue": queue_name})["count"] == 0


def test_update_refuses_deep_data_and_keeps_the_old(raw: RawClient, queue_name: str) -> None:
    job_id = call(raw, {"cmd": "PUSH", "queue": queue_name, "data": {"v": 1}})["id"]
    reply = call(raw, {"cmd": "Update", "id": job_id}, {"data": nested(MAX_VALUE_DEPTH + 1)})
    assert reply == {"ok": False, "error": f"data {NESTED_ERROR}"}
    assert call(raw, {"cmd": "GetJob", "id": job_id})["job"]["data"] == {"v": 1}


def test_ack_refuses_a_deep_result_and_keeps_the_job_active(raw: RawClient, queue_name: str) -> None:
    call(raw, {"cmd": "PUSH", "queue": queue_name, "data": 1})
    pulled = call(raw, {"cmd": "PULL", "queue": queue_name, "owner": "w"})
    job_id, token = pulled["job"]["id"], pulled["token"]
    deep = nested(MAX_VALUE_DEPTH + 1)
    reply = call(raw, {"cmd": "ACK", "id": job_id, "token": token}, {"result": deep})
    assert reply == {"ok": False, "error": f"result {NESTED_ERROR}"}
    reply = call(raw, {"cmd": "ACKB", "ids": [job_id], "tokens": [token]}, {"results": b"\x91" + deep})
    assert reply == {"ok": False, "error": f"results[0]: result {NESTED_ERROR}"}
    assert call(raw, {"cmd": "GetState", "id": job_id})["state"] == "active"
    assert call(raw, {"cmd": "ACK", "id": job_id, "token": token}, {"result": TIMESTAMP}) == {"ok": True}
    raw.send({"cmd": "GetResult", "id": job_id})
    assert TIMESTAMP in raw.raw_frame()


@pytest.mark.parametrize("levels", [MAX_VALUE_DEPTH + 1, 1000])
def test_progress_refuses_a_deep_object_and_keeps_the_last(raw: RawClient, queue_name: str, levels: int) -> None:
    """A progress object's JSON becomes the message: one nested past the limit is refused, not encoded."""
    call(raw, {"cmd": "PUSH", "queue": queue_name, "data": 1})
    job_id = call(raw, {"cmd": "PULL", "queue": queue_name})["job"]["id"]
    assert call(raw, {"cmd": "Progress", "id": job_id, "progress": {"step": 1}}) == {"ok": True}
    reply = call(raw, {"cmd": "Progress", "id": job_id}, {"progress": nested(levels)})
    assert reply == {"ok": False, "error": f"progress {NESTED_ERROR}"}
    got = call(raw, {"cmd": "GetProgress", "id": job_id})
    assert (got["progress"], got["message"]) == (0, '{"step":1}')
    deepest = call(raw, {"cmd": "Progress", "id": job_id}, {"progress": nested(MAX_VALUE_DEPTH)})
    assert deepest == {"ok": True}
    message = call(raw, {"cmd": "GetProgress", "id": job_id})["message"]
    assert message == "[" * MAX_VALUE_DEPTH + "1" + "]" * MAX_VALUE_DEPTH


@pytest.mark.parametrize("cmd", ["PromoteJobs", "Dlq"])
def test_negative_infinite_count_is_a_cap_of_zero(raw: RawClient, queue_name: str, cmd: str) -> None:
    call(raw, {"cmd": "PUSH", "queue": queue_name, "data": 1, "delay": 60_000})
    reply = call(raw, {"cmd": cmd, "queue": queue_name, "count": float("-inf")})
    assert reply["ok"] is True
    assert reply.get("count", 0) == 0 and reply.get("jobs", []) == []
    assert call(raw, {"cmd": "GetJobCounts", "queue": queue_name})["counts"]["delayed"] == 1


@pytest.mark.parametrize("cmd", ["ACK", "FAIL"])
def test_deeply_nested_id_is_an_unknown_job(raw: RawClient, cmd: str) -> None:
    reply = call(raw, {"cmd": cmd}, {"id": nested(1000, msgpack.packb("x"))})
    assert reply == {"ok": False, "error": "Job not found or not in processing state: x"}


def test_ackb_with_a_deeply_nested_id_names_the_job_not_found(raw: RawClient) -> None:
    reply = call(raw, {"cmd": "ACKB"}, {"ids": b"\x91" + nested(1000, msgpack.packb("x"))})
    assert reply["ok"] is False and reply["error"].endswith("x") and "not found" in reply["error"]


def test_a_wide_id_is_quoted_only_in_part(raw: RawClient) -> None:
    reply = call(raw, {"cmd": "ACK", "id": list(range(5000))})
    assert reply["ok"] is False
    assert reply["error"].startswith("Job not found or not in processing state: 0,1,2,3,")
    assert len(reply["error"]) < 400
