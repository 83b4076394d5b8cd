"""Webhook registrations and their outboxes. No I/O: the server's delivery thread drains the outboxes.

An event reaches a webhook as one small tuple appended to that webhook's outbox, and a batch's events
(PUSHB's ``pushed``) as one tuple for the whole run: the broker builds no payload, body or task per event,
and no object per event of a batch. The outbox is bounded in events, so that a slow or dead receiver
cannot grow memory without bound: once ``outbox_limit`` events wait, new ones are dropped and counted
(besides those, at most the delivery's concurrency per webhook are in flight).

Two threads share a webhook: the broker's loop appends, counts what it added and ``dropped``; the
delivery thread takes, counts what it took, ``success_count`` and ``failure_count``. Each counter has one
writer, so none needs a lock.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from bunqueue import errors
from bunqueue.broker.components import eventnames
from bunqueue.errors import CommandError
from bunqueue.webhooks.urls import webhook_url_error

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


# One event as the delivery thread takes it: (event type, queue, job id, timestamp, extra fields).
EventRecord = tuple[str, str, str, float, dict[str, Any]]
# What the broker appends to an outbox: the same, with the ids of every job the event happened to at once.
EventRun = tuple[str, str, Sequence[str], float, dict[str, Any]]
# The fields of every event that has none (a batch's `pushed`): shared, so never written to.
NO_FIELDS: dict[str, Any] = {}


def payload_of(record: EventRecord) -> dict[str, Any]:
    """The JSON object POSTed for an event: {event, timestamp, jobId, queue, data?, error?, progress?}."""
    event_type, queue, job_id, timestamp, fields = record
    # An integer timestamp, as JSON.stringify(Date.now()) writes it.
    payload = {"event": EVENT_NAMES[event_type], "timestamp": int(timestamp), "jobId": job_id, "queue": queue}
    for key in PAYLOAD_FIELDS:
        if key in fields:
            payload[key] = fields[key]
    return payload


class Outbox:
    """A webhook's events waiting for delivery, in order. ``len`` is the number of events, runs expanded."""

    __slots__ = ("added", "head", "runs", "taken")

    def __init__(self) -> None:
        self.runs: deque[EventRun] = deque()
        # Events appended (the broker's count) and taken (the delivery thread's): what waits is the difference.
        self.added = 0
        self.taken = 0
        # The delivery thread's place in the first run.
        self.head = 0

    def __len__(self) -> int:
        return self.added - self.taken

    def __iter__(self) -> Iterator[EventRecord]:
        head = self.head
        for event_type, queue, job_ids, timestamp, fields in list(self.runs):
            for job_id in job_ids[head:]:
                yield event_type, queue, job_id, timestamp, fields
            head = 0

    def put(self, run: EventRun) -> None:
        self.runs.append(run)
        self.added += len(run[2])

    def take(self) -> EventRecord | None:
        """The oldest waiting event (delivery thread only)."""
        runs = self.runs
        try:
            event_type, queue, job_ids, timestamp, fields = runs[0]
        except IndexError:
            return None
        head = self.head
        if head + 1 < len(job_ids):
            self.head = head + 1
        else:
            self.head = 0
            try:
                runs.popleft()
            except IndexError:  # cleared by the broker since: the webhook was removed
                pass
        self.taken += 1
        return event_type, queue, job_ids[head], timestamp, fields

    def clear(self) -> None:
        """Drop what waits (a removed webhook: the delivery thread takes nothing from it again)."""
        self.runs.clear()
        self.head = 0
        self.added = self.taken


