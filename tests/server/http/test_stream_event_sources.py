"""The rest of the original's stream events over a real WebSocket, name by name: those of batches, pulls
and pushes, flows, limits, workers, crons, the DLQ's timers, the webhook delivery thread, refused requests
and the server's own stop, each with the fields the original gives it."""
from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Iterator

import aiohttp
import pytest
from aiohttp import web

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.server import ServerProcess, free_port
from tests.server.http.test_stream_events import Message, Socket, http, http_server, named, socket

__all__ = ["http", "http_server", "socket"]

Replies = list[Message]
# One row: the names subscribed to, the commands (each may use the replies before it), and the events
# the last command's effects send, built from the replies.
Row = tuple[list[str], list[Callable[[Replies], Message]], Callable[[Replies], list[tuple[str, Message]]]]


def flow(q: str) -> list[Message]:
    """A parent in ``<q>-parent`` with children A and B in ``q``, as a FlowProducer sends it."""
    parent, kids = q + "-P", [q + "-A", q + "-B"]
    data = {"__parentId": parent, "__parentQueue": q + "-parent"}
    return [
        {"id": parent, "queue": q + "-parent",
         "input": {"name": "parent", "data": {"__childrenIds": kids}, "childrenIds": kids, "dependsOn": kids}},
        *({"id": kid, "queue": q, "input": {"name": kid, "data": data, "parentId": parent}} for kid in kids),
    ]


