"""The synchronous API beyond the SDK's scenarios: QueueEvents, and listeners that call the client."""
from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

import bunqueue
from bunqueue import Job, Queue, QueueEvents, Worker
from bunqueue._testbase.server import ServerProcess

pytestmark = pytest.mark.timeout(60)


def test_queue_events_and_blocking_calls_from_listeners(server: ServerProcess) -> None:
    name = f"sync-{uuid.uuid4().hex[:8]}"
    addr: dict[str, Any] = {"host": "127.0.0.1", "port": server.port}
    queue = Queue(name, **addr)
    events = QueueEvents(name, **addr)
    seen: list[tuple[str, Any]] = []
    events.on("completed", lambda e: seen.append(("completed", e["returnvalue"])))
    events.on("failed", lambda e: seen.append(("failed", e["failedReason"])))
    ok = queue.add("double", {"n": 21})
    bad = queue.add("double", {"n": None}, attempts=1)

    states: dict[str, str] = {}
    finished = threading.Event()

    def on_completed(job: Job, result: Any) -> None:
        # A listener runs on a thread of its own, so a blocking call from it does not stall the worker.
        states[job.id] = queue.get_state(job.id)

    def on_failed(job: Job, error: BaseException) -> None:
        states[job.id] = queue.get_state(job.id)
        finished.set()

    worker = Worker(name, lambda job: job.data["n"] * 2, concurrency=1, **addr)
    worker.on("completed", on_completed)
    worker.on("failed", on_failed)
    assert finished.wait(20)
    assert worker.close(timeout=15)
    deadline = time.monotonic() + 10
    while len(seen) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    events.close()
    assert states == {ok.id: "completed", bad.id: "failed"}, states
    assert ("completed", 42) in seen, seen
    assert ("failed", "unsupported operand type(s) for *: 'NoneType' and 'int'") in seen, seen
    queue.close()


def test_each_object_has_an_sdk_connection(server: ServerProcess) -> None:
    """``Queue(...).connection`` (and a Worker's and a FlowProducer's) is a Connection, as in the SDK, that
    other objects can share."""
    name = f"sync-conn-{uuid.uuid4().hex[:8]}"
    queue = Queue(name, host="127.0.0.1", port=server.port)
    assert isinstance(queue.connection, bunqueue.Connection)
    assert (queue.connection.host, queue.connection.port) == ("127.0.0.1", server.port)
    assert queue.connection.ping() is True and queue.connection.connected
    sharing = Queue(name, connection=queue.connection)
    sharing.add("shared", {"n": 1})
    assert queue.count() == 1
    assert sharing.connection is queue.connection
    worker = Worker(name, lambda job: None, host="127.0.0.1", port=server.port, autorun=False)
    assert isinstance(worker.connection, bunqueue.Connection) and worker.connection.ping() is True
    flow = bunqueue.FlowProducer(connection=queue.connection)
    assert flow.connection is queue.connection
    worker.close()
    queue.close()
    assert not sharing.connection.connected
