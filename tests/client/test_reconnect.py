"""A server stopped and started again on the same port while the client is in use: calls made meanwhile
fail with ConnectionClosedError, then the same objects work again; the Worker registers and pulls again
and QueueEvents subscribes again."""
from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import bunqueue
from bunqueue._testbase.server import ServerProcess
from bunqueue.asyncio import Job, Queue, QueueEvents, Worker
from bunqueue.client.transport import RECONNECT_BACKOFF_S
from bunqueue.errors import ConnectionClosedError

pytestmark = pytest.mark.timeout(90)

# A call made while the server is down gives up after at most the longest backoff plus a connect attempt.
DOWN_CALL_LIMIT_S = max(RECONNECT_BACKOFF_S) + 2


@pytest.fixture
def restartable() -> Iterator[ServerProcess]:
    """A server of its own: the test stops it and starts it again on the same ports."""
    proc = ServerProcess(env={"RATE_LIMIT_MAX_REQUESTS": "100000000"}).start()
    yield proc
    proc.stop()


async def _until(what: str, condition: Any, timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def _add_when_back(queue: Queue, name: str, data: Any, timeout: float = 30.0) -> Job:
    """``queue.add`` retried until the server answers again: how an application rides out the restart."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            return await queue.add(name, data)
        except ConnectionClosedError:
            assert asyncio.get_running_loop().time() < deadline, "the queue never reconnected"
            await asyncio.sleep(0.1)


async def test_asyncio_queue_worker_and_events_survive_a_restart(restartable: ServerProcess) -> None:
    name = f"reconnect-{uuid.uuid4().hex[:8]}"
    addr: dict[str, Any] = {"host": "127.0.0.1", "port": restartable.port}
    queue = Queue(name, **addr)
    events = QueueEvents(name, **addr)
    await events.wait_until_ready()
    completed_events: list[str] = []
    events.on("completed", lambda e: completed_events.append(e["jobId"]))

    async def double(job: Job) -> int:
        return int(job.data["n"]) * 2

    worker = Worker(name, double, concurrency=2, poll_timeout_ms=200, **addr)
    results: dict[str, Any] = {}
    errors: list[BaseException] = []
    worker.on("completed", lambda job, result: results.__setitem__(job.id, result))
    worker.on("error", errors.append)
    before = await queue.add("double", {"n": 1})
    await _until("the first job", lambda: before.id in results and before.id in completed_events)
    first_generation = queue.transport.generation  # type: ignore[attr-defined]

    restartable.stop()
    started = time.monotonic()
    with pytest.raises(ConnectionClosedError):
        await queue.add("double", {"n": 2})
    assert time.monotonic() - started < DOWN_CALL_LIMIT_S
    await _until("the worker to report the lost server", lambda: any(
        isinstance(e, ConnectionClosedError) for e in errors))

    restartable.start()
    after = await _add_when_back(queue, "double", {"n": 21})
    assert queue.transport.generation > first_generation  # type: ignore[attr-defined]
    await _until("the worker to process a job after the restart", lambda: results.get(after.id) == 42)
    # Events published before the event stream is back (it retries on its own backoff) are not replayed:
    # jobs are added until one is reported, which only a new subscription can do.
    deadline = asyncio.get_running_loop().time() + 30
    while not any(job_id in completed_events for job_id in results if job_id != before.id):
        assert asyncio.get_running_loop().time() < deadline, "QueueEvents never reported a job again"
        await queue.add("double", {"n": 0})
        await asyncio.sleep(0.5)
    # The worker registered itself on its new connection: the restarted server lists it.
    workers = await queue.get_workers()
    assert [w.get("id") for w in workers] == [worker.worker_id], workers
    assert await worker.close(timeout=15) is True
    await events.close()
    await queue.close()


def test_sync_queue_fails_while_down_and_works_after(restartable: ServerProcess) -> None:
    name = f"reconnect-sync-{uuid.uuid4().hex[:8]}"
    queue = bunqueue.Queue(name, host="127.0.0.1", port=restartable.port)
    first = queue.add("task", {"n": 1})
    assert queue.get_job(first.id) is not None

    restartable.stop()
    started = time.monotonic()
    with pytest.raises(bunqueue.ConnectionClosedError):
        queue.add("task", {"n": 2})
    assert time.monotonic() - started < DOWN_CALL_LIMIT_S

    restartable.start()
    deadline = time.monotonic() + 30
    while True:
        try:
            second = queue.add("task", {"n": 3})
            break
        except bunqueue.ConnectionClosedError:
            assert time.monotonic() < deadline, "the queue never reconnected"
            time.sleep(0.1)
    stored = queue.get_job(second.id)
    # The broker lifts the SDK's name out of ``data``, as the Bun original does.
    assert stored is not None and stored.data == {"n": 3} and stored.raw["name"] == "task"
    # The memory-mode server lost the first job with its restart; only the new one is there.
    assert queue.get_job_counts()["waiting"] == 1
    queue.close()
