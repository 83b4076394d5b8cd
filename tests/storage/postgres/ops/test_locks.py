"""ExtendLock(s) and JobHeartbeat(B) in PostgreSQL mode: the memory engine's replies frame for frame, leases
renewed on the database's clock, and a lease one broker granted renewed and settled on another."""
from __future__ import annotations

import math
import threading
import time
import uuid

import pytest

from bunqueue import errors
from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.postgres import PostgresServer
from bunqueue._testbase.server import ServerProcess
from bunqueue._testbase.twins import Twins
from tests.storage.postgres.ops.conftest import postgres_broker
from tests.storage.postgres.ops.rows import job_row

pytestmark = pytest.mark.usefixtures("postgres")


def _two_leased(twins: Twins, queue: str) -> None:
    """$0 and $1 pushed, then leased by owner o (tokens $2 and $3 in the frames that follow)."""
    twins.same({"cmd": "PUSHB", "queue": queue, "jobs": [{"name": "a", "data": 1}, {"name": "b", "data": 2}]})
    memory, postgres = twins.both({"cmd": "PULLB", "queue": queue, "count": 2, "owner": "o", "lockTtl": 30000})
    twins.memory_ids.extend(memory["tokens"])
    twins.postgres_ids.extend(postgres["tokens"])


def test_extend_lock_answers_as_in_memory(twins: Twins) -> None:
    _two_leased(twins, "locks-extend")
    assert twins.same({"cmd": "ExtendLock", "id": "$0", "token": "$2", "duration": 60000}) == {"ok": True}
    refused = twins.same({"cmd": "ExtendLock", "id": "$0", "token": "wrong", "duration": 60000})
    assert refused == {"ok": False, "error": errors.LOCK_NOT_FOUND}
    assert twins.same({"cmd": "ExtendLock", "id": "$0"})["ok"] is True
    assert twins.same({"cmd": "ExtendLock", "id": "$0", "token": "$3"})["ok"] is False
    assert twins.same({"cmd": "ExtendLock", "id": "nope", "token": "$2", "duration": 1000})["ok"] is False
    assert twins.same({"cmd": "ExtendLock", "id": 7, "token": "$2"})["ok"] is False
    assert twins.same({"cmd": "ExtendLock", "id": "$0", "token": 5})["ok"] is False
    for bad in (math.nan, math.inf, "soon"):
        refused = twins.same({"cmd": "ExtendLock", "id": "$0", "token": "$2", "duration": bad})
        assert "duration must be" in refused["error"]
    assert twins.same({"cmd": "ExtendLock", "id": "$0", "token": "$2", "duration": 45000.5}) == {"ok": True}
    counted = twins.same({"cmd": "ExtendLocks", "ids": ["$0", "$1", "nope", "$0", "$1"],
                          "tokens": ["$2", "bad", "$2", "$2", "$3"], "durations": [30000, 30000]})
    assert counted == {"ok": True, "count": 3}
    assert "durations[1]" in twins.same(
        {"cmd": "ExtendLocks", "ids": ["$0", "$1"], "tokens": ["$2", "$3"], "durations": [1, math.nan]})["error"]
    assert twins.same({"cmd": "ACKB", "ids": ["$0", "$1"], "tokens": ["$2", "$3"]}) == {"ok": True}
    assert twins.same({"cmd": "ExtendLock", "id": "$0", "token": "$2"})["ok"] is False


def test_job_heartbeats_answer_as_in_memory(twins: Twins) -> None:
    twins.same({"cmd": "PUSHB", "queue": "locks-beat", "jobs": [{"data": 1}, {"data": 2}, {"data": 3}]})
    assert twins.same({"cmd": "JobHeartbeat", "id": "$0"}) == {"ok": False, "error": errors.JOB_NOT_ACTIVE}
    memory, postgres = twins.both({"cmd": "PULLB", "queue": "locks-beat", "count": 2, "owner": "o"})
    twins.memory_ids.extend(memory["tokens"])
    twins.postgres_ids.extend(postgres["tokens"])
    assert twins.same({"cmd": "JobHeartbeat", "id": "$0", "token": "$3"}) == {"ok": True, "data": {"ok": True}}
    assert twins.same({"cmd": "JobHeartbeat", "id": "$0", "token": "bad"})["ok"] is False
    assert twins.same({"cmd": "JobHeartbeat", "id": "$0", "token": "$3", "duration": 5000})["ok"] is True
    assert twins.same({"cmd": "JobHeartbeat", "id": "$0"})["ok"] is True
    assert twins.same({"cmd": "JobHeartbeat", "id": "$2"})["ok"] is False
    batch = twins.same({"cmd": "JobHeartbeatB", "ids": ["$0", "$1", "nope", "$2", "$0"],
                        "tokens": ["$3", "$4", "x", None, "bad"]})
    assert batch == {"ok": True, "data": {"ok": True, "count": 2}}
    assert twins.same({"cmd": "JobHeartbeatB", "ids": ["$0", "$1"]})["data"]["count"] == 2
    assert twins.same({"cmd": "JobHeartbeatB", "ids": []})["data"]["count"] == 0