class Webhook:
    __slots__ = (
        "created_at",
        "dropped",
        "enabled",
        "events",
        "failure_count",
        "id",
        "last_triggered",
        "outbox",
        "queue",
        "removed",
        "secret",
        "senders",
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
        # Events waiting for delivery, and how many did not fit.
        self.outbox = Outbox()
        self.dropped = 0
        # Deliveries in flight now (the delivery thread's business).
        self.senders = 0
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


def _no_wake() -> None:
    pass


def _no_notice(name: str, data: dict[str, Any]) -> None:
    pass


class WebhookRegistry:
    """The registered webhooks. ``wake`` (set by the server) is called when an outbox gets work while the
    delivery side said it was ``idle``; the delivery side sets ``idle`` again before it looks for work, so
    a busy delivery costs the broker no signal per event."""

    def __init__(self, allow_private: bool = False, outbox_limit: int = DEFAULT_OUTBOX_LIMIT) -> None:
        self.hooks: dict[str, Webhook] = {}
        self.allow_private = allow_private
        self.outbox_limit = outbox_limit
        self.enabled_count = 0
        # Every registered webhook as a tuple the delivery thread may iterate while commands change the
        # registry; the enabled ones by queue event type, for every queue and for (type, queue).
        self.snapshot: tuple[Webhook, ...] = ()
        self.everywhere: dict[str, tuple[Webhook, ...]] = {}
        self.per_queue: dict[tuple[str, str], tuple[Webhook, ...]] = {}
        # Events offered so far (the delivery side reads it to tell a busy broker).
        self.offered = 0
        self.idle = True
        self.wake: Callable[[], None] = _no_wake
        # Called when the first webhook is registered: the delivery side gets ready (its thread, its HTTP
        # client) then rather than with the first event, which may come in the middle of a burst.
        self.prepare: Callable[[], None] = _no_wake
        # Listeners to system events and the call that tells them (the event hub sets both: see EventHub).
        self.notices: list[Callable[[str, dict[str, Any]], None]] = []
        self.notify: Callable[[str, dict[str, Any]], None] = _no_notice
        self._index()

    def validate(self, url: Any, events: Any) -> None:
        error = webhook_url_error(url, self.allow_private)
        if error is not None:
            raise CommandError(error)
        if type(events) is not list:
            raise CommandError(errors.must_be_string_array("events"))
        # A member that is not a string is an unknown event like any other, named as the reference names it.
        invalid = [e for e in events if type(e) is not str or e not in WEBHOOK_EVENTS]
        if invalid:
            raise CommandError(errors.invalid_webhook_events(invalid, WEBHOOK_EVENTS))

    def add(self, hook: Webhook) -> None:
        self.hooks[hook.id] = hook
        if hook.enabled:
            self.enabled_count += 1
        self._index()
        if len(self.hooks) == 1:
            self.prepare()
        if self.notices:
            self.notify(eventnames.WEBHOOK_ADDED, {"id": hook.id, "url": hook.url, "events": hook.events})

    def remove(self, hook_id: Any) -> Webhook | None:
        hook = self.hooks.pop(hook_id, None) if type(hook_id) is str else None
        if hook is None:
            return None
        if hook.enabled:
            self.enabled_count -= 1
        hook.removed = True
        # What waited for delivery goes with the registration.
        hook.outbox.clear()
        self._index()
        if self.notices:
            self.notify(eventnames.WEBHOOK_REMOVED, {"id": hook.id})
        return hook

    def set_enabled(self, hook_id: Any, enabled: bool) -> Webhook | None:
        hook = self.hooks.get(hook_id) if type(hook_id) is str else None
        if hook is None:
            return None
        if hook.enabled != enabled:
            hook.enabled = enabled
            self.enabled_count += 1 if enabled else -1
            self._index()
            if self.notices:
                name = eventnames.WEBHOOK_ENABLED if enabled else eventnames.WEBHOOK_DISABLED
                self.notify(name, {"webhookId": hook_id})
        return hook

    def _index(self) -> None:
        hooks = tuple(self.hooks.values())
        self.snapshot = hooks
        self.everywhere = {}
        self.per_queue = {}
        for event_type, name in EVENT_NAMES.items():
            wanting = [h for h in hooks if h.enabled and name in h.events]
            self.everywhere[event_type] = tuple(h for h in wanting if h.queue is None)
            for queue in {h.queue for h in wanting if h.queue is not None}:
                self.per_queue[event_type, queue] = tuple(h for h in wanting if h.queue == queue)
        if self.enabled_count and self.idle:
            # The delivery side gets ready (its thread, its session) before the first event.
            self.idle = False
            self.wake()

    def stats(self) -> dict[str, int]:
        return {"total": len(self.hooks), "enabled": self.enabled_count}

    def offer(self, event_type: str, queue: str, job_id: str, timestamp: float, fields: dict[str, Any]) -> None:
        """Queue an event for every enabled webhook that wants it (``fields`` as subscribers get them)."""
        hooks = self.wanting(event_type, queue)
        if not hooks:
            return
        run = (event_type, queue, (job_id,), timestamp, fields)
        limit = self.outbox_limit
        for hook in hooks:
            outbox = hook.outbox
            if len(outbox) < limit:
                outbox.put(run)
            else:
                hook.dropped += 1
        self.offered += 1
        if self.idle:
            self.idle = False
            self.wake()

    def offer_many(self, event_type: str, queue: str, job_ids: list[str], timestamp: float) -> None:
        """``offer`` for each of ``job_ids`` (which no one changes afterwards), with no other field; an
        outbox takes what fits."""
        hooks = self.wanting(event_type, queue)
        count = len(job_ids)
        if not hooks or not count:
            return
        run = (event_type, queue, job_ids, timestamp, NO_FIELDS)
        limit = self.outbox_limit
        for hook in hooks:
            outbox = hook.outbox
            room = limit - len(outbox)
            if room >= count:
                outbox.put(run)
            else:
                room = max(room, 0)
                if room:
                    outbox.put((event_type, queue, job_ids[:room], timestamp, NO_FIELDS))
                hook.dropped += count - room
        self.offered += count
        if self.idle:
            self.idle = False
            self.wake()

    def wanting(self, event_type: str, queue: str) -> tuple[Webhook, ...]:
        """The enabled webhooks that want ``event_type`` events of ``queue``."""
        hooks = self.everywhere.get(event_type, ())
        if self.per_queue:
            here = self.per_queue.get((event_type, queue))
            if here:
                hooks += here
        return hooks
