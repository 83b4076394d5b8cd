"""Webhooks over a real socket: registration, SSRF refusals, and delivery to an aiohttp receiver on loopback."""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from bunqueue._testbase.frames import error_of, ok
from bunqueue._testbase.server import ServerProcess, free_port
from bunqueue.client import Connection, connect

ALL_EVENTS = ["job.pushed", "job.started", "job.completed", "job.failed", "job.progress"]
# Loopback receivers need the private-address setting; retries are quick so tests stay short.
DELIVERY_ENV = {
    "RATE_LIMIT_MAX_REQUESTS": "0",
    "WEBHOOK_ALLOW_PRIVATE": "true",
    "WEBHOOK_RETRY_DELAY_MS": "50",
    "WEBHOOK_TIMEOUT_MS": "300",
}


class Receiver:
    """An HTTP server that records every POST. /ok answers 200, /flaky 500 twice then 200, /error always
    500, /silent never answers, /gated answers 200 once ``gate`` is set."""

    def __init__(self) -> None:
        self.port = free_port()
        self.requests: list[dict[str, Any]] = []
        self.runner: web.AppRunner | None = None
        self.stopping = asyncio.Event()
        self.gate = asyncio.Event()

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/{path}", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        assert self.runner is not None
        self.stopping.set()
        await self.runner.cleanup()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path}"

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        path = request.match_info["path"]
        self.requests.append({"path": path, "headers": dict(request.headers), "body": body})
        if path == "silent":
            await self.stopping.wait()
        if path == "gated":
            await self.gate.wait()
        if path == "error" or (path == "flaky" and self.count("flaky") <= 2):
            return web.Response(status=500)
        return web.Response(text="ok")

    def count(self, path: str) -> int:
        return sum(1 for r in self.requests if r["path"] == path)

    def bodies(self, path: str) -> list[dict[str, Any]]:
        return [json.loads(r["body"]) for r in self.requests if r["path"] == path]

    async def wait_for(self, path: str, n: int, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while self.count(path) < n:
            assert time.monotonic() < deadline, f"{path}: {self.count(path)} of {n} requests arrived"
            await asyncio.sleep(0.02)


@pytest.fixture(scope="module")
def delivery_server() -> Iterator[ServerProcess]:
    proc = ServerProcess(env=DELIVERY_ENV).start()
    yield proc
    proc.stop()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = Receiver()
    await r.start()
    yield r
    await r.stop()


@pytest.fixture
async def dc(delivery_server: ServerProcess) -> AsyncIterator[Connection]:
    conn = await connect(*delivery_server.addr)
    yield conn
    await conn.close()


async def add_hook(conn: Connection, url: str, queue: str, **extra: Any) -> str:
    cmd = {"cmd": "AddWebhook", "url": url, "events": extra.pop("events", ALL_EVENTS), "queue": queue, **extra}
    return str((await ok(conn, cmd))["data"]["webhookId"])


async def hook_view(conn: Connection, hook_id: str) -> dict[str, Any]:
    hooks = (await ok(conn, {"cmd": "ListWebhooks"}))["data"]["webhooks"]
    return next(h for h in hooks if h["id"] == hook_id)


async def wait_counts(conn: Connection, hook_id: str, success: int, failure: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        view = await hook_view(conn, hook_id)
        if (view["successCount"], view["failureCount"]) == (success, failure):
            return
        assert time.monotonic() < deadline, view
        await asyncio.sleep(0.02)


# -- registration ------------------------------------------------------------------------------------


async def test_add_list_enable_remove(conn: Connection, queue_name: str) -> None:
    reply = await ok(conn, {"cmd": "AddWebhook", "url": "https://example.com/hook",
                            "events": ["job.completed", "job.failed"], "queue": queue_name, "secret": "s3"})
    data = reply["data"]
    assert set(data) == {"webhookId", "url", "events", "queue", "createdAt"}
    assert (data["url"], data["events"], data["queue"]) == ("https://example.com/hook", ["job.completed",
                                                             "job.failed"], queue_name)
    hook_id = data["webhookId"]
    view = await hook_view(conn, hook_id)
    assert view == {"id": hook_id, "url": "https://example.com/hook", "events": ["job.completed", "job.failed"],
                    "queue": queue_name, "createdAt": data["createdAt"], "lastTriggered": None, "successCount": 0,
                    "failureCount": 0, "enabled": True}
    assert (await ok(conn, {"cmd": "SetWebhookEnabled", "id": hook_id, "enabled": False}))
    assert (await hook_view(conn, hook_id))["enabled"] is False
    assert await error_of(conn, {"cmd": "SetWebhookEnabled", "id": "nope", "enabled": False}) == "Webhook not found"
    assert await error_of(conn, {"cmd": "SetWebhookEnabled", "id": hook_id}) == "enabled must be a boolean"
    assert (await ok(conn, {"cmd": "RemoveWebhook", "webhookId": hook_id}))["data"] == {"removed": True}
    assert await error_of(conn, {"cmd": "RemoveWebhook", "webhookId": hook_id}) == "Webhook not found"
    hooks = (await ok(conn, {"cmd": "ListWebhooks"}))["data"]["webhooks"]
    assert all(h["id"] != hook_id for h in hooks)


async def test_a_hook_for_every_queue_has_queue_null(conn: Connection) -> None:
    data = (await ok(conn, {"cmd": "AddWebhook", "url": "https://example.com/all", "events": ["job.pushed"]}))["data"]
    assert data["queue"] is None
    await ok(conn, {"cmd": "RemoveWebhook", "webhookId": data["webhookId"]})


@pytest.mark.parametrize(("url", "error"), [
    ("http://localhost/x", "Webhook URL cannot point to localhost"),
    ("http://api.localhost/x", "Webhook URL cannot point to localhost"),
    ("http://127.0.0.1:8080/x", "Webhook URL cannot point to localhost"),
    ("http://127.9.9.9/x", "Webhook URL cannot point to loopback IP"),
    ("http://2130706433/x", "Webhook URL cannot point to localhost"),
    ("http://0x7f.0.0.1/x", "Webhook URL cannot point to localhost"),
    ("http://[::1]/x", "Webhook URL cannot point to localhost"),
    ("http://10.1.2.3/x", "Webhook URL cannot point to private IP"),
    ("http://172.16.0.1/x", "Webhook URL cannot point to private IP"),
    ("http://172.31.255.255/x", "Webhook URL cannot point to private IP"),
    ("http://192.168.0.10/x", "Webhook URL cannot point to private IP"),
    ("http://169.254.1.1/x", "Webhook URL cannot point to link-local IP"),
    ("http://169.254.169.254/latest/meta-data", "Webhook URL cannot point to link-local IP"),
    ("http://0.0.0.0/x", "Webhook URL cannot point to unspecified IP"),
    ("http://[::]/x", "Webhook URL cannot point to unspecified IP"),
    ("http://[::ffff:127.0.0.1]/x", "Webhook URL cannot point to loopback IP"),
    ("http://[::ffff:7f00:1]/x", "Webhook URL cannot point to loopback IP"),
    ("http://[::ffff:10.0.0.1]/x", "Webhook URL cannot point to private IP"),
    ("http://[::ffff:a9fe:a9fe]/x", "Webhook URL cannot point to link-local IP"),
    ("http://[::10.0.0.1]/x", "Webhook URL cannot point to private IP"),
    ("http://[fd12:3456::1]/x", "Webhook URL cannot point to private (ULA) IP"),
    ("http://[fc00::1]/x", "Webhook URL cannot point to private (ULA) IP"),
    ("http://[fe80::1]/x", "Webhook URL cannot point to link-local IP"),
    ("http://metadata.google.internal/computeMetadata/v1/", "Webhook URL cannot point to cloud metadata endpoints"),
    ("http://anything.internal/x", "Webhook URL cannot point to cloud metadata endpoints"),
    ("ftp://example.com/x", "Webhook URL must use http or https protocol"),
    ("file:///etc/passwd", "Webhook URL must use http or https protocol"),
    ("not a url", "Invalid URL format"),
    ("http://", "Invalid URL format"),
    ("http://exa mple.com/", "Invalid URL format"),
    ("", "Webhook URL is required"),
    (None, "Webhook URL is required"),
    ("https://example.com/" + "a" * 2048, "Webhook URL too long (max 2048 characters)"),
])
async def test_ssrf_rules_refuse(conn: Connection, url: Any, error: str) -> None:
    assert await error_of(conn, {"cmd": "AddWebhook", "url": url, "events": ["job.completed"]}) == error


@pytest.mark.parametrize(("events", "error"), [
    (["completed"], "Invalid webhook event(s): completed. Valid: job.pushed, job.started, job.completed, "
                    "job.failed, job.progress"),
    (["job.completed", "job.removed", "x"], "Invalid webhook event(s): job.removed, x. Valid: job.pushed, "
                                            "job.started, job.completed, job.failed, job.progress"),
    ("job.completed", "events must be an array of strings"),
    (None, "events must be an array of strings"),
])
async def test_event_names_are_checked(conn: Connection, events: Any, error: str) -> None:
    cmd = {"cmd": "AddWebhook", "url": "https://example.com/h", "events": events}
    assert await error_of(conn, cmd) == error


async def test_other_fields_are_checked(conn: Connection) -> None:
    base = {"cmd": "AddWebhook", "url": "https://example.com/h", "events": ["job.pushed"]}
    assert await error_of(conn, {**base, "queue": "bad q"}) == "Queue name contains invalid characters"
    assert await error_of(conn, {**base, "secret": 5}) == "secret must be a string"


async def test_private_addresses_need_the_setting_and_metadata_stays_refused(dc: Connection) -> None:
    hook = await add_hook(dc, "http://127.0.0.1:9/x", "q")
    await ok(dc, {"cmd": "RemoveWebhook", "webhookId": hook})
    for url in ("http://169.254.169.254/", "http://metadata.google.internal/", "http://x.internal/"):
        error = await error_of(dc, {"cmd": "AddWebhook", "url": url, "events": ["job.pushed"]})
        assert error == "Webhook URL cannot point to cloud metadata endpoints"


# -- delivery ----------------------------------------------------------------------------------------


async def test_delivery_with_signature(dc: Connection, receiver: Receiver, queue_name: str) -> None:
    hook = await add_hook(dc, receiver.url("ok"), queue_name, secret="s3cret")
    job_id = (await ok(dc, {"cmd": "PUSH", "queue": queue_name, "name": "a", "data": {"n": 1}}))["id"]
    await ok(dc, {"cmd": "PUSH", "queue": f"{queue_name}-other", "name": "x", "data": 1})
    await ok(dc, {"cmd": "PULL", "queue": queue_name})
    await ok(dc, {"cmd": "Progress", "id": job_id, "progress": 50})
    await ok(dc, {"cmd": "ACK", "id": job_id, "result": {"done": True}})
    await receiver.wait_for("ok", 4)
    await wait_counts(dc, hook, 4, 0)
    events = receiver.bodies("ok")
    assert sorted(e["event"] for e in events) == sorted(["job.pushed", "job.started", "job.progress",
                                                         "job.completed"])
    assert all(e["jobId"] == job_id and e["queue"] == queue_name for e in events)
    completed = next(e for e in events if e["event"] == "job.completed")
    assert completed["data"] == {"done": True} and type(completed["timestamp"]) is int
    assert next(e for e in events if e["event"] == "job.progress")["progress"] == 50
    for request in receiver.requests:
        headers = request["headers"]
        assert headers["Content-Type"] == "application/json"
        event = json.loads(request["body"])
        assert headers["X-Webhook-Event"] == event["event"]
        assert headers["X-Webhook-Timestamp"] == str(int(event["timestamp"]))
        expected = hmac.new(b"s3cret", request["body"], hashlib.sha256).hexdigest()
        assert hmac.compare_digest(headers["X-Webhook-Signature"], expected)
    assert (await hook_view(dc, hook))["lastTriggered"] > 1.7e12
    await ok(dc, {"cmd": "RemoveWebhook", "webhookId": hook})


async def test_failed_event_and_no_signature_without_secret(
    dc: Connection, receiver: Receiver, queue_name: str
) -> None:
    hook = await add_hook(dc, receiver.url("ok"), queue_name, events=["job.failed"])
    job_id = (await ok(dc, {"cmd": "PUSH", "queue": queue_name, "name": "a", "data": 7, "maxAttempts": 1}))["id"]
    await ok(dc, {"cmd": "PULL", "queue": queue_name})
    await ok(dc, {"cmd": "FAIL", "id": job_id, "error": "boom"})
    await receiver.wait_for("ok", 1)
    await asyncio.sleep(0.2)
    assert len(receiver.requests) == 1
    body = receiver.bodies("ok")[0]
    assert (body["event"], body["error"], body["data"]) == ("job.failed", "boom", 7)
    assert "X-Webhook-Signature" not in receiver.requests[0]["headers"]
    await ok(dc, {"cmd": "RemoveWebhook", "webhookId": hook})


async def test_retries_after_500(dc: Connection, receiver: Receiver, queue_name: str) -> None:
    flaky = await add_hook(dc, receiver.url("flaky"), queue_name, events=["job.pushed"])
    broken = await add_hook(dc, receiver.url("error"), queue_name, events=["job.pushed"])
    await ok(dc, {"cmd": "PUSH", "queue": queue_name, "name": "a", "data": 1})
    await wait_counts(dc, flaky, 1, 0)
    await wait_counts(dc, broken, 0, 1)
    assert receiver.count("flaky") == 3, "two 500s, then the third attempt succeeds"
    assert receiver.count("error") == 3, "WEBHOOK_MAX_RETRIES attempts, then a failure is counted"
    assert len({r["body"] for r in receiver.requests}) == 1, "every attempt sends the same body"
    for hook in (flaky, broken):
        await ok(dc, {"cmd": "RemoveWebhook", "webhookId": hook})


async def test_a_receiver_that_never_answers_blocks_nothing(
    dc: Connection, receiver: Receiver, queue_name: str
) -> None:
    hook = await add_hook(dc, receiver.url("silent"), queue_name, events=["job.pushed"])
    started = time.monotonic()
    await ok(dc, {"cmd": "PUSHB", "queue": queue_name, "jobs": [{"name": "a", "data": i} for i in range(10)]})
    for _ in range(20):
        await ok(dc, {"cmd": "Ping"})
    assert time.monotonic() - started < 1.0, "commands are answered while deliveries hang"
    # 10 payloads, 4 in flight at a time, 3 attempts of 300 ms each (+ 50 and 100 ms between).
    await wait_counts(dc, hook, 0, 10, timeout=10)
    await ok(dc, {"cmd": "RemoveWebhook", "webhookId": hook})


async def test_a_disabled_hook_gets_nothing_until_enabled(
    dc: Connection, receiver: Receiver, queue_name: str
) -> None:
    hook = await add_hook(dc, receiver.url("ok"), queue_name, events=["job.pushed"])
    await ok(dc, {"cmd": "SetWebhookEnabled", "id": hook, "enabled": False})
    await ok(dc, {"cmd": "PUSH", "queue": queue_name, "name": "a", "data": 1})
    await asyncio.sleep(0.3)
    assert receiver.requests == []
    await ok(dc, {"cmd": "SetWebhookEnabled", "id": hook, "enabled": True})
    second = (await ok(dc, {"cmd": "PUSH", "queue": queue_name, "name": "b", "data": 2}))["id"]
    await receiver.wait_for("ok", 1)
    assert [b["jobId"] for b in receiver.bodies("ok")] == [second]
    await ok(dc, {"cmd": "RemoveWebhook", "webhookId": hook})


async def test_a_removed_hook_gets_nothing(dc: Connection, receiver: Receiver, queue_name: str) -> None:
    hook = await add_hook(dc, receiver.url("ok"), queue_name, events=["job.pushed"])
    await ok(dc, {"cmd": "RemoveWebhook", "webhookId": hook})
    await ok(dc, {"cmd": "PUSH", "queue": queue_name, "name": "a", "data": 1})
    await asyncio.sleep(0.3)
    assert receiver.requests == []


async def test_a_full_outbox_drops_and_counts(receiver: Receiver) -> None:
    proc = ServerProcess(env={**DELIVERY_ENV, "WEBHOOK_QUEUE_SIZE": "5", "WEBHOOK_CONCURRENCY": "1"}).start()
    try:
        conn = await connect(*proc.addr)
        hook = await add_hook(conn, receiver.url("silent"), "full", events=["job.pushed"])
        # The one delivery allowed in flight hangs; the next 5 events wait in the outbox, the rest are dropped.
        await ok(conn, {"cmd": "PUSH", "queue": "full", "name": "a", "data": 0})
        await receiver.wait_for("silent", 1)
        await ok(conn, {"cmd": "PUSHB", "queue": "full", "jobs": [{"name": "a", "data": i} for i in range(20)]})
        view = await hook_view(conn, hook)
        assert view["dropped"] == 15, "the batch's events beyond the 5 that fit are dropped and counted"
        text = (await ok(conn, {"cmd": "Prometheus"}))["data"]["metrics"]
        samples = {
            (f.name, s.labels["webhook"], s.labels.get("outcome")): s.value
            for f in text_string_to_metric_families(text)
            if f.name in ("bunqueue_webhook_deliveries", "bunqueue_webhook_outbox_events")
            for s in f.samples
        }
        assert samples[("bunqueue_webhook_deliveries", hook, "dropped")] == 15
        assert samples[("bunqueue_webhook_deliveries", hook, "success")] == 0
        assert samples[("bunqueue_webhook_outbox_events", hook, None)] == 5
        await conn.close()
    finally:
        proc.stop()


async def test_what_waited_for_a_slow_receiver_arrives_when_it_recovers(receiver: Receiver) -> None:
    env = {**DELIVERY_ENV, "WEBHOOK_QUEUE_SIZE": "5", "WEBHOOK_CONCURRENCY": "1", "WEBHOOK_TIMEOUT_MS": "10000"}
    proc = ServerProcess(env=env).start()
    try:
        conn = await connect(*proc.addr)
        hook = await add_hook(conn, receiver.url("gated"), "slow", events=["job.pushed"])
        first = (await ok(conn, {"cmd": "PUSH", "queue": "slow", "name": "a", "data": 0}))["id"]
        await receiver.wait_for("gated", 1)
        reply = await ok(conn, {"cmd": "PUSHB", "queue": "slow", "jobs": [{"name": "a", "data": i} for i in range(8)]})
        kept = reply["ids"][:5]
        view = await hook_view(conn, hook)
        assert (view["successCount"], view["failureCount"], view["dropped"]) == (0, 0, 3)
        receiver.gate.set()
        await wait_counts(conn, hook, 6, 0)
        assert [b["jobId"] for b in receiver.bodies("gated")] == [first, *kept], "in order, each once"
        assert (await hook_view(conn, hook))["dropped"] == 3
        await conn.close()
    finally:
        proc.stop()


async def test_a_burst_is_delivered_in_full_once_it_is_over(receiver: Receiver) -> None:
    proc = ServerProcess(env=DELIVERY_ENV).start()
    try:
        conns = [await connect(*proc.addr) for _ in range(2)]
        hooks = [await add_hook(conns[0], receiver.url("ok"), "burst", events=["job.pushed"]) for _ in range(2)]
        batch = [{"name": "a", "data": i} for i in range(100)]
        replies = await asyncio.gather(*(
            ok(conns[i % 2], {"cmd": "PUSHB", "queue": "burst", "jobs": batch}) for i in range(20)
        ))
        pushed = {job_id for reply in replies for job_id in reply["ids"]}
        for hook in hooks:
            await wait_counts(conns[0], hook, 2000, 0, timeout=60)
        assert receiver.count("ok") == 4000
        assert sorted(b["jobId"] for b in receiver.bodies("ok")) == sorted([*pushed, *pushed])
        for conn in conns:
            await conn.close()
    finally:
        proc.stop()


async def ten_events_four_in_flight(proc: ServerProcess, receiver: Receiver, path: str) -> None:
    conn = await connect(*proc.addr)
    await add_hook(conn, receiver.url(path), path, events=["job.pushed"])
    await ok(conn, {"cmd": "PUSHB", "queue": path, "jobs": [{"name": "a", "data": i} for i in range(10)]})
    await receiver.wait_for(path, 4)
    await conn.close()


async def test_shutdown_delivers_what_is_waiting(receiver: Receiver) -> None:
    proc = ServerProcess(env={**DELIVERY_ENV, "WEBHOOK_TIMEOUT_MS": "10000"}).start()
    try:
        await ten_events_four_in_flight(proc, receiver, "gated")
        loop = asyncio.get_running_loop()
        stopped = loop.run_in_executor(None, proc.stop)
        await asyncio.sleep(0.3)
        receiver.gate.set()
        assert await stopped == 0
        assert receiver.count("gated") == 10, "the server waited for the outbox to empty before it exited"
    finally:
        proc.stop()


async def test_shutdown_gives_up_on_a_receiver_that_never_answers_and_says_so(receiver: Receiver) -> None:
    proc = ServerProcess(env={**DELIVERY_ENV, "WEBHOOK_TIMEOUT_MS": "60000", "SHUTDOWN_TIMEOUT_MS": "500"}).start()
    try:
        await ten_events_four_in_flight(proc, receiver, "silent")
        started = time.monotonic()
        assert await asyncio.get_running_loop().run_in_executor(None, proc.stop) == 0
        assert time.monotonic() - started < 5, "the drain is bounded by the shutdown timeout"
        assert "10 webhook deliveries were not made before shutdown" in proc.stderr()
    finally:
        proc.stop()


async def test_webhooks_survive_a_restart(tmp_path: Any) -> None:
    env = {**DELIVERY_ENV, "BUNQUEUE_DATA_PATH": str(tmp_path / "q.db")}
    proc = ServerProcess(env=env).start()
    try:
        conn = await connect(*proc.addr)
        kept = await add_hook(conn, "https://example.com/kept", "q", secret="s")
        off = await add_hook(conn, "https://example.com/off", "q")
        gone = await add_hook(conn, "https://example.com/gone", "q")
        await ok(conn, {"cmd": "SetWebhookEnabled", "id": off, "enabled": False})
        await ok(conn, {"cmd": "RemoveWebhook", "webhookId": gone})
        before = (await ok(conn, {"cmd": "ListWebhooks"}))["data"]
        await conn.close()
    finally:
        proc.stop()
    proc = ServerProcess(env=env).start()
    try:
        conn = await connect(*proc.addr)
        after = (await ok(conn, {"cmd": "ListWebhooks"}))["data"]
        assert after == before
        assert [h["id"] for h in after["webhooks"]] == [kept, off]
        assert after["stats"] == {"total": 2, "enabled": 1}
        await conn.close()
    finally:
        proc.stop()
