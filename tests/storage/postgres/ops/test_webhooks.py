"""Webhooks on the PostgreSQL engine: AddWebhook, ListWebhooks, SetWebhookEnabled and RemoveWebhook answered
as the memory engine answers them, every broker answering from the table, each broker's delivery cache
following the other brokers' changes, and an event handed to the delivery hook POSTed once."""
from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from bunqueue import errors
from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.postgres import PostgresServer
from bunqueue._testbase.server import ServerProcess
from bunqueue._testbase.twins import Twins
from bunqueue.config import Settings
from bunqueue.storage.postgres.engine import PostgresEngine
from tests.protocol.test_webhooks import Receiver
from tests.storage.postgres.ops.conftest import postgres_broker

pytestmark = pytest.mark.usefixtures("postgres")

Reply = dict[str, Any]


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    """A memory server of this module's own: ListWebhooks shows every webhook of a server."""
    proc = ServerProcess(env={"RATE_LIMIT_MAX_REQUESTS": "100000000"}).start()
    yield proc
    proc.stop()


class HookIds:
    """Each server's id for the webhook a test added, put into frames in place of ``"$h"``."""

    def __init__(self, twins: Twins) -> None:
        self.twins = twins
        self.memory = self.postgres = ""

    def add(self, frame: Reply) -> Reply:
        memory, postgres = self.twins.both(frame)
        self.memory, self.postgres = memory["data"].pop("webhookId"), postgres["data"].pop("webhookId")
        # Named alike on both sides, so that listings (which call it `id`) compare.
        self.twins.memory_names.name("id", self.memory)
        self.twins.postgres_names.name("id", self.postgres)
        assert self.twins.postgres_names(postgres) == self.twins.memory_names(memory)
        return postgres

    def same(self, frame: Reply) -> Reply:
        memory = self.twins.memory.call({k: self.memory if v == "$h" else v for k, v in frame.items()})
        postgres = self.twins.postgres.call({k: self.postgres if v == "$h" else v for k, v in frame.items()})
        assert self.twins.postgres_names(postgres) == self.twins.memory_names(memory), (frame, memory, postgres)
        return postgres


def test_webhook_commands_answer_as_in_memory(twins: Twins) -> None:
    hooks = HookIds(twins)
    assert twins.same({"cmd": "ListWebhooks"})["data"] == {"webhooks": [], "stats": {"total": 0, "enabled": 0}}
    added = hooks.add({"cmd": "AddWebhook", "url": "https://example.com/hook", "events": ["job.completed"],
                       "queue": "whq", "secret": "s3"})
    assert added["data"]["queue"] == "whq"
    for refused in (
        {"cmd": "AddWebhook", "url": "http://localhost/x", "events": ["job.completed"]},
        {"cmd": "AddWebhook", "url": "http://10.0.0.1/x", "events": ["job.completed"]},
        {"cmd": "AddWebhook", "url": "not a url", "events": ["job.completed"]},
        {"cmd": "AddWebhook", "url": "https://example.com/hook", "events": ["completed"]},
        {"cmd": "AddWebhook", "url": "https://example.com/hook", "events": "job.completed"},
        {"cmd": "AddWebhook", "url": "https://example.com/hook", "events": [], "queue": ""},
    ):
        assert twins.same(refused)["ok"] is False
    listed = twins.same({"cmd": "ListWebhooks"})["data"]
    assert [(h["url"], h["enabled"], h["successCount"]) for h in listed["webhooks"]] == [
        ("https://example.com/hook", True, 0)]
    assert hooks.same({"cmd": "SetWebhookEnabled", "id": "$h", "enabled": False}) == {"ok": True}
    assert hooks.same({"cmd": "SetWebhookEnabled", "id": "$h", "enabled": False}) == {"ok": True}
    assert hooks.same({"cmd": "SetWebhookEnabled", "id": "nope", "enabled": True}) == {
        "ok": False, "error": errors.WEBHOOK_NOT_FOUND}
    assert hooks.same({"cmd": "SetWebhookEnabled", "id": "$h", "enabled": "yes"})["ok"] is False
    assert twins.same({"cmd": "ListWebhooks"})["data"]["stats"] == {"total": 1, "enabled": 0}
    assert hooks.same({"cmd": "RemoveWebhook", "webhookId": "$h"}) == {"ok": True, "data": {"removed": True}}
    for frame in ({"cmd": "RemoveWebhook", "webhookId": "$h"}, {"cmd": "RemoveWebhook", "webhookId": 7},
                  {"cmd": "RemoveWebhook", "webhookId": "h\x00"}, {"cmd": "SetWebhookEnabled", "id": "h\x00"}):
        assert hooks.same(frame) == {"ok": False, "error": errors.WEBHOOK_NOT_FOUND}
    assert twins.same({"cmd": "ListWebhooks"})["data"]["webhooks"] == []


