"""Webhooks: AddWebhook, RemoveWebhook, ListWebhooks, SetWebhookEnabled, over the event hub's
``WebhookRegistry``. Every registration change is stored and refreshes whether events are wanted."""
from __future__ import annotations

from typing import Any

from bunqueue.broker.wiring import Wiring
from bunqueue.webhooks.registry import Webhook


def check_webhook(broker: Wiring, url: Any, events: Any) -> None:
    """``CommandError`` unless ``url`` may be called (under the server's private-address rule) and
    ``events`` is a list of known event names."""
    broker.events.webhooks.validate(url, events)


def add_webhook(broker: Wiring, url: str, events: list[str], queue: str | None, secret: str | None) -> dict[str, Any]:
    """Register a webhook (its fields already checked); what AddWebhook answers of it."""
    hook = Webhook(broker.factory.new_token(), url, events, queue, secret, broker.clock())
    broker.events.webhooks.add(hook)
    broker.events.refresh()
    broker.store.webhook_changed(hook.id, hook.record())
    return {"webhookId": hook.id, "url": hook.url, "events": hook.events, "queue": hook.queue,
            "createdAt": hook.created_at}


def remove_webhook(broker: Wiring, hook_id: Any) -> bool:
    hook = broker.events.webhooks.remove(hook_id)
    if hook is None:
        return False
    broker.events.refresh()
    broker.store.webhook_changed(hook.id, None)
    return True


def list_webhooks(broker: Wiring) -> dict[str, Any]:
    registry = broker.events.webhooks
    views = []
    for hook in registry.hooks.values():
        view = hook.view()
        # Payloads refused because the webhook's outbox was full: shown once there are any.
        if hook.dropped:
            view["dropped"] = hook.dropped
        views.append(view)
    return {"webhooks": views, "stats": registry.stats()}


def has_webhook(broker: Wiring, hook_id: str) -> bool:
    return hook_id in broker.events.webhooks.hooks


def set_webhook_enabled(broker: Wiring, hook_id: str, enabled: bool) -> bool:
    hook = broker.events.webhooks.set_enabled(hook_id, enabled)
    if hook is None:
        return False
    broker.events.refresh()
    broker.store.webhook_changed(hook.id, hook.record())
    return True
