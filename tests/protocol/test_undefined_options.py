"""Raw frames with JS `undefined` (d4 00 00) where published clients put it: an option sent as undefined is
absent at any depth, payload keeps it byte for byte, and an undefined element of a list gets a clear error."""
from __future__ import annotations

import struct

import msgpack

from bunqueue._testbase.frames import RawClient

UNDEFINED = msgpack.ExtType(0, b"\x00")


def send_body(raw: RawClient, body: bytes) -> dict:
    raw.send_bytes(struct.pack(">I", len(body)) + body)
    reply: dict = raw.recv()
    return reply


def test_pushb_job_options_sent_as_undefined(raw: RawClient) -> None:
    # bunqueue 2.7.x Queue.add: {cmd: 'PUSHB', queue: 'undef-pushb', jobs: [{name: 'send', data: {to: 'a'},
    # priority: undefined, delay: undefined, maxAttempts: undefined}], reqId: 'r1'}
    body = (b"\x84\xa3cmd\xa5PUSHB\xa5queue\xabundef-pushb\xa4jobs\x91"
            b"\x85\xa4name\xa4send\xa4data\x81\xa2to\xa1a"
            b"\xa8priority\xd4\x00\x00\xa5delay\xd4\x00\x00\xabmaxAttempts\xd4\x00\x00"
            b"\xa5reqId\xa2r1")
    reply = send_body(raw, body)
    assert reply["ok"] is True and reply["reqId"] == "r1", reply
    job = raw.call({"cmd": "GetJob", "id": reply["ids"][0]})["job"]
    assert [job["name"], job["data"], job["priority"], job["runAt"], job["maxAttempts"]] == [
        "send", {"to": "a"}, 0, job["createdAt"], 3]
    assert raw.call({"cmd": "GetState", "id": job["id"]})["state"] == "waiting"


def test_pushb_dedup_options_sent_as_undefined(raw: RawClient) -> None:
    # {cmd: 'PUSHB', queue: 'undef-dedup', jobs: [{name: 'once', data: {v: 1}, uniqueKey: 'k',
    # dedup: {ttl: 60000, extend: undefined, replace: undefined}}]}, twice: the second is the first job.
    body = (b"\x83\xa3cmd\xa5PUSHB\xa5queue\xabundef-dedup\xa4jobs\x91"
            b"\x84\xa4name\xa4once\xa4data\x81\xa1v\x01\xa9uniqueKey\xa1k"
            b"\xa5dedup\x83\xa3ttl\xcd\xea\x60\xa6extend\xd4\x00\x00\xa7replace\xd4\x00\x00")
    first = send_body(raw, body)
    assert first["ok"] is True, first
    second = send_body(raw, body)
    assert second == first
    assert raw.call({"cmd": "GetDeduplicationJobId", "queue": "undef-dedup", "deduplicationId": "k"})["data"] == {
        "jobId": first["ids"][0]}
    job = raw.call({"cmd": "GetJob", "id": first["ids"][0]})["job"]
    assert [job["deduplicationTtl"], job["deduplicationExtend"], job["deduplicationReplace"]] == [60_000, False, False]


def test_nested_option_maps_sent_as_undefined(raw: RawClient) -> None:
    pushed = raw.call({
        "cmd": "PUSH", "queue": "undef-nested-opts", "name": "n", "data": 1,
        "backoff": {"type": "fixed", "delay": 250, "maxDelay": UNDEFINED},
        "repeat": {"every": 60_000, "limit": UNDEFINED, "pattern": UNDEFINED},
    })
    assert pushed["ok"] is True, pushed
    job = raw.call({"cmd": "GetJob", "id": pushed["id"]})["job"]
    assert job["backoff"] == 250 and job["repeat"]["every"] == 60_000 and "limit" not in job["repeat"]
    pulled = raw.call({"cmd": "PULLB", "queue": "undef-nested-opts", "count": 1, "timeout": UNDEFINED,
                       "group": {"concurrency": UNDEFINED, "limit": {"max": 5, "duration": 1000}}})
    assert pulled["ok"] is True, pulled


def test_undefined_inside_job_data_of_a_batch_round_trips(raw: RawClient) -> None:
    data = {"a": UNDEFINED, "b": [1, UNDEFINED], "delay": UNDEFINED}
    pushed = raw.call({"cmd": "PUSHB", "queue": "undef-batch-data",
                       "jobs": [{"name": "d", "data": data, "delay": UNDEFINED}]})
    assert pushed["ok"] is True, pushed
    raw.send({"cmd": "GetJob", "id": pushed["ids"][0]})
    assert msgpack.packb(data) in raw.raw_frame()


def test_undefined_in_a_list_of_options_gets_a_clear_error(raw: RawClient) -> None:
    reply = raw.call({"cmd": "PUSHB", "queue": "undef-list", "jobs": [UNDEFINED, {"name": "a", "data": 1}]})
    assert reply == {"ok": False, "error": "jobs[0]: job must be an object"}
    reply = raw.call({"cmd": "PUSHB", "queue": "undef-list", "jobs": [{"name": "a", "data": 1, "tags": [UNDEFINED]}]})
    assert reply == {"ok": False, "error": "jobs[0]: tags must be an array of strings of at most 256 characters"}
    reply = raw.call({"cmd": "ACKB", "ids": [UNDEFINED]})
    assert reply["ok"] is False and reply["error"].startswith("Job not found or not in processing state"), reply
    assert raw.call({"cmd": "Count", "queue": "undef-list"})["count"] == 0
    assert raw.call({"cmd": "Ping", "reqId": "alive"})["reqId"] == "alive"
