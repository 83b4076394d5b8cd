"""Wire values PostgreSQL cannot hold as they are (``storage.postgres.pgtext``): strings with NUL or a
backslash round-trip exactly, integers past bigint are as good as never, and ids that are lists or maps name
no job; every reply is the memory engine's, and a bad request in a batched statement refuses only itself."""
from __future__ import annotations

from typing import Any

import pytest

from bunqueue import errors
from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.server import ServerProcess
from bunqueue._testbase.twins import Twins
from bunqueue.storage.postgres.pgtext import MAX_KEY_CHARS

pytestmark = pytest.mark.usefixtures("postgres")

ODD = "j\x00\\0\\"


def test_nul_and_backslash_in_a_jobs_strings_round_trip(twins: Twins) -> None:
    q = "wv-strings"
    pushed = twins.same({"cmd": "PUSH", "queue": q, "data": {"s": ODD}, "jobId": ODD, "uniqueKey": "k" + ODD,
                         "groupId": "g" + ODD})
    assert pushed["id"] == ODD
    assert twins.same({"cmd": "GetJob", "id": ODD})["job"]["id"] == ODD
    assert twins.same({"cmd": "GetJobByCustomId", "customId": ODD})["job"]["id"] == ODD
    assert twins.same({"cmd": "GetDeduplicationJobId", "queue": q, "deduplicationId": "k" + ODD})["data"] == {
        "jobId": ODD}
    # The same custom id again answers the live job; another id with the same key answers it too.
    assert twins.same({"cmd": "PUSH", "queue": q, "data": 2, "jobId": ODD})["id"] == ODD
    assert twins.same({"cmd": "PUSH", "queue": q, "data": 3, "uniqueKey": "k" + ODD})["id"] == ODD
    pulled = twins.both({"cmd": "PULL", "queue": q, "owner": "w" + ODD, "lockTtl": 30000})
    assert [reply["job"]["id"] for reply in pulled] == [ODD, ODD]
    tokens = [reply["token"] for reply in pulled]

    def ack(job_id: str, suffix: str = "", **more: Any) -> dict[str, Any]:
        replies = [client.call({"cmd": "ACK", "id": job_id, "token": token + suffix, **more})
                   for client, token in zip((twins.memory, twins.postgres), tokens)]
        assert replies[0] == replies[1]
        return replies[1]

    assert ack("j\x00") == {"ok": False, "error": errors.not_processing("j\x00")}
    assert ack(ODD, "\x00") == {"ok": False, "error": errors.invalid_lock_token(ODD)}
    assert ack(ODD, result=ODD) == {"ok": True}
    assert twins.same({"cmd": "GetResult", "id": ODD})["result"] == ODD


@pytest.mark.parametrize("cmd", ["ACK", "FAIL"])
@pytest.mark.parametrize("job_id", [["a"], {"a": 1}, "x\x00", "x\\"])
def test_an_id_no_job_holds_is_refused_as_in_memory(twins: Twins, cmd: str, job_id: Any) -> None:
    for token in ("t", "t\x00", ["t"], None):
        twins.same({"cmd": cmd, "id": job_id, "token": token})
    twins.same({"cmd": "ACKB", "ids": [job_id], "tokens": ["t\x00"]})


def _pushed_and_pulled(client: RawClient, queue: str, n: int) -> list[tuple[str, str]]:
    for i in range(n):
        client.ok({"cmd": "PUSH", "queue": queue, "data": i})
    pulled = client.ok({"cmd": "PULLB", "queue": queue, "count": n, "owner": "w", "lockTtl": 60000})
    return [(job["id"], token) for job, token in zip(pulled["jobs"], pulled["tokens"])]


