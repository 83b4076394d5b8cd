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


# -- the original's system events, name by name --------------------------------------------------------

Step = tuple[str, Message]


async def _dlq_entry(socket: Socket, q: str) -> str:
    job_id = (await socket.call({"cmd": "PUSH", "queue": q, "data": {}, "maxAttempts": 1}))["id"]
    await socket.call({"cmd": "PULL", "queue": q})
    assert (await socket.call({"cmd": "FAIL", "id": job_id, "error": "boom"}))["ok"] is True
    return job_id


async def test_job_control_events_name_the_job_and_the_new_value(socket: Socket) -> None:
    await socket.subscribe("job:priority-changed", "job:data-updated", "job:delay-changed", "job:moved-to-delayed")
    q = "ev-control"
    job_id = (await socket.call({"cmd": "PUSH", "queue": q, "data": {}}))["id"]
    steps: list[tuple[Message, list[Step]]] = [
        ({"cmd": "ChangePriority", "id": job_id, "priority": 99}, [
            ("job:priority-changed", {"jobId": job_id, "newPriority": 99})]),
        ({"cmd": "Update", "id": job_id, "data": {"u": 1}}, [("job:data-updated", {"jobId": job_id})]),
        ({"cmd": "ChangeDelay", "id": job_id, "delay": 5000}, [
            ("job:delay-changed", {"jobId": job_id, "newDelay": 5000})]),
    ]
    for cmd, expected in steps:
        assert (await socket.call(cmd))["ok"] is True, cmd
        assert named(await socket.settle()) == expected, cmd
    other = (await socket.call({"cmd": "PUSH", "queue": q, "data": {}}))["id"]
    await socket.call({"cmd": "PULL", "queue": q})
    assert (await socket.call({"cmd": "MoveToDelayed", "id": other, "delay": 1000}))["ok"] is True
    assert named(await socket.settle()) == [("job:moved-to-delayed", {"jobId": other, "delay": 1000})]
    # A refused change sends nothing.
    assert (await socket.call({"cmd": "ChangePriority", "id": "nope", "priority": 1}))["ok"] is False
    assert await socket.settle() == []


async def test_queue_and_dlq_events_carry_the_queue_and_the_count(socket: Socket) -> None:
    await socket.subscribe("queue:drained", "queue:cleaned", "queue:obliterated", "queue:removed", "dlq:*")
    q = "ev-queue"
    await socket.call({"cmd": "PUSHB", "queue": q, "jobs": [{"data": 1}, {"data": 2}]})
    await socket.call({"cmd": "Drain", "queue": q})
    assert named(await socket.settle()) == [("queue:drained", {"queue": q, "count": 2})]
    # Nothing to drain: no event, as in the original.
    await socket.call({"cmd": "Drain", "queue": q})
    assert await socket.settle() == []
    await socket.call({"cmd": "PUSH", "queue": q, "data": {}})
    await socket.call({"cmd": "Clean", "queue": q, "grace": 0, "state": "waiting"})
    assert named(await socket.settle()) == [("queue:cleaned", {"queue": q, "state": "waiting", "count": 1})]
    failed = await _dlq_entry(socket, q)
    assert named(await socket.settle()) == [
        ("dlq:added", {"queue": q, "jobId": failed, "reason": "max_attempts_exceeded"})]
    await socket.call({"cmd": "RetryDlq", "queue": q, "jobId": failed})
    assert named(await socket.settle()) == [("dlq:retried", {"queue": q, "count": 1, "jobId": failed})]
    await socket.call({"cmd": "PULL", "queue": q})
    await socket.call({"cmd": "FAIL", "id": failed, "error": "again"})
    await socket.settle()
    await socket.call({"cmd": "RetryDlq", "queue": q})
    assert named(await socket.settle()) == [("dlq:retry-all", {"queue": q, "count": 1})]
    await socket.call({"cmd": "PULL", "queue": q})
    await socket.call({"cmd": "FAIL", "id": failed, "error": "again"})
    await socket.settle()
    await socket.call({"cmd": "PurgeDlq", "queue": q})
    assert named(await socket.settle()) == [("dlq:purged", {"queue": q, "count": 1})]
    await socket.call({"cmd": "Obliterate", "queue": q})
    assert named(await socket.settle()) == [("queue:obliterated", {"queue": q}), ("queue:removed", {"queue": q})]