def test_a_job_pulled_without_an_owner_holds_no_lease(twins: Twins) -> None:
    twins.same({"cmd": "PUSH", "queue": "locks-ownerless", "data": 1})
    twins.same({"cmd": "PULL", "queue": "locks-ownerless"})
    assert twins.same({"cmd": "ExtendLock", "id": "$0", "duration": 1000})["ok"] is False
    assert twins.same({"cmd": "JobHeartbeat", "id": "$0"})["ok"] is True
    assert twins.same({"cmd": "JobHeartbeat", "id": "$0", "token": "t"})["ok"] is False


def test_a_renewal_runs_from_the_database_clock_and_keeps_its_duration(
    postgres: PostgresServer, pg_server: ServerProcess
) -> None:
    client = RawClient(pg_server.addr)
    job_id = client.ok({"cmd": "PUSH", "queue": "locks-clock", "data": 1})["id"]
    token = client.ok({"cmd": "PULL", "queue": "locks-clock", "owner": "o", "lockTtl": 5000})["token"]
    client.ok({"cmd": "ExtendLock", "id": job_id, "token": token, "duration": 90000})
    row = job_row(postgres, pg_server, job_id)
    assert row is not None and row["lease_ttl"] == 90000
    assert 89000 <= row["lease_expires_at"] - row["now"] <= 90000
    assert row["last_heartbeat"] >= row["lease_expires_at"] - 90000
    # No duration: the last renewal's, not the claim's.
    client.ok({"cmd": "JobHeartbeat", "id": job_id, "token": token})
    row = job_row(postgres, pg_server, job_id)
    assert row is not None and 89000 <= row["lease_expires_at"] - row["now"] <= 90000
    # 0 ends the lease now: the sweep gives the job back and another pull leases it anew.
    client.ok({"cmd": "ExtendLock", "id": job_id, "token": token, "duration": 0})
    again = client.poll({"cmd": "PULL", "queue": "locks-clock", "owner": "p"}, lambda r: r.get("job") is not None)
    assert again["job"]["id"] == job_id and again["token"] != token
    client.close()


def test_a_lease_granted_by_one_broker_is_renewed_and_acked_on_another(postgres: PostgresServer) -> None:
    namespace = f"locks-two-{uuid.uuid4().hex[:8]}"
    first, second = postgres_broker(postgres, namespace), postgres_broker(postgres, namespace)
    try:
        a, b = RawClient(first.addr), RawClient(second.addr)
        job_id = a.ok({"cmd": "PUSH", "queue": "locks-two", "data": 1})["id"]
        token = a.ok({"cmd": "PULL", "queue": "locks-two", "owner": "o", "lockTtl": 1500})["token"]
        assert b.call({"cmd": "ExtendLock", "id": job_id, "token": "other", "duration": 60000})["ok"] is False
        assert b.ok({"cmd": "ExtendLocks", "ids": [job_id], "tokens": [token], "durations": [60000]})["count"] == 1
        # Past the claim's lockTtl: only the renewal on the other broker keeps the job leased.
        time.sleep(2.5)
        assert a.ok({"cmd": "PULL", "queue": "locks-two", "owner": "p"})["job"] is None
        assert b.ok({"cmd": "JobHeartbeatB", "ids": [job_id], "tokens": [token]})["data"]["count"] == 1
        assert b.call({"cmd": "ACK", "id": job_id, "token": token}) == {"ok": True}
        assert a.call({"cmd": "ExtendLock", "id": job_id, "token": token})["ok"] is False
        a.close()
        b.close()
    finally:
        first.stop()
        second.stop()


def test_renewals_from_many_connections_at_once_each_get_their_answer(
    postgres: PostgresServer, pg_server: ServerProcess
) -> None:
    clients = [RawClient(pg_server.addr) for _ in range(12)]
    leases: list[tuple[str, str]] = []
    for client in clients:
        job_id = client.ok({"cmd": "PUSH", "queue": "locks-many", "data": 1})["id"]
        leases.append((job_id, client.ok({"cmd": "PULL", "queue": "locks-many", "owner": "o"})["token"]))
    start = threading.Barrier(len(clients))
    replies: dict[int, dict] = {}

    def renew(i: int) -> None:
        job_id, token = leases[i]
        start.wait()
        # Every third names a token that is not its lease's.
        replies[i] = clients[i].call({"cmd": "ExtendLock", "id": job_id, "token": token if i % 3 else "x",
                                      "duration": 77000})

    threads = [threading.Thread(target=renew, args=(i,)) for i in range(len(clients))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for i, (job_id, _token) in enumerate(leases):
        row = job_row(postgres, pg_server, job_id)
        assert row is not None
        if i % 3:
            assert replies[i] == {"ok": True} and row["lease_ttl"] == 77000
        else:
            assert replies[i] == {"ok": False, "error": errors.LOCK_NOT_FOUND} and row["lease_ttl"] != 77000
    for client in clients:
        client.close()
