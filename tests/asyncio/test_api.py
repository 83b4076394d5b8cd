"""The asyncio API (bunqueue.asyncio) against a real server: producing, concurrent processing, events,
atomic flows."""
from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from bunqueue._testbase.server import ServerProcess
from bunqueue.asyncio import FlowProducer, Job, Queue, QueueEvents, Worker
from bunqueue.errors import CommandError, RemoteCommandError

pytestmark = pytest.mark.timeout(60)


def _name(label: str) -> str:
    return f"aio-{label}-{uuid.uuid4().hex[:8]}"


async def _until(what: str, condition: Any, timeout: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def test_hundred_jobs_run_concurrently_and_complete(server: ServerProcess) -> None:
    name = _name("hundred")
    addr = {"host": "127.0.0.1", "port": server.port}
    async with Queue(name, **addr) as queue:
        events = QueueEvents(name, **addr)
        await events.wait_until_ready()
        completed: dict[str, Any] = {}
        events.on("completed", lambda e: completed.__setitem__(e["jobId"], e["returnvalue"]))
        waiting: list[str] = []
        events.on("waiting", lambda e: waiting.append(e["jobId"]))

        ids = [(await queue.add("square", {"n": n})).id for n in range(10)]
        ids += await queue.add_bulk([{"name": "square", "data": {"n": n}} for n in range(10, 100)])
        assert len(set(ids)) == 100

        in_flight = 0
        peak = 0

        async def square(job: Job) -> dict[str, int]:
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0.01)
            in_flight -= 1
            return {"square": job.data["n"] ** 2}

        worker = Worker(name, square, concurrency=10, **addr)
        assert worker.is_running()
        await _until("100 completed events", lambda: len(completed) == 100)
        assert await worker.close() is True and worker.is_closed()
        await events.close()

        assert 1 < peak <= 10, peak
        assert sorted(waiting) == sorted(ids)
        assert completed == {job_id: {"square": n * n} for n, job_id in enumerate(ids)}
        counts = await queue.get_job_counts()
        assert (counts["completed"], counts["waiting"], counts["active"], counts["failed"]) == (100, 0, 0, 0)
        assert await queue.get_result(ids[7]) == {"square": 49}
        job = await queue.get_job(ids[7])
        assert job is not None and job.name == "square" and job.data == {"n": 7} and job.state == "completed"


async def test_events_iterate_failures_and_progress(server: ServerProcess) -> None:
    name = _name("events")
    addr = {"host": "127.0.0.1", "port": server.port}
    async with Queue(name, **addr) as queue, QueueEvents(name, **addr) as events:
        await events.wait_until_ready()
        seen: list[tuple[str, dict[str, Any]]] = []

        async def collect() -> None:
            async for item in events:
                seen.append(item)
                if item[0] == "failed":
                    return

        reader = asyncio.ensure_future(collect())
        job = await queue.add("doomed", {"x": 1}, attempts=1)

        async def fail(j: Job) -> None:
            await j.update_progress(40)
            raise ValueError("no luck")

        worker = Worker(name, fail, concurrency=1, **addr)
        await asyncio.wait_for(reader, 20)
        await worker.close()
        names = [n for n, _ in seen]
        assert names[:3] == ["waiting", "active", "progress"], names
        assert seen[2][1] == {"jobId": job.id, "data": 40}
        assert seen[-1][0] == "failed" and seen[-1][1]["jobId"] == job.id
        assert seen[-1][1]["failedReason"] == "no luck"
        stored = await queue.get_job(job.id)
        assert stored is not None and stored.state == "failed"
        assert stored.stacktrace is not None and stored.stacktrace[-1] == "ValueError: no luck"


async def test_flow_is_one_atomic_command(server: ServerProcess) -> None:
    parents, kids = _name("parent"), _name("kid")
    addr = {"host": "127.0.0.1", "port": server.port}
    async with FlowProducer(**addr) as flow, Queue(parents, **addr) as pq, Queue(kids, **addr) as kq:
        # Two members with one id: the server refuses the whole graph and publishes nothing.
        bad = {"name": "p", "queueName": parents, "data": {}, "children": [
            {"name": "k", "queueName": kids, "data": {}, "opts": {"job_id": "same"}},
            {"name": "k", "queueName": kids, "data": {}, "opts": {"job_id": "same"}},
        ]}
        with pytest.raises(CommandError) as refused:
            await flow.add(bad)
        assert isinstance(refused.value, RemoteCommandError)
        assert await pq.count() == 0 and await kq.count() == 0

        node = await flow.add({"name": "p", "queueName": parents, "data": {"label": "p"}, "children": [
            {"name": "k", "queueName": kids, "data": {"label": f"k{i}"}} for i in range(2)]})
        assert await node.job.get_state() == "waiting-children" and node.job.name == "p"
        assert sorted(node.job.children_ids) == sorted(c.job.id for c in node.children)
        assert all(c.job.parent_id == node.job.id for c in node.children)

        async def label(job: Job) -> str:
            return str(job.data["label"])

        parent_values: dict[str, Any] = {}

        async def parent(job: Job) -> None:
            parent_values.update(await job.get_children_values())

        workers = [Worker(kids, label, concurrency=2, **addr), Worker(parents, parent, concurrency=1, **addr)]
        await _until("the parent completed", lambda: bool(parent_values))
        for w in workers:
            await w.close()
        assert parent_values == {f"{kids}:{c.job.id}": f"k{i}" for i, c in enumerate(node.children)}


async def test_embedded_memory_engine_without_a_server() -> None:
    name = _name("embedded")
    async with Queue(name, embedded=True) as queue:
        await queue.add_bulk([{"name": "n", "data": {"n": n}} for n in range(20)])
        done: list[int] = []

        async def record(job: Job) -> int:
            done.append(job.data["n"])
            return int(job.data["n"])

        worker = Worker(name, record, concurrency=4, embedded=True)
        await _until("20 jobs processed", lambda: len(done) == 20)
        await worker.close()
        assert sorted(done) == list(range(20))
        assert (await queue.get_job_counts())["completed"] == 20
        # A second object of the process shares the engine.
        async with Queue(name, embedded=True) as other:
            assert (await other.get_job_counts())["completed"] == 20
