"""The job lifecycle past the hot path and the DLQ in PostgreSQL mode, against the memory engine: FAIL's
error, stack, backoff and DLQ entry, removeOnComplete/removeOnFail and the per-call remove, a pull without
an owner, lapsed leases and maxStalls, and the DLQ commands; across two brokers on one namespace too."""
from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.postgres import PostgresServer
from bunqueue._testbase.twins import Twins
from tests.storage.postgres.ops.conftest import postgres_broker

pytestmark = pytest.mark.usefixtures("postgres")

Reply = dict[str, Any]


def _pull_both(twins: Twins, queue: str, **opts: Any) -> tuple[Reply, Reply]:
    """A PULL on both servers, its replies compared; (memory's, PostgreSQL's) for their tokens."""
    memory, postgres = twins.both({"cmd": "PULL", "queue": queue, **opts})
    assert twins.postgres_names(postgres) == twins.memory_names(memory), (memory, postgres)
    return memory, postgres


def _settle_both(twins: Twins, frame: Reply, memory_token: Any, postgres_token: Any) -> Reply:
    """An ACK or FAIL (its ``id`` "$k": the k-th id each server gave) carrying each server's own token; the
    replies compared."""
    k = int(frame["id"][1:])
    memory = twins.memory.call({**frame, "id": twins.memory_ids[k], "token": memory_token})
    postgres = twins.postgres.call({**frame, "id": twins.postgres_ids[k], "token": postgres_token})
    assert twins.postgres_names(postgres) == twins.memory_names(memory), (frame, memory, postgres)
    return postgres


def test_failures_retry_then_exhaust_into_the_dlq_as_in_memory(twins: Twins) -> None:
    q = "dlq-exhaust"
    twins.same({"cmd": "PUSH", "queue": q, "name": "doomed", "data": {"x": 1}, "maxAttempts": 2, "backoff": 0})
    _pull_both(twins, q)
    twins.same({"cmd": "FAIL", "id": "$0", "error": "first", "stack": ["at a", "at b"]})
    pulled = twins.same({"cmd": "PULL", "queue": q})
    # The retry carries the first failure's stack and its failed/waiting timeline.
    assert pulled["job"]["attempts"] == 1 and pulled["job"]["stacktrace"] == ["at a", "at b"]
    twins.same({"cmd": "FAIL", "id": "$0", "error": "second"})
    listed = twins.same({"cmd": "Dlq", "queue": q})
    (entry,) = listed["entries"]
    assert (entry["reason"], entry["error"]) == ("max_attempts_exceeded", "second")
    assert [(a["attempt"], a["reason"], a["error"]) for a in entry["attempts"]] == [
        (1, "explicit_fail", "first"), (2, "max_attempts_exceeded", "second")]
    stats = twins.same({"cmd": "GetDlqStats", "queue": q})
    assert stats["data"]["stats"]["total"] == 1
    twins.same({"cmd": "Dlq", "queue": q, "filter": {"reason": "explicit_fail"}})
    twins.same({"cmd": "PULL", "queue": q, "timeout": 0})


def test_a_failed_attempt_waits_its_backoff_before_the_retry(twins: Twins) -> None:
    q = "dlq-backoff"
    twins.same({"cmd": "PUSH", "queue": q, "data": 1, "backoff": {"type": "fixed", "delay": 400}})
    _pull_both(twins, q)
    twins.same({"cmd": "FAIL", "id": "$0", "error": "later"})
    assert twins.same({"cmd": "PULL", "queue": q})["job"] is None
    # Fixed backoff: 400 ms +-20 %; a long-poll is woken when the retry comes due.
    again = twins.same({"cmd": "PULL", "queue": q, "timeout": 3000})
    assert again["job"]["attempts"] == 1


