"""Webhook commands: AddWebhook, RemoveWebhook, ListWebhooks, SetWebhookEnabled."""
from __future__ import annotations

from typing import Any

from bunqueue import errors, options
from bunqueue.broker.engine import Session
from bunqueue.broker.facade import Broker
from bunqueue.errors import CommandError
from bunqueue.webhooks.registry import Webhook

Reply = dict[str, Any]


def handle_add_webhook(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    registry = broker.events.webhooks
    registry.validate(cmd.get("url"), cmd.get("events"))
    queue = options.queue_name(cmd) if cmd.get("queue") is not None else None
    secret = options.optional_string(cmd, "secret")
    hook = Webhook(broker.factory.new_token(), cmd["url"], list(cmd["events"]), queue, secret or None, broker.clock())
    registry.add(hook)
    broker.events.refresh()
    broker.store.webhook_changed(hook.id, hook.record())
    return {
        "ok": True,
        "data": {
            "webhookId": hook.id,
            "url": hook.url,
            "events": hook.events,
            "queue": hook.queue,
            "createdAt": hook.created_at,
        },
    }


def handle_remove_webhook(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    hook = broker.events.webhooks.remove(cmd.get("webhookId"))
    if hook is None:
        raise CommandError(errors.WEBHOOK_NOT_FOUND)
    broker.events.refresh()
    broker.store.webhook_changed(hook.id, None)
    return {"ok": True, "data": {"removed": True}}


def handle_list_webhooks(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    registry = broker.events.webhooks
    views = []
    for hook in registry.hooks.values():
        view = hook.view()
        # Payloads refused because the webhook's outbox was full: shown once there are any.
        if hook.dropped:
            view["dropped"] = hook.dropped
        views.append(view)
    return {"ok": True, "data": {"webhooks": views, "stats": registry.stats()}}


def handle_set_webhook_enabled(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    # The webhook is looked up before `enabled` is read, as in the reference: an unknown id is the answer
    # whatever else the request holds.
    registry = broker.events.webhooks
    hook_id = cmd.get("id")
    if type(hook_id) is not str or hook_id not in registry.hooks:
        raise CommandError(errors.WEBHOOK_NOT_FOUND)
    enabled = cmd.get("enabled")
    if enabled is not True and enabled is not False:
        raise CommandError(errors.must_be_boolean("enabled"))
    hook = registry.set_enabled(hook_id, enabled)
    assert hook is not None
    broker.events.refresh()
    broker.store.webhook_changed(hook.id, hook.record())
    return {"ok": True}