def test_a_bad_ack_in_a_flush_refuses_only_itself(pg_server: ServerProcess) -> None:
    client = RawClient(pg_server.addr)
    try:
        held = _pushed_and_pulled(client, "wv-flush", 4)
        bad: list[dict[str, Any]] = [
            {"cmd": "ACK", "id": "z\x00", "token": "t\x00"}, {"cmd": "ACK", "id": ["z"], "token": "t"},
            {"cmd": "FAIL", "id": {"z": 1}, "token": "t"}, {"cmd": "ACKB", "ids": ["z\x00"], "tokens": ["t"]},
        ]
        frames = [dict(frame, reqId=f"bad-{i}") for i, frame in enumerate(bad)]
        frames += [{"cmd": "ACK", "id": job_id, "token": token, "reqId": f"good-{i}"}
                   for i, (job_id, token) in enumerate(held)]
        for frame in frames:  # pipelined: the acks share flushes
            client.send(frame)
        replies = {reply["reqId"]: reply for reply in (client.recv() for _ in frames)}
        for i in range(len(held)):
            assert replies[f"good-{i}"] == {"ok": True, "reqId": f"good-{i}"}
        for i in range(len(bad)):
            assert replies[f"bad-{i}"]["ok"] is False
            assert "Internal" not in replies[f"bad-{i}"]["error"]
        for job_id, _token in held:
            assert client.ok({"cmd": "GetState", "id": job_id})["state"] == "completed"
    finally:
        client.close()


def test_numbers_past_bigint_are_as_in_memory(twins: Twins) -> None:
    q = "wv-big"
    twins.same({"cmd": "PUSH", "queue": q, "data": 1})
    huge = 1e30
    pulled = twins.both({"cmd": "PULL", "queue": q, "owner": "w", "lockTtl": huge})
    assert twins.postgres_names(pulled[1]) == twins.memory_names(pulled[0])
    acks = [client.call({"cmd": "ACK", "id": reply["job"]["id"], "token": reply["token"]})
            for client, reply in zip((twins.memory, twins.postgres), pulled)]
    assert acks == [{"ok": True}, {"ok": True}]
    twins.same({"cmd": "PUSH", "queue": q, "data": 2, "delay": 60000})
    assert twins.same({"cmd": "PromoteJobs", "queue": q, "count": huge}) == {"ok": True, "count": 1}
    twins.same({"cmd": "PULL", "queue": q, "owner": "w", "lockTtl": 2 ** 64 - 1})


def test_discard_files_a_queued_or_running_job_in_the_dlq(twins: Twins) -> None:
    q = "wv-discard"
    twins.same({"cmd": "PUSH", "queue": q, "data": 1, "uniqueKey": "dk", "removeOnFail": True})
    twins.same({"cmd": "PUSH", "queue": q, "data": 2, "delay": 60000})
    twins.same({"cmd": "PUSH", "queue": q, "data": 3})
    assert twins.same({"cmd": "Discard", "id": "$0"}) == {"ok": True}
    assert twins.same({"cmd": "Discard", "id": "$1"}) == {"ok": True}
    assert twins.same({"cmd": "GetState", "id": "$0"})["state"] == "failed"
    twins.same({"cmd": "GetDlq", "queue": q})
    twins.same({"cmd": "GetJob", "id": "$1"})
    # The key left with the job, as in memory.
    twins.same({"cmd": "GetDeduplicationJobId", "queue": q, "deduplicationId": "dk"})
    pulled = twins.both({"cmd": "PULL", "queue": q, "owner": "w", "lockTtl": 30000})
    for client, reply in zip((twins.memory, twins.postgres), pulled):
        assert client.call({"cmd": "Discard", "id": reply["job"]["id"]}) == {
            "ok": False, "error": errors.lock_token_required(reply["job"]["id"])}
        assert client.call({"cmd": "Discard", "id": reply["job"]["id"], "token": "x"}) == {
            "ok": False, "error": errors.invalid_lock_token(reply["job"]["id"])}
        assert client.call({"cmd": "Discard", "id": reply["job"]["id"], "token": reply["token"]}) == {"ok": True}
    twins.same({"cmd": "GetJob", "id": "$2"})
    twins.same({"cmd": "GetDlq", "queue": q})
    for missing in ("$2", "nope", "n\x00", ["x"], {"x": 1}, 5, None):
        twins.same({"cmd": "Discard", "id": missing})


@pytest.mark.parametrize("limit", [
    {"limit": 1e308, "duration": 1e-300}, {"limit": 1, "duration": 1e-320}, {"limit": 1e300},
    {"limit": 1e-300, "duration": 1e300}, {"limit": 1e308}, {"limit": -5},
])
def test_a_rate_past_float_range_claims_as_in_memory(twins: Twins, limit: dict[str, float]) -> None:
    q = f"wv-rate-{abs(hash(str(limit)))}"
    assert twins.same({"cmd": "RateLimit", "queue": q, **limit}) == {"ok": True}
    for i in range(3):
        twins.same({"cmd": "PUSH", "queue": q, "data": i})
    taken = [twins.both({"cmd": "PULL", "queue": q, "owner": "w", "timeout": 0}) for _ in range(3)]
    assert [[reply["ok"] for reply in pair] for pair in taken] == [[True, True]] * 3
    assert [[reply["job"] is not None for reply in pair] for pair in taken] == [
        [memory["job"] is not None] * 2 for memory, _ in taken]


