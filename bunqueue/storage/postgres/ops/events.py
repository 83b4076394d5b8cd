"""Job events in PostgreSQL mode: SubscribeEvents and UnsubscribeEvents, and ``publish``, the one way every
family tells of a job event.

Subscribers, stream taps and webhooks are this broker's own (the memory engine's ``EventHub``). An event is
published by the broker that committed the change it tells of: ``publish`` hands it to this broker's
subscribers and taps at once, offers it to this broker's enabled webhooks (so a webhook hears it once across
brokers), and sends it to the other brokers (``broadcast``), whose listening connection calls ``heard``:
they hand it to their own subscribers and taps, with the memory engine's event shape. An event that came
without its ``data`` (too large for a notification) gets it back from the database, and the events heard
after it wait for it, so that each broker's listeners hear events in the order they were sent.

System events (dlq:added, job:promoted, cron:fired, ...) cross the same way: ``send_system_event`` stays
among the hub's system listeners, so every system event told on this broker is built and sent, and another
broker hands it to its own streams as if told there. Those about this broker's own process and connections
(``LOCAL_SYSTEM_EVENTS``) stay here, and so does queue:created, which each broker tells of the first push
it sees into a queue (``jobevents``). A system event too large for a notification crosses without its
large fields.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import asyncpg

from bunqueue._core.jobs import NO_DATA, Job
from bunqueue.broker.components import eventhub, eventnames
from bunqueue.broker.components.eventhub import EventHub
from bunqueue.broker.session import Session
from bunqueue.storage.postgres.broadcast import SYSTEM_MARK, Broadcast, Received
from bunqueue.storage.postgres.ops.family import Family
from bunqueue.storage.schema import unpack

log = logging.getLogger("bunqueue.postgres")

# The data an event left out: a completed job's result, or another event's job data.
STORED_RESULT = "SELECT result FROM bunqueue_results WHERE namespace = $1 AND job_id = $2"
STORED_RECORD = "SELECT record FROM bunqueue_jobs WHERE namespace = $1 AND id = $2"

# System events told only to the streams of the broker they happened on.
LOCAL_SYSTEM_EVENTS = frozenset((
    eventnames.SERVER_STARTED, eventnames.SERVER_SHUTDOWN, eventnames.SERVER_RECOVERED, eventnames.MEMORY_COMPACTED,
    "client:connected", "client:disconnected", eventnames.AUTH_FAILED, eventnames.RATELIMIT_HIT, "queue:created",
))


class EventsFamily(Family):
    events: EventHub
    broadcast: Broadcast
    # Events heard while one before them has its data read back, in order; None when none is.
    heard_later: list[Received] | None = None
    # Webhook delivery (``ops.webhooks``), on the broker that committed the event.
    offer_webhook_event: Callable[[str, str, str, float, dict[str, Any]], None]
    offer_webhook_events: Callable[[str, str, list[str], float], None]

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
        # Webhooks hear it here, on the committing broker only (``ops.webhooks``: this broker's copy of them).
        self.offer_webhook_event(event_type, queue, job_id, now, fields)
        self.broadcast.send((queue, event_type, job_id, now, fields))

    def publish_many(self, queue: str, event_type: str, job_ids: list[str]) -> None:
        """``publish`` of ``event_type`` for each of ``job_ids``, with no other field and one timestamp (a
        batch's admission): the other brokers get the ids together, a few entries per batch."""
        now = self.clock()
        hub = self.events
        if hub.taps or hub.by_queue.get(queue):
            for job_id in job_ids:
                hub.deliver({"eventType": event_type, "queue": queue, "jobId": job_id, "timestamp": now})
        self.offer_webhook_events(event_type, queue, job_ids, now)
        self.broadcast.send_many(queue, event_type, job_ids, now)

    def share_system_events(self) -> None:
        """From now on every system event told on this broker reaches the other brokers' streams too."""
        self.events.notices.append(self.send_system_event)

    def send_system_event(self, name: str, data: dict[str, Any]) -> None:
        """A system listener of this broker's hub: the event to the other brokers (``LOCAL_SYSTEM_EVENTS``
        excepted)."""
        if name not in LOCAL_SYSTEM_EVENTS:
            self.broadcast.send(("", SYSTEM_MARK + name, "", self.clock(), data))

    def heard(self, payload: str) -> None:
        """An event notification: another broker's events, to this broker's subscribers and taps (its
        webhooks were told by the broker that committed them)."""
        hub = self.events
        if not (hub.taps or hub.by_queue):
            return
        events = self.broadcast.read(payload)
        if not events:
            return
        for received in events:
            if self.heard_later is not None:
                self.heard_later.append(received)
            elif "data" in received[5] and not received[1].startswith(SYSTEM_MARK):
                self.heard_later = [received]
                asyncio.ensure_future(self._deliver_later())
            else:
                self._deliver_heard(received)

    def _deliver_heard(self, received: Received) -> None:
        queue, event_type, job_id, timestamp, fields, _left_out = received
        hub = self.events
        if event_type.startswith(SYSTEM_MARK):
            for listener in list(hub.notices):
                if listener != self.send_system_event:
                    listener(event_type[len(SYSTEM_MARK):], fields)
            return
        if hub.taps or hub.by_queue.get(queue):
            event: dict[str, Any] = {"eventType": event_type, "queue": queue, "jobId": job_id, "timestamp": timestamp}
            event.update(fields)
            hub.deliver(event)

    async def _deliver_later(self) -> None:
        waiting = self.heard_later
        assert waiting is not None
        while waiting:
            received = waiting.pop(0)
            if "data" in received[5] and not received[1].startswith(SYSTEM_MARK):
                data = await self._stored_data(received[1], received[2])
                if data is not NO_DATA:
                    received[4]["data"] = data
            self._deliver_heard(received)
        self.heard_later = None

    async def _stored_data(self, event_type: str, job_id: str) -> Any:
        """What an event's ``data`` is, as the database holds it now (NO_DATA when it holds none)."""
        try:
            if event_type == eventhub.COMPLETED:
                result = await self.pool.fetchval(STORED_RESULT, self.namespace, job_id)
                return NO_DATA if result is None else unpack(result)
            record = await self.pool.fetchval(STORED_RECORD, self.namespace, job_id)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            log.warning("the data of job %s's %s event was not read: %s", job_id, event_type, exc)
            return NO_DATA
        return NO_DATA if record is None else Job.from_record(unpack(record)).data