def test_remove_on_complete_and_remove_on_fail_job_options_and_per_call(twins: Twins) -> None:
    q = "dlq-remove"
    for opts in ({"removeOnComplete": True}, {"removeOnFail": True, "maxAttempts": 1}, {}, {"maxAttempts": 1}):
        twins.same({"cmd": "PUSH", "queue": q, "data": 1, **opts})
    for _ in range(4):
        _pull_both(twins, q)
    twins.same({"cmd": "ACK", "id": "$0", "result": "kept?"})
    twins.same({"cmd": "FAIL", "id": "$1", "error": "gone"})
    twins.same({"cmd": "ACK", "id": "$2", "result": "r", "removeOnComplete": True})
    twins.same({"cmd": "FAIL", "id": "$3", "error": "x", "removeOnFail": True})
    # Nothing was kept: no DLQ entry, no completed job to retry.
    assert twins.same({"cmd": "Dlq", "queue": q})["entries"] == []
    assert twins.same({"cmd": "RetryCompleted", "queue": q}) == {"ok": True, "count": 0}


def test_a_pull_without_owner_is_settled_without_a_token(twins: Twins) -> None:
    q = "dlq-ownerless"
    for _ in range(3):
        twins.same({"cmd": "PUSH", "queue": q, "data": 1, "maxAttempts": 1})
    pulled = twins.same({"cmd": "PULLB", "queue": q, "count": 2})
    assert "tokens" not in pulled or pulled["tokens"] is None or pulled["tokens"] == []
    twins.same({"cmd": "ACK", "id": "$0", "result": "done"})
    twins.same({"cmd": "ACK", "id": "$0"})
    twins.same({"cmd": "FAIL", "id": "$1", "error": "no token", "token": "anything"})
    _memory, postgres = _pull_both(twins, q, owner="w")
    assert type(postgres["token"]) is str
    twins.same({"cmd": "ACK", "id": "$2"})
    twins.same({"cmd": "ACKB", "ids": ["$2"]})
    twins.same({"cmd": "Dlq", "queue": q})


def test_dlq_retry_remove_purge_and_config_as_in_memory(twins: Twins) -> None:
    q = "dlq-ops"
    twins.same({"cmd": "PUSHB", "queue": q, "jobs": [{"name": n, "data": i, "maxAttempts": 1}
                                                      for i, n in enumerate("abcde")]})
    for _ in range(5):
        _pull_both(twins, q)
    for k in range(5):
        twins.same({"cmd": "FAIL", "id": f"${k}", "error": f"e{k}"})
    twins.same({"cmd": "Dlq", "queue": q, "count": 2})
    twins.same({"cmd": "Dlq", "queue": q, "filter": {"limit": 2, "offset": 1}})
    twins.same({"cmd": "RetryDlq", "queue": q, "jobId": "$0"})
    twins.same({"cmd": "RemoveDlqJob", "queue": q, "jobId": "$1"})
    twins.same({"cmd": "RemoveDlqJob", "queue": q, "jobId": "$1"})
    twins.same({"cmd": "GetDlqConfig", "queue": q})
    twins.same({"cmd": "SetDlqConfig", "queue": q, "config": {"maxEntries": 2, "autoRetry": True, "maxAge": None}})
    twins.same({"cmd": "GetDlqConfig", "queue": q})
    twins.same({"cmd": "Dlq", "queue": q})
    assert twins.same({"cmd": "GetDlqStats", "queue": q})["data"]["stats"]["total"] == 2
    assert twins.same({"cmd": "PurgeDlq", "queue": q})["count"] == 2
    twins.same({"cmd": "Dlq", "queue": q})
    # The retried job runs again from its first attempt.
    again = twins.same({"cmd": "PULL", "queue": q})
    assert (again["job"]["data"], again["job"]["attempts"]) == (0, 0)
    twins.same({"cmd": "ACK", "id": "$0"})
    twins.same({"cmd": "RetryDlq", "queue": q})


def test_retry_completed_by_id_and_in_bulk_as_in_memory(twins: Twins) -> None:
    q = "dlq-completed"
    twins.same({"cmd": "PUSHB", "queue": q, "jobs": [{"data": i} for i in range(3)]})
    for k in range(3):
        _pull_both(twins, q)
        twins.same({"cmd": "ACK", "id": f"${k}", "result": k})
    assert twins.same({"cmd": "RetryCompleted", "queue": q, "id": "$1"})["count"] == 1
    assert twins.same({"cmd": "RetryCompleted", "queue": q, "id": "$1"})["count"] == 0
    again = twins.same({"cmd": "PULL", "queue": q})
    assert again["job"]["data"] == 1
    twins.same({"cmd": "ACK", "id": "$1", "result": "again"})
    # Oldest completion first ($0); the two restarted together run in admission order.
    assert twins.same({"cmd": "RetryCompleted", "queue": q, "count": 1})["count"] == 1
    assert twins.same({"cmd": "RetryCompleted", "queue": q})["count"] == 2
    assert [job["data"] for job in twins.same({"cmd": "PULLB", "queue": q, "count": 5})["jobs"]] == [0, 1, 2]


