"""Webhooks: AddWebhook, RemoveWebhook, ListWebhooks, SetWebhookEnabled in ``bunqueue_webhooks``, answered as
the memory engine answers them, and the delivery of job events to them.

The table is the authority: every command reads or writes it, so a webhook added on one broker is listed,
enabled or removed on any other at once. Each broker also keeps the webhooks in a ``WebhookRegistry`` of its
own (``webhooks``), the cache its delivery thread sends from: changed at once by this broker's commands and
read again from the table every ``WEBHOOK_REFRESH_S`` for the others'. Delivery counters (successCount,
failureCount, lastTriggered, dropped) are this broker's deliveries.

An event is delivered once across brokers: the broker that committed it hands it to ``offer_webhook_event``
(or ``offer_webhook_events`` for a batch); brokers that only hear of it must not. ``wants_webhook_event``
tells whether any webhook would take it, so that nothing is built for an event no webhook wants.
"""
from __future__ import annotations

from typing import Any

import asyncpg

from bunqueue._core.jobfactory import JobFactory
from bunqueue.broker.components import eventnames
from bunqueue.broker.components.eventhub import EventHub
from bunqueue.config import Settings
from bunqueue.storage.postgres.ops.family import Family
from bunqueue.storage.schema import pack, unpack
from bunqueue.webhooks.delivery import DRAIN_LIMIT_MS, WebhookDelivery
from bunqueue.webhooks.registry import Webhook, WebhookRegistry

# How often this broker reads the webhooks again for its deliveries (other brokers' changes).
WEBHOOK_REFRESH_S = 1.0

_ADD = "INSERT INTO bunqueue_webhooks (namespace, id, enabled, record) VALUES ($1, $2, $3, $4)"
_REMOVE = "DELETE FROM bunqueue_webhooks WHERE namespace = $1 AND id = $2 RETURNING id"
_LIST = "SELECT id, enabled, record FROM bunqueue_webhooks WHERE namespace = $1 ORDER BY created_seq"
_HAS = "SELECT EXISTS (SELECT 1 FROM bunqueue_webhooks WHERE namespace = $1 AND id = $2)"
# The state before the change: whether anything changed is what the memory registry tells of.
_SET_ENABLED = """
WITH old AS (
    SELECT id, enabled FROM bunqueue_webhooks WHERE namespace = $1 AND id = $2 FOR UPDATE
), changed AS (
    UPDATE bunqueue_webhooks w SET enabled = $3 FROM old WHERE w.namespace = $1 AND w.id = old.id
)
SELECT enabled FROM old
"""


def _hook_of(row: asyncpg.Record) -> Webhook:
    hook = Webhook.from_record(unpack(row["record"]))
    hook.enabled = row["enabled"]
    return hook


