"""Workers on the PostgreSQL engine: RegisterWorker, Heartbeat, ListWorkers and UnregisterWorker answered as
the memory engine answers them, a worker registered on one broker seen on another, gone with its
connection, stale and then removed by the database's clock."""
from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from bunqueue import errors
from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.postgres import PostgresServer
from bunqueue._testbase.server import ServerProcess
from bunqueue._testbase.twins import Twins
from tests.storage.postgres.ops.conftest import postgres_broker

pytestmark = pytest.mark.usefixtures("postgres")

Reply = dict[str, Any]


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    """A memory server of this module's own: ListWorkers shows every worker of a server."""
    proc = ServerProcess(env={"RATE_LIMIT_MAX_REQUESTS": "100000000"}).start()
    yield proc
    proc.stop()


def _without_uptime(reply: Reply) -> Reply:
    # Uptime is "now" less registeredAt, each engine by its own clock: present, a number, not compared.
    for worker in reply.get("data", {}).get("workers", []):
        assert isinstance(worker.pop("uptime"), (int, float))
    return reply


def same_listing(twins: Twins) -> Reply:
    memory, postgres = twins.both({"cmd": "ListWorkers"})
    assert twins.postgres_names(_without_uptime(postgres)) == twins.memory_names(_without_uptime(memory))
    return postgres


def _no_workers(client: RawClient) -> None:
    """Workers of an earlier test's connections go once their connection's close is handled."""
    client.poll({"cmd": "ListWorkers"}, lambda r: r["data"]["stats"]["total"] == 0)


def test_register_heartbeat_list_and_unregister_answer_as_in_memory(twins: Twins) -> None:
    _no_workers(twins.memory)
    _no_workers(twins.postgres)
    same_listing(twins)
    twins.same({"cmd": "RegisterWorker", "name": "w1", "queues": ["a", "b"], "concurrency": 4,
                "hostname": "host-1", "pid": 123, "workerId": "tw-1"})
    for frame in (
        {"cmd": "Heartbeat", "id": "tw-1", "activeJobs": 1, "processed": 5, "failed": 1},
        {"cmd": "Heartbeat", "id": "tw-1", "activeJobs": 2, "processed": 7},
        # A re-registration keeps the name, and the hostname and pid when those are empty.
        {"cmd": "RegisterWorker", "name": "ignored", "queues": ["c"], "concurrency": 2, "workerId": "tw-1",
         "hostname": "", "pid": 0},
        {"cmd": "RegisterWorker", "name": "w2", "queues": ["a"], "workerId": "tw-2"},
    ):
        twins.same(frame)
    listing = same_listing(twins)
    # The memory engine's running totals, which the comparison above holds the database to.
    assert listing["data"]["stats"] == {"total": 2, "active": 2, "totalProcessed": 7, "totalFailed": 1,
                                        "activeJobs": 2, "concurrencySlots": 3}
    assert [(w["id"], w["queues"], w["hostname"]) for w in listing["data"]["workers"]] == [
        ("tw-1", ["c"], "host-1"), ("tw-2", ["a"], "unknown")]
    assert twins.same({"cmd": "UnregisterWorker", "workerId": "tw-1"}) == {"ok": True, "data": {"removed": True}}
    for frame in ({"cmd": "UnregisterWorker", "workerId": "tw-1"}, {"cmd": "Heartbeat", "id": "tw-1"},
                  {"cmd": "Heartbeat", "id": 5}, {"cmd": "UnregisterWorker"}):
        assert twins.same(frame) == {"ok": False, "error": errors.WORKER_NOT_FOUND}
    # Totals outlive the worker that reported them; its active jobs leave with it.
    stats = same_listing(twins)["data"]["stats"]
    assert (stats["total"], stats["totalProcessed"], stats["activeJobs"]) == (1, 7, 0)
    twins.same({"cmd": "UnregisterWorker", "workerId": "tw-2"})


def test_a_worker_without_an_id_gets_a_new_one_as_in_memory(twins: Twins) -> None:
    memory, postgres = twins.both({"cmd": "RegisterWorker", "queues": ["x"]})
    memory_id, postgres_id = memory["data"].pop("workerId"), postgres["data"].pop("workerId")
    assert isinstance(postgres_id, str) and len(postgres_id) == len(memory_id)
    assert twins.postgres_names(postgres) == twins.memory_names(memory)
    assert twins.postgres.call({"cmd": "UnregisterWorker", "workerId": postgres_id})["ok"] is True


@pytest.fixture
def pair(postgres: PostgresServer) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    namespace = f"workers-{uuid.uuid4().hex[:12]}"
    first = postgres_broker(postgres, namespace, WORKER_TIMEOUT_MS="400")
    second = postgres_broker(postgres, namespace, WORKER_TIMEOUT_MS="400")
    yield first, second
    first.stop()
    second.stop()


