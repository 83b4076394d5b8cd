"""Queue events for SubscribeEvents: who listens to which queue, and the event envelope.

A transition asks ``hub.wanted`` (or ``hub.listening(queue)``) first: with no subscriber and no enabled
webhook an event costs one attribute read and nothing is built. Delivery is a callable the server sets on
each session, and webhooks get a small record of the event through their registry's outboxes, so the
broker never touches a socket.

Besides job events the hub carries system events (``queue:created``, ``client:connected``, ...) to the
listeners in ``notices``: the HTTP event streams attach one only while a stream is open.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bunqueue._core.jobs import NO_DATA, Job
from bunqueue.broker.clock import now_ms
from bunqueue.broker.session import Session
from bunqueue.webhooks.registry import WebhookRegistry

PUSHED = "pushed"
PULLED = "pulled"
PROGRESS = "progress"
COMPLETED = "completed"
FAILED = "failed"
RETRIED = "retried"
REMOVED = "removed"
STALLED = "stalled"
PAUSED = "paused"
RESUMED = "resumed"
DELAYED = "delayed"
DUPLICATED = "duplicated"

# System events that name what a command did (the streams' own names; job events get theirs from the type).
QUEUE_PAUSED = "queue:paused"
QUEUE_RESUMED = "queue:resumed"
JOB_PROMOTED = "job:promoted"
JOB_DISCARDED = "job:discarded"


class EventHub:
    __slots__ = ("by_queue", "clock", "notices", "taps", "wanted", "webhooks")

    def __init__(self, clock: Callable[[], float] = now_ms, webhooks: WebhookRegistry | None = None) -> None:
        self.clock = clock
        # Queue name -> subscribed sessions. A session listens to at most one queue.
        self.by_queue: dict[str, set[Session]] = {}
        self.webhooks = webhooks if webhooks is not None else WebhookRegistry()
        # Listeners to every queue's events (the HTTP event streams), called with each event object.
        self.taps: list[Callable[[dict[str, Any]], None]] = []
        # Whether anyone hears events at all: a subscriber, a tap or an enabled webhook (see refresh).
        self.wanted = False
        # Listeners to system events, called with (name, data).
        self.notices: list[Callable[[str, dict[str, Any]], None]] = []
        # The registry tells of its own changes (webhook:added, ...) to the same listeners.
        self.webhooks.notices = self.notices
        self.webhooks.notify = self.notify

    def refresh(self) -> None:
        """Recompute ``wanted``; called when subscriptions, taps or enabled webhooks change."""
        self.wanted = bool(self.by_queue) or bool(self.taps) or self.webhooks.enabled_count > 0

    def add_tap(self, tap: Callable[[dict[str, Any]], None]) -> None:
        self.taps.append(tap)
        self.wanted = True

    def remove_tap(self, tap: Callable[[dict[str, Any]], None]) -> None:
        self.taps.remove(tap)
        self.refresh()

    def listen_all(
        self, on_job: Callable[[dict[str, Any]], None], on_system: Callable[[str, dict[str, Any]], None]
    ) -> bool:
        """Hear every queue's job events and every system event until ``unlisten_all``; idempotent: True when
        this call started the listening."""
        if on_job in self.taps:
            return False
        self.add_tap(on_job)
        self.notices.append(on_system)
        return True

    def unlisten_all(
        self, on_job: Callable[[dict[str, Any]], None], on_system: Callable[[str, dict[str, Any]], None]
    ) -> None:
        if on_job in self.taps:
            self.remove_tap(on_job)
            self.notices.remove(on_system)

    def notify(self, name: str, data: dict[str, Any]) -> None:
        """A system event; callers that build its data check ``notices`` first."""
        for listener in self.notices:
            listener(name, data)

    def queue_created(self, queue: str) -> None:
        if self.notices:
            self.notify("queue:created", {"queue": queue})

    def queue_paused(self, queue: str, paused: bool) -> None:
        """A queue paused or resumed: the system event, then the queue-level job event."""
        if self.notices:
            self.notify(QUEUE_PAUSED if paused else QUEUE_RESUMED, {"queue": queue})
        # Queue-level job events carry an empty jobId: clients reject an event whose jobId is not a string.
        self.emit(queue, PAUSED if paused else RESUMED, "")

    def job_moved(self, name: str, job_id: str) -> None:
        """A job promoted or discarded by command: a system event naming the job only, as the original's."""
        if self.notices:
            self.notify(name, {"jobId": job_id})

    def subscribe(self, session: Session, queue: str) -> None:
        """Listen to ``queue``; a new subscription replaces the session's previous one."""
        self.unsubscribe(session)
        self.by_queue.setdefault(queue, set()).add(session)
        session.subscribed = queue
        self.wanted = True

    def unsubscribe(self, session: Session) -> None:
        queue = session.subscribed
        if queue is None:
            return
        session.subscribed = None
        listeners = self.by_queue.get(queue)
        if listeners is not None:
            listeners.discard(session)
            if not listeners:
                del self.by_queue[queue]
                self.refresh()

    def listening(self, queue: str) -> bool:
        return queue in self.by_queue or bool(self.taps) or self.webhooks.enabled_count > 0

    def emit(self, queue: str, event_type: str, job_id: str, **fields: Any) -> None:
        """Send one event to every subscriber of ``queue``. Always carries a string jobId and a numeric
        timestamp: the TS client drops its connection on an event without them."""
        listeners = self.by_queue.get(queue)
        hooks = self.webhooks.enabled_count > 0
        taps = self.taps
        if not listeners and not hooks and not taps:
            return
        now = self.clock()
        if listeners or taps:
            event: dict[str, Any] = {"eventType": event_type, "queue": queue, "jobId": job_id, "timestamp": now}
            event.update(fields)
            self.deliver(event)
        if hooks:
            self.webhooks.offer(event_type, queue, job_id, now, fields)

    def deliver(self, event: dict[str, Any]) -> None:
        """One built event to the subscribers of its queue and to every tap (not to webhooks: ``emit``
        offers them the event; a PostgreSQL broker delivers here what another broker committed)."""
        listeners = self.by_queue.get(event["queue"])
        if listeners:
            frame = {"type": "event", "event": event}
            for session in listeners:
                if session.deliver is not None:
                    session.deliver(frame)
        for tap in self.taps:
            tap(event)

    def emit_many(self, queue: str, event_type: str, job_ids: list[str]) -> None:
        """``emit`` for each of ``job_ids`` with no other field, at one time: a batch's admission."""
        if self.by_queue.get(queue) or self.taps:
            for job_id in job_ids:
                self.emit(queue, event_type, job_id)
        elif self.webhooks.enabled_count > 0:
            self.webhooks.offer_many(event_type, queue, job_ids, self.clock())

    def stalled(self, job: Job, to_dlq: bool) -> None:
        """A lost attempt (stall or expired lease), with what became of the job, as the reference says it."""
        action = "move_to_dlq" if to_dlq else "retry"
        self.emit(job.queue, STALLED, job.id, data={"stallCount": job.stall_count, "action": action})

    def completed(self, job: Job, result: Any, has_result: bool) -> None:
        if has_result:
            self.emit(job.queue, COMPLETED, job.id, data=result)
        else:
            self.emit(job.queue, COMPLETED, job.id)

    def failed(self, job: Job, error: Any, terminal: bool) -> None:
        """A failed attempt; a retryable one is followed by ``retried``."""
        fields: dict[str, Any] = {}
        if job.data is not NO_DATA:
            fields["data"] = job.data
        if error is not None:
            fields["error"] = error
        fields["terminal"] = terminal
        self.emit(job.queue, FAILED, job.id, **fields)
        if not terminal:
            self.emit(job.queue, RETRIED, job.id, prev=FAILED)
