"""RegisterWorker, Heartbeat, UnregisterWorker and ListWorkers, on servers of their own: the registry is
server-wide, so shared servers would see each other's workers."""
from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.server import ServerProcess

EMPTY_STATS = {
    "total": 0,
    "active": 0,
    "totalProcessed": 0,
    "totalFailed": 0,
    "activeJobs": 0,
    "concurrencySlots": 0,
}


@pytest.fixture
def workers_server() -> Iterator[ServerProcess]:
    proc = ServerProcess(env={"RATE_LIMIT_MAX_REQUESTS": "0"}).start()
    yield proc
    proc.stop()


@pytest.fixture
def fast_stale_server() -> Iterator[ServerProcess]:
    proc = ServerProcess(env={"RATE_LIMIT_MAX_REQUESTS": "0", "WORKER_TIMEOUT_MS": "300"}).start()
    yield proc
    proc.stop()


def listing(c: RawClient) -> dict[str, Any]:
    reply = c.call({"cmd": "ListWorkers"})
    assert reply["ok"], reply
    return reply["data"]


def test_register_heartbeat_list_unregister(workers_server: ServerProcess) -> None:
    c = RawClient(workers_server.addr)
    assert listing(c) == {"workers": [], "stats": EMPTY_STATS}
    reply = c.call(
        {
            "cmd": "RegisterWorker",
            "name": "w1",
            "queues": ["a", "b"],
            "concurrency": 4,
            "hostname": "host-1",
            "pid": 123,
        }
    )
    data = reply["data"]
    worker_id = data["workerId"]
    assert len(worker_id) == 36
    assert {
        k: data[k]
        for k in (
            "name",
            "queues",
            "concurrency",
            "hostname",
            "pid",
            "status",
            "activeJobs",
            "processedJobs",
            "failedJobs",
            "currentJob",
        )
    } == {
        "name": "w1",
        "queues": ["a", "b"],
        "concurrency": 4,
        "hostname": "host-1",
        "pid": 123,
        "status": "active",
        "activeJobs": 0,
        "processedJobs": 0,
        "failedJobs": 0,
        "currentJob": None,
    }
    assert data["registeredAt"] == data["lastSeen"] > 1.6e12
    assert c.call({"cmd": "Heartbeat", "id": worker_id, "activeJobs": 1, "processed": 5, "failed": 1}) == {
        "ok": True,
        "data": {"ok": True},
    }
    stable = c.call({"cmd": "RegisterWorker", "name": "w2", "queues": ["a"], "workerId": "stable-1"})["data"]
    assert (stable["workerId"], stable["concurrency"], stable["hostname"], stable["pid"]) == (
        "stable-1",
        1,
        "unknown",
        0,
    )
    data = listing(c)
    assert [w["id"] for w in data["workers"]] == [worker_id, "stable-1"]
    first = data["workers"][0]
    assert (first["activeJobs"], first["processedJobs"], first["failedJobs"], first["status"]) == (
        1,
        5,
        1,
        "active",
    )
    assert first["uptime"] >= 0
    assert data["stats"] == {
        "total": 2,
        "active": 2,
        "totalProcessed": 5,
        "totalFailed": 1,
        "activeJobs": 1,
        "concurrencySlots": 5,
    }
    assert c.call({"cmd": "UnregisterWorker", "workerId": worker_id}) == {
        "ok": True,
        "data": {"removed": True},
    }
    assert c.call({"cmd": "UnregisterWorker", "workerId": worker_id}) == {
        "ok": False,
        "error": "Worker not found",
    }
    assert c.call({"cmd": "Heartbeat", "id": worker_id})["error"] == "Worker not found"
    assert c.call({"cmd": "Heartbeat"})["error"] == "Worker not found"
    # Lifetime totals keep what unregistered workers reported; active jobs leave with them.
    assert listing(c)["stats"] == {
        "total": 1,
        "active": 1,
        "totalProcessed": 5,
        "totalFailed": 1,
        "activeJobs": 0,
        "concurrencySlots": 1,
    }


