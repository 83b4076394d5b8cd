"""Webhook commands: AddWebhook, RemoveWebhook, ListWebhooks, SetWebhookEnabled."""
from __future__ import annotations

from typing import Any

from bunqueue import errors, options
from bunqueue.broker.engine import Engine, Session
from bunqueue.errors import CommandError

Reply = dict[str, Any]


def handle_add_webhook(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    broker.check_webhook(cmd.get("url"), cmd.get("events"))
    queue = options.queue_name(cmd) if cmd.get("queue") is not None else None
    secret = options.optional_string(cmd, "secret")
    return {"ok": True, "data": broker.add_webhook(cmd["url"], list(cmd["events"]), queue, secret or None)}


def handle_remove_webhook(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    if not broker.remove_webhook(cmd.get("webhookId")):
        raise CommandError(errors.WEBHOOK_NOT_FOUND)
    return {"ok": True, "data": {"removed": True}}


def handle_list_webhooks(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    return {"ok": True, "data": broker.list_webhooks()}


def handle_set_webhook_enabled(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    # The webhook is looked up before `enabled` is read, as in the reference: an unknown id is the answer
    # whatever else the request holds.
    hook_id = cmd.get("id")
    if type(hook_id) is not str or not broker.has_webhook(hook_id):
        raise CommandError(errors.WEBHOOK_NOT_FOUND)
    enabled = cmd.get("enabled")
    if enabled is not True and enabled is not False:
        raise CommandError(errors.must_be_boolean("enabled"))
    broker.set_webhook_enabled(hook_id, enabled)
    return {"ok": True}