def rows(q: str) -> dict[str, Row]:
    return {
        "batch:pushed": (["batch:pushed"], [
            lambda r: {"cmd": "PUSH", "queue": q, "data": {}, "uniqueKey": "k"},
            lambda r: {"cmd": "PUSHB", "queue": q, "jobs": [{"data": 1, "uniqueKey": "k"}, {"data": 2}, {"data": 3}]},
        ], lambda r: [("batch:pushed", {"queue": q, "total": 3, "inserted": 2, "duplicates": 1})]),
        # A batch of one is no batch to the original.
        "batch:pushed of one": (["batch:pushed"], [
            lambda r: {"cmd": "PUSHB", "queue": q, "jobs": [{"data": 1}]},
        ], lambda r: []),
        "batch:pulled": (["batch:pulled"], [
            lambda r: {"cmd": "PUSHB", "queue": q, "jobs": [{"data": 1}, {"data": 2}, {"data": 3}]},
            lambda r: {"cmd": "PULLB", "queue": q, "count": 10},
        ], lambda r: [("batch:pulled", {"queue": q, "count": 3})]),
        "batch:pulled of one": (["batch:pulled"], [
            lambda r: {"cmd": "PUSH", "queue": q, "data": {}},
            lambda r: {"cmd": "PULLB", "queue": q, "count": 10},
        ], lambda r: []),
        "job:deduplicated": (["job:deduplicated"], [
            lambda r: {"cmd": "PUSH", "queue": q, "data": {}, "uniqueKey": "u"},
            lambda r: {"cmd": "PUSH", "queue": q, "data": {}, "uniqueKey": "u"},
        ], lambda r: [("job:deduplicated", {"queue": q, "jobId": r[0]["id"], "strategy": "default"})]),
        "job:deduplicated extend": (["job:deduplicated"], [
            lambda r: {"cmd": "PUSH", "queue": q, "data": {}, "uniqueKey": "e", "dedup": {"ttl": 60_000}},
            lambda r: {"cmd": "PUSH", "queue": q, "data": {}, "uniqueKey": "e",
                       "dedup": {"ttl": 60_000, "extend": True}},
        ], lambda r: [("job:deduplicated", {"queue": q, "jobId": r[0]["id"], "strategy": "extend"})]),
        "job:dependencies-resolved": (["job:dependencies-resolved"], [
            lambda r: {"cmd": "PUSH", "queue": q, "data": {}},
            lambda r: {"cmd": "PUSH", "queue": q + "-next", "data": {}, "dependsOn": [r[0]["id"]]},
            lambda r: {"cmd": "PULL", "queue": q},
            lambda r: {"cmd": "ACK", "id": r[0]["id"]},
        ], lambda r: [("job:dependencies-resolved", {"jobId": r[1]["id"], "queue": q + "-next"})]),
        # flow:pushed is no name Subscribe takes: the family's pattern gets it, as in the original.
        "flow:pushed": (["flow:*"], [
            lambda r: {"cmd": "PUSHF", "jobs": flow(q)},
        ], lambda r: [("flow:pushed", {"jobs": 3, "queues": 2})]),
        # A flow's parent waits for its children as for dependencies: both are told, as in the original.
        "flow:completed": (["flow:completed", "job:dependencies-resolved"], [
            lambda r: {"cmd": "PUSHF", "jobs": flow(q)},
            lambda r: {"cmd": "PULLB", "queue": q, "count": 2},
            lambda r: {"cmd": "ACK", "id": q + "-A"},
            lambda r: {"cmd": "ACK", "id": q + "-B"},
        ], lambda r: [
            ("job:dependencies-resolved", {"jobId": q + "-P", "queue": q + "-parent"}),
            ("flow:completed", {"parentJobId": q + "-P", "queue": q + "-parent", "childrenCount": 2}),
        ]),
        "ratelimit:rejected": (["ratelimit:rejected"], [
            lambda r: {"cmd": "RateLimit", "queue": q, "limit": 1},
            lambda r: {"cmd": "PUSHB", "queue": q, "jobs": [{"data": 1}, {"data": 2}]},
            lambda r: {"cmd": "PULL", "queue": q},
            lambda r: {"cmd": "PULL", "queue": q},
        ], lambda r: [("ratelimit:rejected", {"queue": q})]),
        "concurrency:rejected": (["concurrency:rejected"], [
            lambda r: {"cmd": "SetConcurrency", "queue": q, "limit": 1},
            lambda r: {"cmd": "PUSHB", "queue": q, "jobs": [{"data": 1}, {"data": 2}]},
            lambda r: {"cmd": "PULL", "queue": q},
            lambda r: {"cmd": "PULL", "queue": q},
        ], lambda r: [("concurrency:rejected", {"queue": q})]),
        # Nothing ready: a full queue refuses no job.
        "concurrency:rejected with nothing ready": (["concurrency:rejected"], [
            lambda r: {"cmd": "SetConcurrency", "queue": q, "limit": 1},
            lambda r: {"cmd": "PUSH", "queue": q, "data": {}},
            lambda r: {"cmd": "PULL", "queue": q},
            lambda r: {"cmd": "PULL", "queue": q},
        ], lambda r: []),
        "worker:heartbeat": (["worker:heartbeat"], [
            lambda r: {"cmd": "RegisterWorker", "name": "hb", "queues": [q]},
            lambda r: {"cmd": "Heartbeat", "id": r[0]["data"]["workerId"]},
        ], lambda r: [("worker:heartbeat", {"workerId": r[0]["data"]["workerId"]})]),
        "memory:compacted": (["memory:compacted"], [
            lambda r: {"cmd": "CompactMemory"},
        ], lambda r: [("memory:compacted", {})]),
        "cron:skipped": (["cron:skipped"], [
            lambda r: {"cmd": "Cron", "name": q, "queue": q, "data": {}, "repeatEvery": 100, "skipIfNoWorker": True},
        ], lambda r: [("cron:skipped", {"name": q, "queue": q, "reason": "no-worker"})]),
        "cron:fired": (["cron:fired"], [
            lambda r: {"cmd": "Cron", "name": q, "queue": q, "data": {}, "repeatEvery": 100},
        ], lambda r: [("cron:fired", {"name": q, "queue": q})]),
        "dlq:auto-retried": (["dlq:auto-retried"], [
            lambda r: {"cmd": "SetDlqConfig", "queue": q, "config": {"autoRetry": True, "autoRetryInterval": 50}},
            lambda r: {"cmd": "PUSH", "queue": q, "data": {}, "maxAttempts": 1},
            lambda r: {"cmd": "PULL", "queue": q},
            lambda r: {"cmd": "FAIL", "id": r[1]["id"], "error": "boom"},
        ], lambda r: [("dlq:auto-retried", {"queue": q, "count": 1})]),
        "dlq:expired": (["dlq:expired"], [
            lambda r: {"cmd": "SetDlqConfig", "queue": q, "config": {"maxAge": 50}},
            lambda r: {"cmd": "PUSH", "queue": q, "data": {}, "maxAttempts": 1},
            lambda r: {"cmd": "PULL", "queue": q},
            lambda r: {"cmd": "FAIL", "id": r[1]["id"], "error": "boom"},
        ], lambda r: [("dlq:expired", {"queue": q, "count": 1})]),
    }