def test_a_worker_registered_on_one_broker_is_seen_on_another_and_goes_with_its_connection(
    pair: tuple[ServerProcess, ServerProcess],
) -> None:
    on_a, on_b = RawClient(pair[0].addr), RawClient(pair[1].addr)
    try:
        worker_id = on_a.ok({"cmd": "RegisterWorker", "name": "far", "queues": ["q"]})["data"]["workerId"]
        listed = on_b.ok({"cmd": "ListWorkers"})["data"]
        assert [(w["id"], w["name"], w["status"]) for w in listed["workers"]] == [(worker_id, "far", "active")]
        assert on_b.call({"cmd": "Heartbeat", "id": worker_id, "processed": 3}) == {"ok": True, "data": {"ok": True}}
        assert on_a.ok({"cmd": "ListWorkers"})["data"]["workers"][0]["processedJobs"] == 3
        on_a.close()
        on_b.poll({"cmd": "ListWorkers"}, lambda r: r["data"]["workers"] == [])
        assert on_b.call({"cmd": "Heartbeat", "id": worker_id}) == {"ok": False, "error": errors.WORKER_NOT_FOUND}
    finally:
        on_b.close()


def test_a_silent_worker_turns_stale_then_is_removed_on_every_broker(
    pair: tuple[ServerProcess, ServerProcess],
) -> None:
    on_a, on_b = RawClient(pair[0].addr), RawClient(pair[1].addr)
    try:
        on_a.ok({"cmd": "RegisterWorker", "name": "quiet", "queues": ["q"]})
        stale = on_b.poll({"cmd": "ListWorkers"}, lambda r: r["data"]["stats"]["active"] == 0)["data"]
        assert [w["status"] for w in stale["workers"]] == ["stale"]
        assert stale["stats"]["total"] == 1
        # Three timeouts of silence (1.2 s) and the next sweep of either broker.
        on_b.poll({"cmd": "ListWorkers"}, lambda r: r["data"]["stats"]["total"] == 0, timeout=5)
    finally:
        on_a.close()
        on_b.close()


def test_strings_postgresql_text_cannot_hold_answer_as_in_memory(twins: Twins) -> None:
    """NUL (and the backslash that escapes it in the table) in every string a worker carries."""
    worker_id = "nul\x00\\0id"
    twins.same({"cmd": "RegisterWorker", "name": "n\x00\\", "queues": ["q\x00", "q\\0"], "hostname": "h\x00",
                "workerId": worker_id})
    twins.same({"cmd": "RegisterWorker", "queues": ["x"], "workerId": "nul\\0\\0id"})
    assert twins.same({"cmd": "Heartbeat", "id": worker_id, "processed": 1})["ok"] is True
    listing = same_listing(twins)["data"]["workers"]
    assert [(w["id"], w.get("name"), w["queues"], w["hostname"]) for w in listing] == [
        (worker_id, "n\x00\\", ["q\x00", "q\\0"], "h\x00"), ("nul\\0\\0id", None, ["x"], "unknown")]
    for known in (worker_id, "nul\\0\\0id"):
        assert twins.same({"cmd": "UnregisterWorker", "workerId": known})["ok"] is True
    assert twins.same({"cmd": "Heartbeat", "id": "\x00"}) == {"ok": False, "error": errors.WORKER_NOT_FOUND}


def test_counters_past_double_precision_add_up_as_in_memory(twins: Twins) -> None:
    """Totals that overflow become infinities (and then NaN) as Python's floats do, instead of an error."""
    _no_workers(twins.memory)
    _no_workers(twins.postgres)
    twins.same({"cmd": "RegisterWorker", "queues": [], "workerId": "huge-1", "concurrency": 1e308, "pid": -1e308,
                "startedAt": -1e308})
    twins.same({"cmd": "RegisterWorker", "queues": [], "workerId": "huge-2"})
    for frame in (
        {"cmd": "Heartbeat", "id": "huge-1", "processed": 1e308, "failed": -1e308, "activeJobs": 1e308},
        {"cmd": "Heartbeat", "id": "huge-2", "processed": 1e308, "failed": 5, "activeJobs": 1e308},
    ):
        twins.same(frame)
    memory, postgres = twins.both({"cmd": "ListWorkers"})
    assert postgres["data"]["stats"]["totalProcessed"] == memory["data"]["stats"]["totalProcessed"] == float("inf")
    twins.same({"cmd": "Heartbeat", "id": "huge-1", "processed": -1e308})
    memory, postgres = twins.both({"cmd": "ListWorkers"})
    stats = [reply["data"]["stats"] for reply in (memory, postgres)]
    assert [str(s["totalProcessed"]) for s in stats] == ["nan", "nan"]
    assert [(s["totalFailed"], s["activeJobs"]) for s in stats] == [(-1e308 + 5, float("inf"))] * 2
    for worker_id in ("huge-1", "huge-2"):
        twins.same({"cmd": "UnregisterWorker", "workerId": worker_id})
