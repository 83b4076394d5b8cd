"""Webhook registrations and their outboxes. No I/O: the server's delivery worker drains the outboxes.

An event reaches a webhook as a payload appended to that webhook's outbox, bounded so that a slow or dead
receiver cannot grow memory without bound: past the bound new payloads are dropped and counted.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from bunqueue import errors
from bunqueue.errors import CommandError
from bunqueue.monitoring.webhook_urls import webhook_url_error

WEBHOOK_EVENTS = ("job.pushed", "job.started", "job.completed", "job.failed", "job.progress")
# Queue event type -> webhook event name (a stall or a removal reaches no webhook, as in the reference).
EVENT_NAMES = {
    "pushed": "job.pushed",
    "pulled": "job.started",
    "completed": "job.completed",
    "failed": "job.failed",
    "progress": "job.progress",
}
# Event fields a payload carries besides event, timestamp, jobId and queue.
PAYLOAD_FIELDS = ("data", "error", "progress")
DEFAULT_OUTBOX_LIMIT = 10_000


class Webhook:
    __slots__ = (
        "created_at",
        "dropped",
        "enabled",
        "events",
        "failure_count",
        "id",
        "in_flight",
        "last_triggered",
        "outbox",
        "queue",
        "removed",
        "secret",
        "success_count",
        "url",
    )

    def __init__(
        self, hook_id: str, url: str, events: list[str], queue: str | None, secret: str | None,
        created_at: float, enabled: bool = True,
    ) -> None:
        self.id = hook_id
        self.url = url
        self.events = events
        self.queue = queue
        self.secret = secret
        self.created_at = created_at
        self.enabled = enabled
        self.last_triggered: float | None = None
        self.success_count = 0
        self.failure_count = 0
        # Payloads waiting for delivery, and how many did not fit.
        self.outbox: deque[dict[str, Any]] = deque()
        self.dropped = 0
        # Deliveries being attempted now (the worker's business), and whether RemoveWebhook ran.
        self.in_flight = 0
        self.removed = False

    def view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "url": self.url,
            "events": self.events,
            "queue": self.queue,
            "createdAt": self.created_at,
            "lastTriggered": self.last_triggered,
            "successCount": self.success_count,
            "failureCount": self.failure_count,
            "enabled": self.enabled,
        }

    def record(self) -> dict[str, Any]:
        """What the store keeps (delivery counters start again at zero after a restart)."""
        return {
            "id": self.id,
            "url": self.url,
            "events": self.events,
            "queue": self.queue,
            "secret": self.secret,
            "createdAt": self.created_at,
            "enabled": self.enabled,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Webhook:
        return cls(
            record["id"], record["url"], list(record["events"]), record.get("queue"), record.get("secret"),
            record["createdAt"], bool(record.get("enabled", True)),
        )


def _no_wake(hook: Webhook) -> None:
    pass


class WebhookRegistry:
    """The registered webhooks. ``wake`` (set by the server) is told when a webhook has work."""

    def __init__(self, allow_private: bool = False, outbox_limit: int = DEFAULT_OUTBOX_LIMIT) -> None:
        self.hooks: dict[str, Webhook] = {}
        self.allow_private = allow_private
        self.outbox_limit = outbox_limit
        self.enabled_count = 0
        self.wake: Callable[[Webhook], None] = _no_wake

    def validate(self, url: Any, events: Any) -> None:
        error = webhook_url_error(url, self.allow_private)
        if error is not None:
            raise CommandError(error)
        if type(events) is not list or any(type(e) is not str for e in events):
            raise CommandError(errors.must_be_string_array("events"))
        invalid = [e for e in events if e not in WEBHOOK_EVENTS]
        if invalid:
            raise CommandError(errors.invalid_webhook_events(invalid, WEBHOOK_EVENTS))

    def add(self, hook: Webhook) -> None:
        self.hooks[hook.id] = hook
        if hook.enabled:
            self.enabled_count += 1

    def remove(self, hook_id: Any) -> Webhook | None:
        hook = self.hooks.pop(hook_id, None) if type(hook_id) is str else None
        if hook is None:
            return None
        if hook.enabled:
            self.enabled_count -= 1
        hook.removed = True
        # What waited for delivery goes with the registration.
        hook.outbox.clear()
        return hook

    def set_enabled(self, hook_id: Any, enabled: bool) -> Webhook | None:
        hook = self.hooks.get(hook_id) if type(hook_id) is str else None
        if hook is None:
            return None
        if hook.enabled != enabled:
            hook.enabled = enabled
            self.enabled_count += 1 if enabled else -1
        return hook

    def stats(self) -> dict[str, int]:
        return {"total": len(self.hooks), "enabled": self.enabled_count}

    @property
    def dropped(self) -> int:
        return sum(hook.dropped for hook in self.hooks.values())

    def offer(self, event: dict[str, Any]) -> None:
        """Queue ``event`` (a queue event, as subscribers get it) for every enabled webhook that wants it."""
        name = EVENT_NAMES.get(event["eventType"])
        if name is None:
            return
        queue = event["queue"]
        payload: dict[str, Any] | None = None
        limit = self.outbox_limit
        for hook in self.hooks.values():
            if not hook.enabled or name not in hook.events or (hook.queue is not None and hook.queue != queue):
                continue
            if payload is None:
                # An integer timestamp, as JSON.stringify(Date.now()) writes it.
                payload = {"event": name, "timestamp": int(event["timestamp"]), "jobId": event["jobId"], "queue": queue}
                for key in PAYLOAD_FIELDS:
                    if key in event:
                        payload[key] = event[key]
            outbox = hook.outbox
            if len(outbox) >= limit:
                hook.dropped += 1
                continue
            outbox.append(payload)
            self.wake(hook)