@pytest.mark.parametrize("name", list(rows("")))
async def test_each_event_comes_with_the_original_fields(socket: Socket, name: str) -> None:
    q = "src-" + uuid.uuid4().hex[:8]
    subscribed, commands, expected = rows(q)[name]
    await socket.subscribe(*subscribed)
    replies: Replies = []
    for command in commands:
        cmd = command(replies)
        reply = await socket.call(cmd)
        assert reply["ok"] is True, (cmd, reply)
        replies.append(reply)
    # A timer's event (cron, DLQ) comes within the window; a repeating cron may tell more than one run.
    events = named(await collect(socket, 0.4))
    # A cron a row made stops firing.
    await socket.call({"cmd": "CronDelete", "name": q})
    want = expected(replies)
    assert events[:len(want)] == want
    assert all(event == want[0] for event in events[len(want):]), events


async def collect(sock: Socket, window_s: float) -> list[Message]:
    """The events that arrive within ``window_s``, however often they come."""
    deadline = asyncio.get_running_loop().time() + window_s
    while (left := deadline - asyncio.get_running_loop().time()) > 0:
        await sock.receive(left)
    events, sock.events = sock.events, []
    return events


async def test_a_job_past_its_ttl_is_told_when_a_pull_meets_it(socket: Socket) -> None:
    await socket.subscribe("job:expired")
    q = "src-expired"
    job_id = (await socket.call({"cmd": "PUSH", "queue": q, "data": {}, "ttl": 20}))["id"]
    await asyncio.sleep(0.05)
    assert (await socket.call({"cmd": "PULL", "queue": q}))["job"] is None
    [(event, data)] = named(await socket.settle())
    assert event == "job:expired"
    assert {k: data[k] for k in ("queue", "jobId", "ttl")} == {"queue": q, "jobId": job_id, "ttl": 20}
    assert set(data) == {"queue", "jobId", "ttl", "age"} and data["age"] >= 20


async def test_a_closed_connection_tells_its_workers_then_itself(socket: Socket, http_server: ServerProcess) -> None:
    await socket.subscribe("worker:disconnected", "client:disconnected")
    raw = RawClient(http_server.addr)
    worker_id = raw.ok({"cmd": "RegisterWorker", "name": "gone", "queues": ["src-close"]})["data"]["workerId"]
    raw.close()
    [(first, worker), (second, client)] = named(await socket.settle(0.5))
    assert (first, second) == ("worker:disconnected", "client:disconnected")
    assert worker == {"workerId": worker_id, "name": "gone", "clientId": client["clientId"]}
    assert client == {"clientId": worker["clientId"], "transport": "tcp"}
    assert isinstance(client["clientId"], str) and client["clientId"]


async def test_a_failed_auth_is_told_with_the_client_id(socket: Socket) -> None:
    await socket.subscribe("auth:*")
    # A server without tokens takes no token.
    assert (await socket.call({"cmd": "Auth", "token": "nope"}))["ok"] is False
    [(event, data)] = named(await socket.settle())
    assert event == "auth:failed" and set(data) == {"clientId"} and isinstance(data["clientId"], str)


# -- refusals over HTTP, stale workers and the server's stop: servers of their own ------------------------

TOKEN = "src-token"


@pytest.fixture(scope="module")
def strict_server() -> Iterator[ServerProcess]:
    env = {"AUTH_TOKENS": TOKEN, "RATE_LIMIT_MAX_REQUESTS": "3", "WORKER_TIMEOUT_MS": "100"}
    proc = ServerProcess(env=env).start()
    yield proc
    proc.stop()