def test_a_lease_or_delay_past_bigint_is_answered_as_in_memory(twins: Twins) -> None:
    q = "wv-far"
    twins.same({"cmd": "PUSH", "queue": q, "data": 1})
    pulled = twins.both({"cmd": "PULL", "queue": q, "owner": "w", "lockTtl": 30000})
    for frame in ({"cmd": "ExtendLock", "duration": 1e300}, {"cmd": "ExtendLocks", "durations": [1e300]},
                  {"cmd": "JobHeartbeat", "duration": -1e300}, {"cmd": "MoveToDelayed", "delay": 1e300}):
        replies = []
        for client, reply in zip((twins.memory, twins.postgres), pulled):
            job_id, token = reply["job"]["id"], reply["token"]
            sent = {**frame, "id": job_id, "token": token}
            if frame["cmd"] == "ExtendLocks":
                sent = {**frame, "ids": [job_id], "tokens": [token]}
            replies.append(client.call(sent))
        assert replies[0] == replies[1], (frame, replies)
    assert twins.same({"cmd": "GetState", "id": "$0"})["state"] == "delayed"
    assert twins.same({"cmd": "ChangeDelay", "id": "$0", "delay": 1e300}) == {"ok": True}
    assert twins.same({"cmd": "ChangeDelay", "id": "$0", "delay": -1e300}) == {"ok": True}
    assert twins.same({"cmd": "GetState", "id": "$0"})["state"] in ("waiting", "prioritized")


def test_a_key_too_long_for_an_index_refuses_only_its_push(pg_server: ServerProcess) -> None:
    client = RawClient(pg_server.addr)
    try:
        long_id, long_key = "\U0001f600" * (MAX_KEY_CHARS + 1), "k" * (MAX_KEY_CHARS + 1)
        frames: list[dict[str, Any]] = [
            {"cmd": "PUSH", "queue": "wv-long", "data": 1, "jobId": long_id, "reqId": "id"},
            {"cmd": "PUSHB", "queue": "wv-long", "jobs": [{"data": 2}, {"data": 3, "uniqueKey": long_key}],
             "reqId": "key"},
            {"cmd": "PUSH", "queue": "wv-long", "data": 4, "jobId": "\U0001f600" * MAX_KEY_CHARS, "reqId": "fits"},
            {"cmd": "PUSH", "queue": "wv-long", "data": 5, "reqId": "plain"},
        ]
        for frame in frames:
            client.send(frame)
        replies = {reply["reqId"]: reply for reply in (client.recv() for _ in frames)}
        assert replies["id"] == {"ok": False, "error": errors.must_be_at_most_chars("jobId", MAX_KEY_CHARS),
                                 "reqId": "id"}
        assert replies["key"] == {
            "ok": False, "error": errors.must_be_at_most_chars("uniqueKey", MAX_KEY_CHARS), "reqId": "key"}
        assert replies["fits"]["ok"] is True and replies["fits"]["id"] == "\U0001f600" * MAX_KEY_CHARS
        assert replies["plain"]["ok"] is True
        assert client.call({"cmd": "GetJobCounts", "queue": "wv-long"})["counts"]["waiting"] == 2
        assert client.call({"cmd": "RegisterWorker", "workerId": long_id, "queues": ["wv-long"]}) == {
            "ok": False, "error": errors.must_be_at_most_chars("workerId", MAX_KEY_CHARS)}
        assert client.call({"cmd": "Cron", "name": long_id, "queue": "wv-long", "schedule": "* * * * *"}) == {
            "ok": False, "error": errors.must_be_at_most_chars("name", MAX_KEY_CHARS)}
        fits = "\U0001f600" * MAX_KEY_CHARS
        assert client.call({"cmd": "Cron", "name": fits, "queue": "wv-long", "schedule": "* * * * *"})["ok"] is True
        registered = client.call({"cmd": "RegisterWorker", "workerId": fits, "queues": ["wv-long"]})
        assert registered["ok"] is True and registered["data"]["workerId"] == fits
    finally:
        client.close()
