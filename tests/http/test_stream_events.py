"""Events on a subscribed WebSocket against a real server, field by field as the Bun original sends them:
queue pause and resume, commands that promote or discard a job, the fields job events carry, and when
`queue:counts` follows."""
from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest

from bunqueue._testbase.server import ServerProcess

Message = dict[str, Any]


@pytest.fixture(scope="module")
def http_server() -> Iterator[ServerProcess]:
    proc = ServerProcess(env={"RATE_LIMIT_MAX_REQUESTS": "100000000"}).start()
    yield proc
    proc.stop()


@pytest.fixture
async def http(http_server: ServerProcess) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(f"http://127.0.0.1:{http_server.http_port}") as session:
        yield session


class Socket:
    """A subscribed socket: commands go out on it and their replies are told apart from events."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.events: list[Message] = []
        self.sent = 0

    async def subscribe(self, *names: str) -> None:
        await self.ws.send_str(json.dumps({"cmd": "Subscribe", "events": list(names)}))
        assert json.loads(await self.ws.receive_str())["ok"] is True

    async def call(self, cmd: Message) -> Message:
        self.sent += 1
        req_id = f"r{self.sent}"
        await self.ws.send_str(json.dumps({**cmd, "reqId": req_id}))
        while True:
            message = await self.receive(5)
            assert message is not None, f"no reply to {cmd['cmd']}"
            if message.get("reqId") == req_id:
                return message

    async def receive(self, wait_s: float) -> Message | None:
        try:
            message: Message = json.loads(await asyncio.wait_for(self.ws.receive_str(), wait_s))
        except TimeoutError:
            return None
        if "event" in message:
            self.events.append(message)
        return message

    async def settle(self, wait_s: float = 0.3) -> list[Message]:
        """The events that arrive within ``wait_s`` (after those already read), then forgets them."""
        while await self.receive(wait_s) is not None:
            pass
        events, self.events = self.events, []
        return events


@pytest.fixture
async def socket(http: aiohttp.ClientSession) -> AsyncIterator[Socket]:
    async with http.ws_connect("/ws") as ws:
        yield Socket(ws)


def named(events: list[Message]) -> list[tuple[str, Message]]:
    for event in events:
        assert isinstance(event["ts"], (int, float)) and event["ts"] > 0
    return [(event["event"], event["data"]) for event in events]


COUNTS = {"waiting": 0, "prioritized": 0, "active": 0, "completed": 0, "failed": 0, "delayed": 0}


async def test_pause_and_resume_send_the_queue_event_then_the_job_event(socket: Socket) -> None:
    # job:paused and job:resumed are no names Subscribe takes: the original reaches them through job:*.
    await socket.subscribe("queue:paused", "queue:resumed", "job:*", "queue:counts")
    q = "ev-pause"
    first = (await socket.call({"cmd": "PUSH", "queue": q, "data": {}}))["id"]
    second = (await socket.call({"cmd": "PUSH", "queue": q, "data": {}, "priority": 5}))["id"]
    assert named(await socket.settle()) == [
        ("job:pushed", {"queue": q, "jobId": first}), ("job:pushed", {"queue": q, "jobId": second}),
        ("queue:counts", {"queue": q, **COUNTS, "waiting": 1, "prioritized": 1}),
    ]
    await socket.call({"cmd": "Pause", "queue": q})
    # The counts of a paused queue keep its jobs waiting or prioritized, as the original's event does.
    assert named(await socket.settle()) == [
        ("queue:paused", {"queue": q}), ("job:paused", {"queue": q, "jobId": ""}),
        ("queue:counts", {"queue": q, **COUNTS, "waiting": 1, "prioritized": 1}),
    ]
    # As in the original, every Pause is an event, a repeated one too (TrimEvents counts them alike).
    await socket.call({"cmd": "Pause", "queue": q})
    assert named(await socket.settle()) == [
        ("queue:paused", {"queue": q}), ("job:paused", {"queue": q, "jobId": ""}),
        ("queue:counts", {"queue": q, **COUNTS, "waiting": 1, "prioritized": 1}),
    ]
    await socket.call({"cmd": "Resume", "queue": q})
    assert named(await socket.settle()) == [
        ("queue:resumed", {"queue": q}), ("job:resumed", {"queue": q, "jobId": ""}),
        ("queue:counts", {"queue": q, **COUNTS, "waiting": 1, "prioritized": 1}),
    ]
    await socket.call({"cmd": "Resume", "queue": q})
    assert named(await socket.settle()) == [
        ("queue:resumed", {"queue": q}), ("job:resumed", {"queue": q, "jobId": ""}),
        ("queue:counts", {"queue": q, **COUNTS, "waiting": 1, "prioritized": 1}),
    ]


async def test_promote_and_discard_name_the_job(socket: Socket) -> None:
    await socket.subscribe("job:*")
    q = "ev-moved"
    delayed = (await socket.call({"cmd": "PUSH", "queue": q, "data": {}, "delay": 60_000}))["id"]
    waiting = (await socket.call({"cmd": "PUSH", "queue": q, "data": {}}))["id"]
    await socket.settle()
    assert (await socket.call({"cmd": "Promote", "id": delayed}))["ok"] is True
    assert named(await socket.settle()) == [("job:promoted", {"jobId": delayed})]
    # A refused command moved nothing and sends nothing.
    assert (await socket.call({"cmd": "Promote", "id": delayed}))["ok"] is False
    assert await socket.settle() == []
    assert (await socket.call({"cmd": "Discard", "id": waiting}))["ok"] is True
    assert named(await socket.settle()) == [("job:discarded", {"jobId": waiting})]
    assert (await socket.call({"cmd": "Discard", "id": waiting}))["ok"] is False
    assert await socket.settle() == []


async def test_job_events_carry_progress_error_and_prev(socket: Socket) -> None:
    await socket.subscribe("job:progress", "job:failed", "job:retried")
    q = "ev-fields"
    pushed = (await socket.call({"cmd": "PUSH", "queue": q, "data": {"x": 1}, "maxAttempts": 2}))["id"]
    await socket.call({"cmd": "PULL", "queue": q})
    await socket.call({"cmd": "Progress", "id": pushed, "progress": 50, "message": "half"})
    assert named(await socket.settle()) == [("job:progress", {"queue": q, "jobId": pushed, "progress": 50})]
    await socket.call({"cmd": "FAIL", "id": pushed, "error": "boom"})
    assert named(await socket.settle()) == [
        ("job:failed", {"queue": q, "jobId": pushed, "error": "boom"}),
        ("job:retried", {"queue": q, "jobId": pushed, "prev": "failed"}),
    ]


async def test_queue_counts_follow_a_push_once_after_its_job_events(socket: Socket) -> None:
    await socket.subscribe("job:pushed", "queue:counts")
    q = "ev-counts"
    await socket.call({"cmd": "PUSHB", "queue": q, "jobs": [{"data": i} for i in range(5)]})
    events = named(await socket.settle())
    assert [name for name, _ in events] == ["job:pushed"] * 5 + ["queue:counts"]
    assert events[-1][1] == {"queue": q, **COUNTS, "waiting": 5}