def test_stall_config_and_a_lapsed_lease_charged_up_to_max_stalls(twins: Twins) -> None:
    q = "dlq-stalls"
    twins.same({"cmd": "GetStallConfig", "queue": q})
    twins.same({"cmd": "SetStallConfig", "queue": q, "config": {"maxStalls": 2, "stallInterval": "7000"}})
    twins.same({"cmd": "GetStallConfig", "queue": q})
    twins.same({"cmd": "PUSH", "queue": q, "data": 1, "maxAttempts": 5})
    for _ in range(2):
        _pull_both(twins, q, owner="w", lockTtl=100)
        # Each lease lapses unrenewed; the second lapse is the queue's maxStalls.
        time.sleep(1.2)
    listed = twins.same({"cmd": "Dlq", "queue": q})
    (entry,) = listed["entries"]
    assert (entry["reason"], entry["error"]) == ("stalled", "Lock expired")


def test_a_late_fail_or_ack_after_the_lease_lapsed_as_in_memory(twins: Twins) -> None:
    q = "dlq-late"
    twins.same({"cmd": "PUSHB", "queue": q, "jobs": [{"data": 0}, {"data": 1}]})
    memory_pull, postgres_pull = twins.both({"cmd": "PULLB", "queue": q, "count": 2, "owner": "w", "lockTtl": 100})
    # Both leases lapse unrenewed: the jobs wait in their queue again, their attempt charged.
    time.sleep(1.2)
    tokens = list(zip(memory_pull["tokens"], postgres_pull["tokens"]))
    late = _settle_both(twins, {"cmd": "FAIL", "id": "$0", "error": "late"}, *tokens[0])
    assert late == {"ok": True, "data": {"applied": False, "reason": "already-finalized"}}
    # A late ACK completes the job where it waits; ACKB too.
    assert _settle_both(twins, {"cmd": "ACK", "id": "$0", "result": "done"}, *tokens[0]) == {"ok": True}
    memory = twins.memory.call({"cmd": "ACKB", "ids": [memory_pull["jobs"][1]["id"]], "tokens": [tokens[1][0]]})
    postgres = twins.postgres.call({"cmd": "ACKB", "ids": [postgres_pull["jobs"][1]["id"]], "tokens": [tokens[1][1]]})
    assert memory == postgres == {"ok": True}
    twins.same({"cmd": "FAIL", "id": "$1", "error": "after", "token": "t"})
    assert twins.same({"cmd": "RetryCompleted", "queue": q})["count"] == 2


def test_a_full_dlq_drops_its_oldest_entries_as_in_memory(twins: Twins) -> None:
    q = "dlq-full"
    twins.same({"cmd": "SetDlqConfig", "queue": q, "config": {"maxEntries": 2}})
    twins.same({"cmd": "PUSHB", "queue": q, "jobs": [{"data": i, "maxAttempts": 1} for i in range(3)]})
    for k in range(3):
        _pull_both(twins, q)
        twins.same({"cmd": "FAIL", "id": f"${k}", "error": f"e{k}"})
    listed = twins.same({"cmd": "Dlq", "queue": q})
    assert [entry["error"] for entry in listed["entries"]] == ["e1", "e2"]