async def test_admin_events_name_what_changed(socket: Socket) -> None:
    await socket.subscribe("cron:*", "worker:*", "ratelimit:*", "concurrency:*", "config:*", "webhook:*")
    q = "ev-admin"
    cron = await socket.call({"cmd": "Cron", "name": "ev-cron", "queue": q, "data": {}, "repeatEvery": 60_000})
    next_run = cron["cron"]["nextRun"]
    assert named(await socket.settle()) == [
        ("cron:created", {"name": "ev-cron", "queue": q, "every": 60_000, "nextRun": next_run})]
    cron = await socket.call({"cmd": "Cron", "name": "ev-cron", "queue": q, "data": {}, "schedule": "0 * * * *"})
    assert named(await socket.settle()) == [
        ("cron:updated", {"name": "ev-cron", "queue": q, "pattern": "0 * * * *", "nextRun": cron["cron"]["nextRun"]})]
    await socket.call({"cmd": "CronDelete", "name": "ev-cron"})
    assert named(await socket.settle()) == [("cron:deleted", {"name": "ev-cron"})]
    worker = (await socket.call({"cmd": "RegisterWorker", "name": "w1", "queues": [q], "hostname": "h", "pid": 7}))
    worker_id = worker["data"]["workerId"]
    assert named(await socket.settle()) == [("worker:connected", {
        "workerId": worker_id, "name": "w1", "queues": [q], "hostname": "h", "pid": 7})]
    await socket.call({"cmd": "UnregisterWorker", "workerId": worker_id})
    assert named(await socket.settle()) == [("worker:disconnected", {"workerId": worker_id})]
    steps: list[tuple[Message, list[Step]]] = [
        ({"cmd": "RateLimit", "queue": q, "limit": 100}, [("ratelimit:set", {"queue": q, "max": 100})]),
        ({"cmd": "RateLimitClear", "queue": q}, [("ratelimit:cleared", {"queue": q})]),
        ({"cmd": "SetConcurrency", "queue": q, "limit": 5}, [("concurrency:set", {"queue": q, "concurrency": 5})]),
        ({"cmd": "ClearConcurrency", "queue": q}, [("concurrency:cleared", {"queue": q})]),
        ({"cmd": "SetStallConfig", "queue": q, "config": {"stallInterval": 20000}}, [
            ("config:stall-changed", {"queue": q, "config": {"stallInterval": 20000}})]),
        ({"cmd": "SetDlqConfig", "queue": q, "config": {"autoRetry": True}}, [
            ("config:dlq-changed", {"queue": q, "config": {"autoRetry": True}})]),
    ]
    for cmd, expected in steps:
        assert (await socket.call(cmd))["ok"] is True, cmd
        assert named(await socket.settle()) == expected, cmd
    hook = await socket.call({"cmd": "AddWebhook", "url": "https://example.com/h", "events": ["job.completed"]})
    hook_id = hook["data"]["webhookId"]
    assert named(await socket.settle()) == [
        ("webhook:added", {"id": hook_id, "url": "https://example.com/h", "events": ["job.completed"]})]
    await socket.call({"cmd": "SetWebhookEnabled", "id": hook_id, "enabled": False})
    assert named(await socket.settle()) == [("webhook:disabled", {"webhookId": hook_id})]
    await socket.call({"cmd": "SetWebhookEnabled", "id": hook_id, "enabled": True})
    assert named(await socket.settle()) == [("webhook:enabled", {"webhookId": hook_id})]
    await socket.call({"cmd": "RemoveWebhook", "webhookId": hook_id})
    assert named(await socket.settle()) == [("webhook:removed", {"id": hook_id})]


async def test_a_failed_flow_child_and_a_timed_out_job_are_told(socket: Socket) -> None:
    await socket.subscribe("flow:failed", "job:timeout")
    q = "ev-flow"
    parent = (await socket.call({"cmd": "PUSH", "queue": q, "data": {}, "delay": 60_000}))["id"]
    child = (await socket.call({"cmd": "PUSH", "queue": q, "data": {}, "parentId": parent, "maxAttempts": 1}))["id"]
    await socket.call({"cmd": "PULL", "queue": q})
    await socket.call({"cmd": "FAIL", "id": child, "error": "child broke"})
    assert named(await socket.settle()) == [
        ("flow:failed", {"parentJobId": parent, "failedChildId": child, "queue": q, "error": "child broke"})]
    slow = (await socket.call({"cmd": "PUSH", "queue": "ev-timeout", "data": {}, "timeout": 50}))["id"]
    await socket.call({"cmd": "PULL", "queue": "ev-timeout"})
    assert named(await socket.settle(0.5)) == [("job:timeout", {"jobId": slow, "queue": "ev-timeout", "timeout": 50})]


async def test_subscribe_takes_the_fixed_names_only(socket: Socket) -> None:
    cases: list[tuple[Any, str]] = [
        (["bad:pattern:here"], "Invalid: bad:pattern:here"),
        # A wildcard that would match names is still no name of the set.
        (["job:p*", "job:*"], "Invalid: job:p*"),
        (["job:paused", "job:duplicated", "queue:*"], "Invalid: job:paused, job:duplicated"),
        ([1, None, "x"], "Invalid: 1, , x"),
        ([], "events must be a non-empty array"),
        ("job:*", "events must be a non-empty array"),
    ]
    for events, error in cases:
        reply = await socket.call({"cmd": "Subscribe", "events": events})
        assert reply == {"ok": False, "error": error, "reqId": reply["reqId"]}, events
    reply = await socket.call({"cmd": "Subscribe", "events": ["dlq:*", "stats:snapshot", "dlq:*"]})
    assert reply["subscribed"] == ["dlq:*", "stats:snapshot"]
    reply = await socket.call({"cmd": "Unsubscribe", "events": ["dlq:*"]})
    assert reply["subscribed"] == ["stats:snapshot"]


async def test_stats_snapshot_comes_every_five_seconds_with_the_original_fields(socket: Socket) -> None:
    await socket.subscribe("stats:snapshot")
    await socket.call({"cmd": "PUSH", "queue": "ev-stats", "data": {}})
    await socket.settle()
    # The first snapshot comes within one period of the stream's opening.
    message = await socket.receive(5.5)
    assert message is not None and message["event"] == "stats:snapshot"
    data = named([message])[0][1]
    assert set(data) == {
        "waiting", "active", "delayed", "completed", "dlq", "totalPushed", "totalCompleted", "totalFailed",
        "pushPerSec", "pullPerSec", "uptime", "queues", "workers", "cronJobs"}
    assert data["queues"]["ev-stats"] == {"waiting": 1, "active": 0, "delayed": 0, "dlq": 0, "paused": False}
    assert set(data["workers"]) == {"total", "active"}