def test_registering_a_known_id_updates_it(workers_server: ServerProcess) -> None:
    c = RawClient(workers_server.addr)
    c.call({"cmd": "RegisterWorker", "name": "y", "queues": ["q"], "workerId": "W1", "startedAt": 1000})
    again = c.call(
        {
            "cmd": "RegisterWorker",
            "name": "y2",
            "queues": ["q2"],
            "workerId": "W1",
            "concurrency": 8,
            "hostname": "h2",
            "pid": 77,
        }
    )["data"]
    assert (again["name"], again["queues"], again["concurrency"], again["hostname"], again["pid"]) == (
        "y",
        ["q2"],
        8,
        "h2",
        77,
    )
    assert again["registeredAt"] == 1000
    assert len(listing(c)["workers"]) == 1


def test_register_validation(workers_server: ServerProcess) -> None:
    c = RawClient(workers_server.addr)
    assert c.call({"cmd": "RegisterWorker", "name": 5})["error"] == "name must be a string"
    assert c.call({"cmd": "RegisterWorker", "queues": "q"})["error"] == "queues must be an array of strings"
    assert c.call({"cmd": "RegisterWorker", "concurrency": "x"})["error"] == "concurrency must be a number"
    anonymous = c.call({"cmd": "RegisterWorker"})["data"]
    assert "name" not in anonymous and anonymous["queues"] == [] and anonymous["concurrency"] == 1
    worker_id = anonymous["workerId"]
    assert c.call({"cmd": "Heartbeat", "id": worker_id, "processed": "7"})["ok"]
    assert c.call({"cmd": "Heartbeat", "id": worker_id, "processed": "many"})["error"] == (
        "processed must be a number"
    )
    assert listing(c)["workers"][0]["processedJobs"] == 7


def test_workers_go_with_their_connection(workers_server: ServerProcess) -> None:
    watcher = RawClient(workers_server.addr)
    c = RawClient(workers_server.addr)
    c.call({"cmd": "RegisterWorker", "name": "gone", "queues": ["q"]})
    c.call({"cmd": "RegisterWorker", "name": "also-gone", "queues": ["q"], "workerId": "W2"})
    # Re-registering from another connection keeps the first binding, as the reference does.
    watcher.call({"cmd": "RegisterWorker", "name": "again", "queues": ["q"], "workerId": "W2"})
    watcher.call({"cmd": "RegisterWorker", "name": "stays", "queues": ["q"]})
    assert listing(watcher)["stats"]["total"] == 3
    c.close()
    for _ in range(100):
        if listing(watcher)["stats"]["total"] == 1:
            break
        time.sleep(0.02)
    assert [w["name"] for w in listing(watcher)["workers"]] == ["stays"]


def test_silent_workers_go_stale_then_away(fast_stale_server: ServerProcess) -> None:
    c = RawClient(fast_stale_server.addr)
    quiet = c.call({"cmd": "RegisterWorker", "name": "quiet", "queues": ["q"], "concurrency": 2})["data"][
        "workerId"
    ]
    chatty = c.call({"cmd": "RegisterWorker", "name": "chatty", "queues": ["q"], "concurrency": 3})["data"][
        "workerId"
    ]
    time.sleep(0.4)
    assert c.call({"cmd": "Heartbeat", "id": chatty})["ok"]
    data = listing(c)
    assert {w["id"]: w["status"] for w in data["workers"]} == {quiet: "stale", chatty: "active"}
    assert (data["stats"]["active"], data["stats"]["concurrencySlots"]) == (1, 3)
    # Removed once silent for three times the timeout; the heartbeating one stays.
    time.sleep(0.7)
    assert c.call({"cmd": "Heartbeat", "id": chatty})["ok"]
    assert [w["id"] for w in listing(c)["workers"]] == [chatty]
    assert c.call({"cmd": "Heartbeat", "id": quiet})["error"] == "Worker not found"