def test_the_dlq_retries_automatically_and_expires_entries_as_in_memory(twins: Twins) -> None:
    q, gone = "dlq-auto", "dlq-expiring"
    twins.same({"cmd": "SetDlqConfig", "queue": q,
                "config": {"autoRetry": True, "autoRetryInterval": 300, "maxAutoRetries": 1}})
    twins.same({"cmd": "SetDlqConfig", "queue": gone, "config": {"maxAge": 300}})
    twins.same({"cmd": "PUSH", "queue": q, "data": "a", "maxAttempts": 1})
    twins.same({"cmd": "PUSH", "queue": gone, "data": "g", "maxAttempts": 1})
    for k, queue in enumerate((q, gone)):
        _pull_both(twins, queue)
        twins.same({"cmd": "FAIL", "id": f"${k}", "error": "first"})
    # The retry comes due after 300 ms; the maintenance runs each second on the PostgreSQL broker.
    again = twins.same({"cmd": "PULL", "queue": q, "timeout": 3000})
    assert again["job"]["data"] == "a"
    twins.same({"cmd": "FAIL", "id": "$0", "error": "second"})
    (entry,) = twins.same({"cmd": "Dlq", "queue": q})["entries"]
    assert entry["retryCount"] == 1 and [a["error"] for a in entry["attempts"]] == ["first", "second"]
    time.sleep(1.5)
    assert twins.same({"cmd": "Dlq", "queue": gone})["entries"] == []
    assert len(twins.same({"cmd": "Dlq", "queue": q})["entries"]) == 1


def test_a_failed_attempt_frees_the_unique_key_and_a_retry_claims_it_anew(twins: Twins) -> None:
    q = "dlq-keys"
    twins.same({"cmd": "PUSH", "queue": q, "data": "first", "uniqueKey": "k", "maxAttempts": 2, "backoff": 0})
    twins.same({"cmd": "PUSH", "queue": q, "data": "dup", "uniqueKey": "k"})
    _pull_both(twins, q)
    twins.same({"cmd": "FAIL", "id": "$0", "error": "x"})
    # Waiting for its retry, the job no longer holds the key: a new push with it is a new job.
    twins.same({"cmd": "PUSH", "queue": q, "data": "second", "uniqueKey": "k", "maxAttempts": 1})
    for _ in range(2):
        _pull_both(twins, q)
    twins.same({"cmd": "FAIL", "id": "$0", "error": "y"})
    twins.same({"cmd": "FAIL", "id": "$2", "error": "z"})
    twins.same({"cmd": "PUSH", "queue": q, "data": "third", "uniqueKey": "k"})
    # The key is held by the live third job: neither DLQ entry may come back.
    assert twins.same({"cmd": "RetryDlq", "queue": q})["count"] == 0
    _pull_both(twins, q)
    twins.same({"cmd": "ACK", "id": "$3"})
    # Both entries share the key: the first retried takes it, the other stays.
    assert twins.same({"cmd": "RetryDlq", "queue": q})["count"] == 1
    assert twins.same({"cmd": "RetryDlq", "queue": q, "jobId": "$2"})["count"] == 0
    assert len(twins.same({"cmd": "Dlq", "queue": q})["entries"]) == 1


def test_a_job_failed_on_one_broker_is_in_the_dlq_of_another(postgres: PostgresServer) -> None:
    namespace = f"dlq-two-{uuid.uuid4().hex[:8]}"
    a = postgres_broker(postgres, namespace)
    b = postgres_broker(postgres, namespace)
    try:
        on_a, on_b = RawClient(a.addr), RawClient(b.addr)
        job_id = on_a.call({"cmd": "PUSH", "queue": "q", "data": 1, "maxAttempts": 2, "backoff": 0})["id"]
        pulled = on_a.call({"cmd": "PULL", "queue": "q", "owner": "w"})
        assert on_a.call({"cmd": "FAIL", "id": job_id, "token": pulled["token"], "error": "one"}) == {"ok": True}
        # The retry is claimed on B, and B's worker fails it for good.
        again = on_b.call({"cmd": "PULL", "queue": "q", "owner": "w", "timeout": 2000})
        assert (again["job"]["id"], again["job"]["attempts"]) == (job_id, 1)
        assert on_b.call({"cmd": "FAIL", "id": job_id, "token": again["token"], "error": "two"}) == {"ok": True}
        (entry,) = on_a.call({"cmd": "Dlq", "queue": "q"})["entries"]
        assert [a["error"] for a in entry["attempts"]] == ["one", "two"]
        assert on_a.call({"cmd": "RetryDlq", "queue": "q", "jobId": job_id}) == {"ok": True, "count": 1}
        assert on_b.call({"cmd": "PULL", "queue": "q", "timeout": 2000})["job"]["id"] == job_id
        assert on_b.call({"cmd": "Dlq", "queue": "q"})["entries"] == []
        on_a.close()
        on_b.close()
    finally:
        a.stop()
        b.stop()