@pytest.fixture
async def strict(strict_server: ServerProcess) -> AsyncIterator[tuple[aiohttp.ClientSession, Socket]]:
    async with aiohttp.ClientSession(f"http://127.0.0.1:{strict_server.http_port}") as session:
        async with session.ws_connect("/ws", headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
            yield session, Socket(ws)


async def test_http_refusals_are_told(strict: tuple[aiohttp.ClientSession, Socket]) -> None:
    session, sock = strict
    await sock.subscribe("auth:failed", "ratelimit:hit")
    async with session.get("/queues/src-q/counts", headers={"x-forwarded-for": "10.0.0.1"}) as resp:
        assert resp.status == 401
    assert named(await sock.settle()) == [("auth:failed", {"transport": "http"})]
    auth = {"Authorization": f"Bearer {TOKEN}", "x-forwarded-for": "10.0.0.2, 10.9.9.9"}
    statuses = []
    for _ in range(4):
        async with session.get("/queues/src-q/counts", headers=auth) as resp:
            statuses.append(resp.status)
    assert statuses == [200, 200, 200, 429]
    assert named(await sock.settle()) == [("ratelimit:hit", {"clientId": "10.0.0.2"})]


async def test_a_silent_worker_is_removed_and_told(strict: tuple[aiohttp.ClientSession, Socket]) -> None:
    _, sock = strict
    await sock.subscribe("worker:removed-stale")
    worker = await sock.call({"cmd": "RegisterWorker", "name": "quiet", "queues": ["src-stale"]})
    # Removed three timeouts after it was last heard from.
    assert named(await sock.settle(0.6)) == [
        ("worker:removed-stale", {"workerId": worker["data"]["workerId"], "name": "quiet"})]


async def test_a_stop_by_signal_is_told_to_the_open_streams() -> None:
    proc = ServerProcess().start()
    try:
        async with aiohttp.ClientSession(f"http://127.0.0.1:{proc.http_port}") as session:
            async with session.ws_connect("/ws") as ws:
                sock = Socket(ws)
                await sock.subscribe("server:*")
                await asyncio.get_running_loop().run_in_executor(None, proc.stop)
                message = await sock.receive(2)
                assert message is not None
                assert named([message]) == [("server:shutdown", {"signal": "SIGTERM"})]
    finally:
        proc.stop()


# -- the webhook delivery thread's outcomes ----------------------------------------------------------------

@pytest.fixture(scope="module")
def hook_server() -> Iterator[ServerProcess]:
    env = {"WEBHOOK_ALLOW_PRIVATE": "true", "WEBHOOK_MAX_RETRIES": "1", "RATE_LIMIT_MAX_REQUESTS": "0"}
    proc = ServerProcess(env=env).start()
    yield proc
    proc.stop()


@pytest.fixture
async def receiver() -> AsyncIterator[str]:
    """The base URL of a receiver whose /ok answers 200 and /error 500."""
    async def answer(request: web.Request) -> web.Response:
        return web.Response(status=200 if request.match_info["path"] == "ok" else 500)

    app = web.Application()
    app.router.add_post("/{path}", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    yield f"http://127.0.0.1:{port}/"
    await runner.cleanup()


async def test_webhook_outcomes_are_told(hook_server: ServerProcess, receiver: str) -> None:
    async with aiohttp.ClientSession(f"http://127.0.0.1:{hook_server.http_port}") as session:
        async with session.ws_connect("/ws") as ws:
            sock = Socket(ws)
            await sock.subscribe("webhook:fired", "webhook:failed")
            outcomes = []
            for path in ("ok", "error"):
                url = receiver + path
                hook = await sock.call({"cmd": "AddWebhook", "url": url, "events": ["job.pushed"], "queue": path})
                await sock.call({"cmd": "PUSH", "queue": path, "data": {}})
                outcomes.append((hook["data"]["webhookId"], url))
            events = named(await sock.settle(1.0))
    (ok_id, ok_url), (error_id, error_url) = outcomes
    assert sorted(events, key=lambda e: e[0]) == [
        ("webhook:failed", {"webhookId": error_id, "url": error_url, "event": "job.pushed", "error": "HTTP 500"}),
        ("webhook:fired", {"webhookId": ok_id, "url": ok_url, "event": "job.pushed"}),
    ]

