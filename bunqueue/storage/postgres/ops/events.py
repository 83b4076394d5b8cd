"""Job events in PostgreSQL mode: SubscribeEvents and UnsubscribeEvents, and ``publish``, the one way every
family tells of a job event.

Subscribers, stream taps and webhooks are this broker's own (the memory engine's ``EventHub``). An event is
published by the broker that committed the change it tells of: ``publish`` hands it to this broker's
subscribers and taps at once, offers it to this broker's enabled webhooks (so a webhook hears it once across
brokers), and sends it to the other brokers (``broadcast``), whose listening connection calls ``heard``:
they hand it to their own subscribers and taps, with the memory engine's event shape.
"""
from __future__ import annotations

from typing import Any

from bunqueue.broker.components.eventhub import EventHub
from bunqueue.broker.session import Session
from bunqueue.storage.postgres.broadcast import Broadcast
from bunqueue.storage.postgres.ops.family import Family


class EventsFamily(Family):
    events: EventHub
    broadcast: Broadcast

    def subscribe_events(self, session: Session, queue: str) -> None:
        self.events.subscribe(session, queue)

    def unsubscribe_events(self, session: Session) -> None:
        self.events.unsubscribe(session)

    def publish(self, queue: str, event_type: str, job_id: str, **fields: Any) -> None:
        """Tell every broker's listeners that ``event_type`` happened to job ``job_id`` of ``queue``; call
        it after the commit that made it true. ``fields`` are the event's own (``data``, ``error``,
        ``prev``, ``progress``, ``delay``, ...), named and shaped as the memory engine's ``EventHub.emit``
        takes them; a queue-level event (paused, resumed) names the job ``""``.

        Costs a tuple and a list append when no one on this broker listens; the event reaches the other
        brokers with the next notification this broker sends (one statement per burst)."""
        now = self.clock()
        hub = self.events
        if hub.taps or hub.by_queue.get(queue):
            event: dict[str, Any] = {"eventType": event_type, "queue": queue, "jobId": job_id, "timestamp": now}
            event.update(fields)
            hub.deliver(event)
        if hub.webhooks.enabled_count > 0:
            hub.webhooks.offer(event_type, queue, job_id, now, fields)
        self.broadcast.send((queue, event_type, job_id, now, fields))

    def heard(self, payload: str) -> None:
        """An event notification: another broker's events, to this broker's subscribers and taps (its
        webhooks were told by the broker that committed them)."""
        hub = self.events
        if not (hub.taps or hub.by_queue):
            return
        events = self.broadcast.read(payload)
        if not events:
            return
        for queue, event_type, job_id, timestamp, fields in events:
            if hub.taps or hub.by_queue.get(queue):
                event: dict[str, Any] = {
                    "eventType": event_type, "queue": queue, "jobId": job_id, "timestamp": timestamp,
                }
                event.update(fields)
                hub.deliver(event)