def test_every_broker_answers_for_webhooks_another_added(postgres: PostgresServer) -> None:
    namespace = f"webhooks-{uuid.uuid4().hex[:12]}"
    first, second = postgres_broker(postgres, namespace), postgres_broker(postgres, namespace)
    on_a, on_b = RawClient(first.addr), RawClient(second.addr)
    try:
        hook_id = on_a.ok({"cmd": "AddWebhook", "url": "https://example.com/a", "events": ["job.failed"]})[
            "data"]["webhookId"]
        assert [h["id"] for h in on_b.ok({"cmd": "ListWebhooks"})["data"]["webhooks"]] == [hook_id]
        assert on_b.call({"cmd": "SetWebhookEnabled", "id": hook_id, "enabled": False}) == {"ok": True}
        assert on_a.ok({"cmd": "ListWebhooks"})["data"]["stats"] == {"total": 1, "enabled": 0}
        assert on_b.call({"cmd": "RemoveWebhook", "webhookId": hook_id})["ok"] is True
        assert on_a.call({"cmd": "RemoveWebhook", "webhookId": hook_id}) == {
            "ok": False, "error": errors.WEBHOOK_NOT_FOUND}
        assert on_a.ok({"cmd": "ListWebhooks"})["data"]["webhooks"] == []
    finally:
        on_a.close()
        on_b.close()
        first.stop()
        second.stop()


async def test_the_delivery_cache_follows_other_brokers_and_the_hook_delivers_once(postgres: PostgresServer) -> None:
    env = {"BUNQUEUE_POSTGRES_URL": postgres.url(), "BUNQUEUE_POSTGRES_NAMESPACE": f"hooks-{uuid.uuid4().hex[:12]}",
           "WEBHOOK_ALLOW_PRIVATE": "true", "WEBHOOK_RETRY_DELAY_MS": "50"}
    receiver = Receiver()
    await receiver.start()
    first = await PostgresEngine.open(Settings.load(env={**env, "BUNQUEUE_BROKER_ID": "hooks-a"}))
    second = await PostgresEngine.open(Settings.load(env={**env, "BUNQUEUE_BROKER_ID": "hooks-b"}))
    try:
        added = await first.add_webhook(receiver.url("ok"), ["job.completed"], "wq", None)
        assert not second.wants_webhook_event("completed", "wq")
        await second.refresh_webhooks()
        assert list(second.webhooks.hooks) == [added["webhookId"]]
        assert second.wants_webhook_event("completed", "wq")
        assert not second.wants_webhook_event("completed", "other-queue")
        assert not second.wants_webhook_event("failed", "wq")
        second.offer_webhook_event("completed", "wq", "job-1", 1234.0, {})
        await receiver.wait_for("ok", 1)
        assert receiver.bodies("ok") == [{"event": "job.completed", "timestamp": 1234, "jobId": "job-1",
                                          "queue": "wq"}]
        listed = (await second.list_webhooks())["webhooks"]
        assert [(h["id"], h["successCount"]) for h in listed] == [(added["webhookId"], 1)]
        assert await first.set_webhook_enabled(added["webhookId"], False)
        await second.refresh_webhooks()
        assert not second.wants_webhook_event("completed", "wq")
        assert await first.remove_webhook(added["webhookId"])
        await second.refresh_webhooks()
        assert second.webhooks.hooks == {}
        assert [json.loads(r["body"])["jobId"] for r in receiver.requests] == ["job-1"]
    finally:
        await first.close()
        await second.close()
        await receiver.stop()