class WebhooksFamily(Family):
    events: EventHub
    factory: JobFactory
    webhooks: WebhookRegistry
    webhook_delivery: WebhookDelivery
    # Bumped by every change this broker makes: a refresh that read the table before one is not applied.
    webhook_changes: int

    def open_webhooks(self, settings: Settings) -> None:
        """The cache and its delivery thread (started with the first webhook). Its notices are the event
        hub's, as in memory."""
        self.webhooks = WebhookRegistry(settings.webhook_allow_private, settings.webhook_queue_size)
        self.webhooks.notices = self.events.notices
        self.webhooks.notify = self.events.notify
        self.webhook_changes = 0
        self.webhook_delivery = WebhookDelivery(
            self.webhooks,
            timeout_ms=settings.webhook_timeout_ms,
            max_attempts=settings.webhook_max_retries,
            retry_delay_ms=settings.webhook_retry_delay_ms,
            concurrency=settings.webhook_concurrency,
        )

    async def close_webhooks(self) -> None:
        await self.webhook_delivery.close(DRAIN_LIMIT_MS)

    # -- commands --------------------------------------------------------------------------------------

    def check_webhook(self, url: Any, events: Any) -> None:
        self.webhooks.validate(url, events)

    async def add_webhook(
        self, url: str, events: list[str], queue: str | None, secret: str | None
    ) -> dict[str, Any]:
        hook = Webhook(self.factory.new_token(), url, events, queue, secret, self.clock())
        await self.pool.execute(_ADD, self.namespace, hook.id, hook.enabled, pack(hook.record()))
        self.webhook_changes += 1
        self.webhooks.add(hook)
        return {"webhookId": hook.id, "url": hook.url, "events": hook.events, "queue": hook.queue,
                "createdAt": hook.created_at}

    async def remove_webhook(self, hook_id: Any) -> bool:
        if type(hook_id) is not str or await self.pool.fetchval(_REMOVE, self.namespace, hook_id) is None:
            return False
        self.webhook_changes += 1
        if self.webhooks.remove(hook_id) is None and self.events.notices:
            # Known here only from the table: told as the registry tells of a removal.
            self.webhooks.notify(eventnames.WEBHOOK_REMOVED, {"id": hook_id})
        return True

    async def list_webhooks(self) -> dict[str, Any]:
        rows = await self.pool.fetch(_LIST, self.namespace)
        cached = self.webhooks.hooks
        views = []
        enabled = 0
        for row in rows:
            hook = cached.get(row["id"])
            if hook is None:
                hook = _hook_of(row)
            view = hook.view()
            view["enabled"] = row["enabled"]
            enabled += row["enabled"]
            if hook.dropped:
                view["dropped"] = hook.dropped
            views.append(view)
        return {"webhooks": views, "stats": {"total": len(rows), "enabled": enabled}}

    async def has_webhook(self, hook_id: str) -> bool:
        return bool(await self.pool.fetchval(_HAS, self.namespace, hook_id))

    async def set_webhook_enabled(self, hook_id: str, enabled: bool) -> bool:
        was = await self.pool.fetchval(_SET_ENABLED, self.namespace, hook_id, enabled)
        if was is None:
            return False
        self.webhook_changes += 1
        if self.webhooks.set_enabled(hook_id, enabled) is None and was != enabled and self.events.notices:
            name = eventnames.WEBHOOK_ENABLED if enabled else eventnames.WEBHOOK_DISABLED
            self.webhooks.notify(name, {"webhookId": hook_id})
        return True

    # -- the delivery cache ----------------------------------------------------------------------------

    async def refresh_webhooks(self) -> None:
        """Read the webhooks again (other brokers' changes); changes told there are not told again here."""
        changes = self.webhook_changes
        rows = await self.pool.fetch(_LIST, self.namespace)
        if changes != self.webhook_changes:
            return
        registry = self.webhooks
        heard, registry.notices = registry.notices, []
        try:
            stored = {row["id"]: row for row in rows}
            for hook_id in [h for h in registry.hooks if h not in stored]:
                registry.remove(hook_id)
            for hook_id, row in stored.items():
                if hook_id not in registry.hooks:
                    registry.add(_hook_of(row))
                else:
                    registry.set_enabled(hook_id, row["enabled"])
        finally:
            registry.notices = heard

    # -- the hook the job events call, on the broker that committed the event --------------------------

    def wants_webhook_event(self, event_type: str, queue: str) -> bool:
        """Whether an enabled webhook takes ``event_type`` (a queue event type: pushed, completed, ...)."""
        return self.webhooks.enabled_count > 0 and bool(self.webhooks.wanting(event_type, queue))

    def offer_webhook_event(
        self, event_type: str, queue: str, job_id: str, timestamp: float, fields: dict[str, Any]
    ) -> None:
        """Deliver one job event to every webhook that wants it; call it once, on the committing broker."""
        if self.webhooks.enabled_count:
            self.webhooks.offer(event_type, queue, job_id, timestamp, fields)

    def offer_webhook_events(self, event_type: str, queue: str, job_ids: list[str], timestamp: float) -> None:
        """``offer_webhook_event`` for a batch's jobs (PUSHB's ``pushed``), which carry no other field."""
        if self.webhooks.enabled_count:
            self.webhooks.offer_many(event_type, queue, job_ids, timestamp)
