"""Queue rate and concurrency limits in PostgreSQL mode: the memory engine's replies, and a concurrency
limit that holds across brokers claiming at once."""
from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.postgres import PostgresServer
from bunqueue._testbase.twins import Twins
from tests.storage.postgres.ops.conftest import postgres_broker

pytestmark = pytest.mark.usefixtures("postgres")

NO_LIMITS = {"rateLimit": None, "rateLimitTtl": -2, "concurrencyLimit": None, "maxed": False}


def limits(twins: Twins, queue: str, **extra: Any) -> dict[str, Any]:
    reply = twins.same({"cmd": "GetQueueLimits", "queue": queue, **extra})
    return reply["data"]["limits"]  # type: ignore[no-any-return]


def ack_both(twins: Twins, pulled: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """Ack the job each server handed out, with that server's token."""
    memory, postgres = pulled
    assert twins.memory.call({"cmd": "ACK", "id": memory["job"]["id"], "token": memory["token"]}) == {"ok": True}
    assert twins.postgres.call({"cmd": "ACK", "id": postgres["job"]["id"], "token": postgres["token"]}) == {"ok": True}


def test_a_concurrency_limit_holds_running_jobs_until_one_finishes(twins: Twins) -> None:
    q = "lim-conc"
    assert limits(twins, q) == NO_LIMITS
    twins.same({"cmd": "SetConcurrency", "queue": q, "limit": 1})
    twins.same({"cmd": "PUSHB", "queue": q, "jobs": [{"name": f"j{i}", "data": i} for i in range(3)]})
    first = twins.both({"cmd": "PULL", "queue": q, "owner": "w"})
    assert first[0]["job"]["name"] == first[1]["job"]["name"] == "j0"
    assert twins.same({"cmd": "PULL", "queue": q, "owner": "w"})["job"] is None
    assert limits(twins, q) == {"rateLimit": None, "rateLimitTtl": -2, "concurrencyLimit": 1, "maxed": True}
    ack_both(twins, first)
    assert [job["name"] for job in twins.same({"cmd": "PULLB", "queue": q, "count": 5, "owner": "w"})["jobs"]] == ["j1"]
    twins.same({"cmd": "ClearConcurrency", "queue": q})
    assert twins.same({"cmd": "PULL", "queue": q, "owner": "w"})["job"]["name"] == "j2"
    assert limits(twins, q) == NO_LIMITS
    refused = twins.same({"cmd": "SetConcurrency", "queue": q, "limit": "x"})
    assert refused["ok"] is False and "limit" in refused["error"]


def test_a_fractional_concurrency_limit_rounds_the_free_room_up(twins: Twins) -> None:
    q = "lim-frac"
    twins.same({"cmd": "SetConcurrency", "queue": q, "limit": 1.5})
    twins.same({"cmd": "PUSHB", "queue": q, "jobs": [{"data": i} for i in range(4)]})
    assert len(twins.same({"cmd": "PULLB", "queue": q, "count": 4, "owner": "w"})["jobs"]) == 2
    assert limits(twins, q)["concurrencyLimit"] == 1.5
    twins.same({"cmd": "SetConcurrency", "queue": q, "limit": 0})
    assert limits(twins, q)["maxed"] is True
    twins.same({"cmd": "ClearConcurrency", "queue": q})
    twins.same({"cmd": "ClearConcurrency", "queue": "lim-never"})
    assert limits(twins, "lim-never") == NO_LIMITS


def test_a_rate_limit_spends_its_tokens_and_reports_its_cooldown(twins: Twins) -> None:
    q = "lim-rate"
    twins.same({"cmd": "RateLimit", "queue": q, "limit": 2, "duration": 60000})
    assert limits(twins, q) == {
        "rateLimit": {"max": 2, "duration": 60000}, "rateLimitTtl": 0, "concurrencyLimit": None, "maxed": False,
    }
    twins.same({"cmd": "PUSHB", "queue": q, "jobs": [{"name": f"j{i}", "data": i} for i in range(4)]})
    taken = twins.same({"cmd": "PULLB", "queue": q, "count": 10, "owner": "w"})
    assert [job["name"] for job in taken["jobs"]] == ["j0", "j1"]
    assert twins.same({"cmd": "PULL", "queue": q, "owner": "w"})["job"] is None
    memory, postgres = twins.both({"cmd": "GetQueueLimits", "queue": q})
    for reply in (memory, postgres):
        assert 0 < reply["data"]["limits"]["rateLimitTtl"] <= 60000, reply
        reply["data"]["limits"]["rateLimitTtl"] = "cooling"
    assert postgres == memory
    # Fewer than maxJobs tokens spent: no cooldown yet.
    assert limits(twins, q, maxJobs=3)["rateLimitTtl"] == 0
    twins.same({"cmd": "RateLimitClear", "queue": q})
    twins.same({"cmd": "RateLimitClear", "queue": q})
    assert twins.same({"cmd": "PULL", "queue": q, "owner": "w"})["job"]["name"] == "j2"
    assert limits(twins, q) == NO_LIMITS
    for bad in ({"limit": "abc"}, {}):
        refused = twins.same({"cmd": "RateLimit", "queue": q, **bad})
        assert refused["ok"] is False and "limit" in refused["error"]


def test_a_rate_limit_with_a_ttl_lapses_by_itself(twins: Twins) -> None:
    q = "lim-ttl"
    twins.same({"cmd": "RateLimit", "queue": q, "limit": 0, "ttl": 300})
    twins.same({"cmd": "PUSH", "queue": q, "data": 1})
    assert twins.same({"cmd": "PULL", "queue": q, "owner": "w"})["job"] is None
    memory, postgres = twins.both({"cmd": "GetQueueLimits", "queue": q})
    assert 0 < postgres["data"]["limits"]["rateLimitTtl"] <= 300, postgres
    rate = {"max": 0, "duration": 1000}
    assert postgres["data"]["limits"]["rateLimit"] == memory["data"]["limits"]["rateLimit"] == rate
    time.sleep(0.4)
    assert twins.same({"cmd": "PULL", "queue": q, "owner": "w"})["job"] is not None
    assert limits(twins, q) == NO_LIMITS


def test_a_concurrency_limit_holds_across_two_brokers_pulling_at_once(postgres: PostgresServer) -> None:
    namespace = f"lim-{uuid.uuid4().hex[:12]}"
    servers = [postgres_broker(postgres, namespace), postgres_broker(postgres, namespace)]
    limit, total = 3, 30
    held = 0
    most = 0
    done: list[str] = []
    lock = threading.Lock()

    def work(addr: tuple[str, int]) -> None:
        nonlocal held, most
        client = RawClient(addr)
        while True:
            with lock:
                if len(done) >= total:
                    break
            reply = client.ok({"cmd": "PULL", "queue": "lim-shared", "owner": "w", "timeout": 0})
            job = reply["job"]
            if job is None:
                time.sleep(0.005)
                continue
            with lock:
                held += 1
                most = max(most, held)
            time.sleep(0.02)
            with lock:
                held -= 1
                done.append(job["id"])
            assert client.call({"cmd": "ACK", "id": job["id"], "token": reply["token"]}) == {"ok": True}
        client.close()

    try:
        setup = RawClient(servers[0].addr)
        setup.ok({"cmd": "SetConcurrency", "queue": "lim-shared", "limit": limit})
        setup.ok({"cmd": "PUSHB", "queue": "lim-shared", "jobs": [{"data": i} for i in range(total)]})
        workers = [threading.Thread(target=work, args=(server.addr,)) for server in servers for _ in range(4)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(60)
        assert sorted(set(done)) == sorted(done) and len(done) == total
        # Never more than the limit running at once, across both brokers; and the limit was reached.
        assert 2 <= most <= limit, most
        setup.close()
    finally:
        for server in servers:
            server.stop()


def test_limits_set_on_one_broker_bind_another_that_claimed_the_queue_before(
    brokers: tuple[RawClient, RawClient],
) -> None:
    a, b = brokers
    b.ok({"cmd": "PUSHB", "queue": "lim-late", "jobs": [{"data": i} for i in range(5)]})
    assert b.ok({"cmd": "PULL", "queue": "lim-late", "owner": "w"})["job"] is not None
    a.ok({"cmd": "SetConcurrency", "queue": "lim-late", "limit": 2})
    assert len(b.ok({"cmd": "PULLB", "queue": "lim-late", "count": 5, "owner": "w"})["jobs"]) == 1
    assert b.ok({"cmd": "GetQueueLimits", "queue": "lim-late"})["data"]["limits"]["maxed"] is True
    a.ok({"cmd": "ClearConcurrency", "queue": "lim-late"})
    assert len(b.ok({"cmd": "PULLB", "queue": "lim-late", "count": 5, "owner": "w"})["jobs"]) == 3


def test_a_rate_limit_is_one_bucket_for_every_broker(brokers: tuple[RawClient, RawClient]) -> None:
    a, b = brokers
    a.ok({"cmd": "RateLimit", "queue": "lim-bucket", "limit": 5, "duration": 60000})
    a.ok({"cmd": "PUSHB", "queue": "lim-bucket", "jobs": [{"data": i} for i in range(20)]})
    taken: list[int] = []

    def pull(client: RawClient) -> None:
        for _ in range(5):
            taken.append(len(client.ok({"cmd": "PULLB", "queue": "lim-bucket", "count": 2, "owner": "w"})["jobs"]))

    threads = [threading.Thread(target=pull, args=(client,)) for client in (a, b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sum(taken) == 5, taken
    limits = b.ok({"cmd": "GetQueueLimits", "queue": "lim-bucket"})["data"]["limits"]
    assert limits["rateLimit"] == {"max": 5, "duration": 60000} and limits["rateLimitTtl"] > 0


def _held_pull_gets_the_freed_slot(
    postgres: PostgresServer, setup: list[dict[str, Any]], pull: dict[str, Any], free: dict[str, Any],
    same_broker: bool = False,
) -> dict[str, Any]:
    """``setup`` on one broker, then a PULL there (the job that fills the limit); a long-poll ``pull`` held by
    the limit on the other broker (or the same one); ``free`` (an ACK or FAIL of the running job, ``$id`` and
    ``$token`` filled in) sent while it waits. The long-poll's reply, asserted to come long before the
    brokers' 30 s poll could have brought it."""
    namespace = f"lim-{uuid.uuid4().hex[:12]}"
    servers = [postgres_broker(postgres, namespace, BUNQUEUE_POSTGRES_POLL_INTERVAL_MS="30000") for _ in range(2)]
    doer, waiter = RawClient(servers[0].addr), RawClient(servers[0 if same_broker else 1].addr)
    try:
        for frame in setup:
            doer.ok(frame)
        running = doer.ok({"cmd": "PULL", "queue": pull["queue"], "owner": "w"})
        assert running["job"] is not None
        replies: list[dict[str, Any]] = []
        poll = threading.Thread(target=lambda: replies.append(waiter.call({**pull, "timeout": 20000})))
        poll.start()
        time.sleep(0.5)
        assert not replies
        started = time.monotonic()
        bound = {key: running["job"]["id"] if value == "$id" else running["token"] if value == "$token" else value
                 for key, value in free.items()}
        assert doer.call(bound) == {"ok": True}
        poll.join(20)
        assert time.monotonic() - started < 2
        assert len(replies) == 1 and replies[0]["ok"] is True
        return replies[0]
    finally:
        doer.close()
        waiter.close()
        for server in servers:
            server.stop()


def test_an_ack_on_one_broker_wakes_a_pull_the_concurrency_limit_holds_on_another(postgres: PostgresServer) -> None:
    q = "lim-wake-ack"
    reply = _held_pull_gets_the_freed_slot(postgres, [
        {"cmd": "SetConcurrency", "queue": q, "limit": 1},
        {"cmd": "PUSHB", "queue": q, "jobs": [{"name": "first", "data": 1}, {"name": "second", "data": 2}]},
    ], {"cmd": "PULL", "queue": q, "owner": "w"}, {"cmd": "ACK", "id": "$id", "token": "$token"})
    assert reply["job"]["name"] == "second"


def test_an_ack_wakes_a_pull_the_concurrency_limit_holds_on_the_same_broker(postgres: PostgresServer) -> None:
    q = "lim-wake-local"
    reply = _held_pull_gets_the_freed_slot(postgres, [
        {"cmd": "SetConcurrency", "queue": q, "limit": 1},
        {"cmd": "PUSHB", "queue": q, "jobs": [{"name": "first", "data": 1}, {"name": "second", "data": 2}]},
    ], {"cmd": "PULL", "queue": q, "owner": "w"}, {"cmd": "ACK", "id": "$id", "token": "$token"}, same_broker=True)
    assert reply["job"]["name"] == "second"


def test_a_fail_on_one_broker_wakes_a_pull_a_group_concurrency_holds_on_another(postgres: PostgresServer) -> None:
    # The failed job waits its backoff (no ready job of its own to notify): the freed group slot wakes.
    q = "lim-wake-group"
    reply = _held_pull_gets_the_freed_slot(postgres, [
        {"cmd": "SetGroupConcurrency", "queue": q, "groupId": "G", "concurrency": 1},
        {"cmd": "PUSHB", "queue": q, "jobs": [
            {"name": "first", "data": 1, "groupId": "G"}, {"name": "second", "data": 2, "groupId": "G"}]},
    ], {"cmd": "PULL", "queue": q, "owner": "w", "group": {"concurrency": 5}},
        {"cmd": "FAIL", "id": "$id", "token": "$token", "error": "boom"})
    assert reply["job"]["name"] == "second"


def test_a_pull_the_rate_limit_holds_is_woken_when_a_token_is_due(postgres: PostgresServer) -> None:
    """As the memory engine's rate timer wakes it: long before the broker's 30 s poll, and not before the
    bucket holds a token again (2 per 1 s: one every 500 ms)."""
    namespace = f"lim-{uuid.uuid4().hex[:12]}"
    server = postgres_broker(postgres, namespace, BUNQUEUE_POSTGRES_POLL_INTERVAL_MS="30000")
    client = RawClient(server.addr)
    q = "lim-rate-due"
    try:
        client.ok({"cmd": "RateLimit", "queue": q, "limit": 2, "duration": 1000})
        client.ok({"cmd": "PUSHB", "queue": q, "jobs": [{"name": f"j{i}", "data": i} for i in range(4)]})
        assert [client.ok({"cmd": "PULL", "queue": q})["job"]["name"] for _ in range(2)] == ["j0", "j1"]
        # Two long-polls held at once: each is woken by a token of its own, one ~500 ms after the other.
        other = RawClient(server.addr)
        replies: list[tuple[float, dict[str, Any]]] = []
        started = time.monotonic()

        def held_pull() -> None:
            reply = other.call({"cmd": "PULL", "queue": q, "timeout": 20000})
            replies.append((time.monotonic() - started, reply))

        poll = threading.Thread(target=held_pull)
        poll.start()
        held = client.ok({"cmd": "PULL", "queue": q, "timeout": 20000})
        replies.append((time.monotonic() - started, held))
        poll.join(20)
        other.close()
        assert sorted(reply["job"]["name"] for _, reply in replies) == ["j2", "j3"]
        waited = sorted(seconds for seconds, _ in replies)
        assert 0.3 < waited[0] and waited[1] < 5, waited
    finally:
        client.close()
        server.stop()
