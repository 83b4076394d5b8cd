"""Job and system events across brokers: the broker that committed a change tells every other broker in its
namespace.

An event is sent with NOTIFY on the wake-up channel (``statements.CHANNEL``), after the commit that made it
true, and every broker's listening connection (``wakeups``) hands the namespace's events to its own
subscribers and streams. Nothing is written per event: a notification is not stored once delivered.

Events are gathered as they happen and sent by one flusher, which takes everything that arrived in the
``WINDOW_S`` after the first one and while the previous statement ran: a burst of events costs one
statement (``SELECT pg_notify(...) FROM unnest(...)``), whatever the number of notifications it needs, and
a steady stream (a pulled and a completed event per job) at most one per window, where sending as soon as
the previous statement returned took one for every two or three jobs. A notification is one text shorter
than PostgreSQL's limit (8000 bytes): a marker, then base64 of MessagePack, so job data and results cross
exactly as the wire carries them (binary, large integers). An event too large for one notification on its
own crosses without its large fields, named in the event (``Received``'s last item): the other brokers read
a left-out ``data`` (the job data or result) back from the database (``ops.events``).
"""
from __future__ import annotations

import asyncio
import base64
import logging
from typing import Any

import asyncpg
import msgpack

from bunqueue.storage.postgres.statements import CHANNEL
from bunqueue.storage.postgres.wakeups import EVENTS_MARK

log = logging.getLogger("bunqueue.postgres")

# The first character of an event notification; a wake-up's payload is JSON and starts with "[".
MARK = EVENTS_MARK
# Room for the packed events of one notification: base64 grows 3 bytes to 4, and the limit is 8000 bytes.
PACKED_ROOM = 5800
# A field larger than this (packed) is left out of an event too large for one notification.
FIELD_ROOM = 512
# (queue, event type, job id, timestamp, the event's other fields); a list of ids in place of the job id
# stands for that event of each of them (``send_many``), in order.
Event = tuple[str, str, str | list[str], float, dict[str, Any]]
# How long the first event of a notification waits for others: what an event on another broker's stream
# lags behind its commit, at most, beyond the statement itself.
WINDOW_S = 0.005
# The ids one entry of ``send_many`` carries: 128 generated ids pack to under 5,000 bytes.
IDS_PER_EVENT = 128
# The event type of a system event (``EventHub.notify``): this mark, then its name; its queue and job id are
# empty and its fields are its data.
SYSTEM_MARK = "!"
# An event as another broker sent it, with the names of the fields it left out.
Received = tuple[str, str, str, float, dict[str, Any], list[str]]

NOTIFY_MANY = f"SELECT count(pg_notify('{CHANNEL}', payload)) FROM unnest($1::text[]) AS payload"


class Broadcast:
    """This broker's outgoing events (``send``) and the reading of other brokers' ones (``read``)."""

    def __init__(self, pool: asyncpg.Pool, namespace: str, broker_id: str, window_s: float = WINDOW_S) -> None:
        self.pool = pool
        self.window_s = window_s
        self.namespace = namespace
        self.broker_id = broker_id
        self._header = msgpack.packb([namespace, broker_id], use_bin_type=True)
        self._pending: list[Event] = []
        self._flusher: asyncio.Task[None] | None = None
        # Events sent and notifications they took, for the logs and the tests.
        self.sent = 0

    def send(self, event: Event) -> None:
        """Queue ``event`` for the next notification; the call returns at once."""
        self._pending.append(event)
        if self._flusher is None:
            self._flusher = asyncio.get_running_loop().create_task(self._flush())

    def send_many(self, queue: str, event_type: str, job_ids: list[str], timestamp: float) -> None:
        """``send`` of ``event_type`` for each of ``job_ids`` with no other field (a batch's admission), as
        one entry per ``IDS_PER_EVENT`` ids: the other brokers hear one event per id (``read``)."""
        for start in range(0, len(job_ids), IDS_PER_EVENT):
            self.send((queue, event_type, job_ids[start:start + IDS_PER_EVENT], timestamp, _NO_FIELDS))

    async def _flush(self) -> None:
        try:
            while self._pending:
                await asyncio.sleep(self.window_s)
                events, self._pending = self._pending, []
                try:
                    await self.pool.execute(NOTIFY_MANY, self.payloads(events))
                    self.sent += len(events)
                except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                    log.warning("%d job events were not sent to the other brokers: %s", len(events), exc)
        finally:
            self._flusher = None

    def payloads(self, events: list[Event]) -> list[str]:
        """``events`` in as few notifications as fit, in order."""
        out: list[str] = []
        chunk: list[bytes] = []
        size = 0
        for event in events:
            packed = _packed(event)
            if len(packed) > PACKED_ROOM:
                packed = _trimmed(event)
            if chunk and size + len(packed) > PACKED_ROOM:
                out.append(self._payload(chunk))
                chunk, size = [], 0
            chunk.append(packed)
            size += len(packed)
        if chunk:
            out.append(self._payload(chunk))
        return out

    def _payload(self, chunk: list[bytes]) -> str:
        return MARK + base64.b64encode(self._header + b"".join(chunk)).decode("ascii")

    def read(self, payload: str) -> list[Received] | None:
        """The events of a notification another broker of this namespace sent; None for any other."""
        try:
            unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, use_list=True)
            unpacker.feed(base64.b64decode(payload[1:]))
            namespace, broker_id = next(unpacker)
            if namespace != self.namespace or broker_id == self.broker_id:
                return None
            events: list[Received] = []
            for event in unpacker:
                if type(event[2]) is list:
                    events.extend((event[0], event[1], job_id, event[3], {}, []) for job_id in event[2])
                else:
                    events.append((*event[:5], event[5] if len(event) > 5 else []))
            return events
        except (ValueError, TypeError, IndexError, StopIteration, msgpack.UnpackException):
            log.warning("ignored a malformed event notification: %r", payload[:200])
            return None

    async def close(self) -> None:
        if self._flusher is not None:
            await asyncio.gather(self._flusher, return_exceptions=True)


_NO_FIELDS: dict[str, Any] = {}

# One packer for the events, kept: building one per event costs more than packing it. Events are packed on
# the loop only (``Broadcast._flush``).
_pack = msgpack.Packer(use_bin_type=True).pack


def _packed(event: Event) -> bytes:
    return _pack(event)


def _trimmed(event: Event) -> bytes:
    """``event`` without its large fields, which it names."""
    fields = event[4]
    sizes = {name: len(msgpack.packb(value, use_bin_type=True)) for name, value in fields.items()}
    kept = {name: value for name, value in fields.items() if sizes[name] <= FIELD_ROOM}
    return msgpack.packb([*event[:4], kept, [name for name in fields if name not in kept]], use_bin_type=True)
