"""The threshold alerts as events on the HTTP socket (queue:idle, queue:threshold, worker:overloaded,
server:memory-warning, storage:size-warning), with the original's defaults, and the periodic statistics line."""
from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.server import ServerProcess, free_port
from bunqueue.config import Settings
from bunqueue.monitoring import alerts
from bunqueue.server import app as server_app

Event = dict[str, Any]


def test_the_originals_defaults() -> None:
    s = Settings.load(env={})
    assert (s.queue_idle_threshold_ms, s.queue_size_threshold, s.memory_warning_mb, s.storage_warning_mb,
            s.worker_overload_threshold_ms, s.stats_interval_ms) == (30000, 0, 0, 0, 30000, 300000)


class Alerting:
    """An in-process server checking every 0.1 s, and a WebSocket to it that sends commands and hears every
    event."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.heard: list[dict[str, Any]] = []
        self.sent = 0

    async def receive(self, wait_s: float) -> dict[str, Any] | None:
        try:
            message: dict[str, Any] = json.loads(await asyncio.wait_for(self.ws.receive_str(), wait_s))
        except TimeoutError:
            return None
        if "event" in message:
            self.heard.append(message)
        return message

    async def events(self, name: str, wait_s: float) -> list[Event]:
        """The data of every ``name`` event heard so far or within ``wait_s``; forgets them."""
        deadline = time.monotonic() + wait_s
        while (left := deadline - time.monotonic()) > 0:
            await self.receive(left)
        found = [m["data"] for m in self.heard if m["event"] == name]
        self.heard = [m for m in self.heard if m["event"] != name]
        return found

    async def call(self, cmd: dict[str, Any]) -> dict[str, Any]:
        self.sent += 1
        req_id = f"r{self.sent}"
        await self.ws.send_str(json.dumps({**cmd, "reqId": req_id}))
        while True:
            message = await self.receive(5)
            assert message is not None, f"no reply to {cmd['cmd']}"
            if message.get("reqId") == req_id:
                assert message["ok"], message
                return message


async def alerting(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Alerting]:
    monkeypatch.setattr(alerts, "CHECK_INTERVAL_S", 0.1)
    server = server_app.BrokerServer(Settings.load(env={
        "TCP_PORT": "0", "HTTP_PORT": str(free_port()), "HOST": "127.0.0.1", "QUEUE_IDLE_THRESHOLD_MS": "0",
        "WORKER_OVERLOAD_THRESHOLD_MS": "0", **env,
    }))
    await server.start()
    assert server.http is not None
    try:
        async with aiohttp.ClientSession() as http, http.ws_connect(f"http://127.0.0.1:{server.http.port}/ws") as ws:
            await ws.send_str(json.dumps({"cmd": "Subscribe", "events": ["*"]}))
            assert json.loads(await ws.receive_str())["ok"] is True
            yield Alerting(ws)
    finally:
        await server.shutdown()


@pytest.fixture
async def idle(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Alerting]:
    async for world in alerting({"QUEUE_IDLE_THRESHOLD_MS": "300"}, monkeypatch):
        yield world


async def test_an_idle_queue_is_announced_once_per_idle_spell(idle: Alerting) -> None:
    await idle.call({"cmd": "PUSH", "queue": "busy", "data": {}})
    pulled = await idle.call({"cmd": "PULL", "queue": "idle-q", "timeout": 0})
    assert pulled["job"] is None
    await idle.call({"cmd": "PUSH", "queue": "idle-q", "data": {}})
    job = await idle.call({"cmd": "PULL", "queue": "idle-q"})
    await idle.call({"cmd": "ACK", "id": job["job"]["id"], "token": job.get("token")})
    seen = await idle.events("queue:idle", 1.2)
    # The queue with a waiting job is never idle; the emptied one once per 300 ms of idleness.
    assert {e["queue"] for e in seen} == {"idle-q"}
    assert all(e == {"queue": "idle-q", "idleSeconds": 0} for e in seen)
    assert 1 <= len(seen) <= 4


@pytest.fixture
async def sized(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Alerting]:
    async for world in alerting({"QUEUE_SIZE_THRESHOLD": "3"}, monkeypatch):
        yield world


async def test_a_queue_past_its_size_is_announced_until_it_drops(sized: Alerting) -> None:
    for _ in range(2):
        await sized.call({"cmd": "PUSH", "queue": "big", "data": {}})
    assert await sized.events("queue:threshold", 0.4) == []
    await sized.call({"cmd": "PUSH", "queue": "big", "data": {}, "priority": 2})
    await sized.call({"cmd": "PUSH", "queue": "big", "data": {}})
    assert await sized.events("queue:threshold", 0.5) == [{"queue": "big", "size": 4, "threshold": 3}]
    for _ in range(2):
        await sized.call({"cmd": "PULL", "queue": "big"})
    await asyncio.sleep(0.3)
    await sized.call({"cmd": "PUSH", "queue": "big", "data": {}})
    assert await sized.events("queue:threshold", 0.5) == [{"queue": "big", "size": 3, "threshold": 3}]


@pytest.fixture
async def loaded(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Alerting]:
    async for world in alerting({"WORKER_OVERLOAD_THRESHOLD_MS": "300"}, monkeypatch):
        yield world


async def test_a_worker_at_its_concurrency_is_announced(loaded: Alerting) -> None:
    registered = await loaded.call({"cmd": "RegisterWorker", "name": "w1", "queues": ["q"], "concurrency": 2})
    worker = registered["data"]
    await loaded.call({"cmd": "Heartbeat", "id": worker["workerId"], "activeJobs": 1})
    assert await loaded.events("worker:overloaded", 0.6) == []
    await loaded.call({"cmd": "Heartbeat", "id": worker["workerId"], "activeJobs": 2})
    seen = await loaded.events("worker:overloaded", 0.8)
    assert seen and seen[0] == {"workerId": worker["workerId"], "name": "w1", "activeJobs": 2, "concurrency": 2,
                                "overloadedSeconds": 0}


@pytest.fixture
async def warned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Alerting]:
    env = {"MEMORY_WARNING_MB": "1", "STORAGE_WARNING_MB": "1", "BUNQUEUE_DATA_PATH": str(tmp_path / "q.db")}
    async for world in alerting(env, monkeypatch):
        yield world


async def test_memory_and_storage_warnings_come_once(warned: Alerting) -> None:
    memory = await warned.events("server:memory-warning", 0.6)
    assert len(memory) == 1 and memory[0]["thresholdMB"] == 1
    assert memory[0]["heapUsedMB"] >= 1 and memory[0]["rssMB"] >= memory[0]["heapUsedMB"]
    assert await warned.events("storage:size-warning", 0.3) == []
    for n in range(8):
        await warned.call({"cmd": "PUSH", "queue": "fat", "data": {"blob": str(n) * 200_000}, "durable": True})
    storage = await warned.events("storage:size-warning", 0.8)
    assert len(storage) == 1 and storage[0]["thresholdMB"] == 1 and storage[0]["sizeMB"] >= 1


def test_the_statistics_line_is_logged_every_interval() -> None:
    proc = ServerProcess(env={"STATS_INTERVAL_MS": "300"}).start()
    try:
        c = RawClient(proc.addr)
        c.call({"cmd": "PUSH", "queue": "st", "data": {}})
        c.call({"cmd": "PUSH", "queue": "st", "data": {}, "delay": 60_000})
        time.sleep(1.0)
        c.close()
    finally:
        proc.stop()
    lines = [line for line in proc.stderr().splitlines() if "Queue statistics" in line]
    assert len(lines) >= 2
    assert "bunqueue.stats: Queue statistics waiting=1 active=0 delayed=1 completed=0 dlq=0 tcp=1" in lines[-1]
    assert " workers=0/0 mem=" in lines[-1]
