"""A queue's stall settings from PostgreSQL: SetStallConfig and GetStallConfig (``bunqueue_queues.stall_config``,
NULL while they are the defaults), merged as the memory engine merges them (``components.stallconfig``).

What they mean to a running job here: a lapsed lease counts a stall, and the queue's maxStalls sends the job
to the DLQ (``attempts.Losses.lapsed``). A lease is the only stall signal, so stallInterval and gracePeriod
are kept and answered but do not time anything.
"""
from __future__ import annotations

from typing import Any

from bunqueue.broker.components import eventnames
from bunqueue.broker.components.eventhub import EventHub
from bunqueue.broker.components.stallconfig import DEFAULT_STALL_CONFIG, merged_config
from bunqueue.storage.postgres.attempts import stall_config
from bunqueue.storage.postgres.ops.family import Family
from bunqueue.storage.schema import pack

_ENSURE = "INSERT INTO bunqueue_queues (namespace, queue) VALUES ($1, $2) ON CONFLICT (namespace, queue) DO NOTHING"
_FOR_UPDATE = "SELECT stall_config FROM bunqueue_queues WHERE namespace = $1 AND queue = $2 FOR UPDATE"
_SET = "UPDATE bunqueue_queues SET stall_config = $3 WHERE namespace = $1 AND queue = $2"
_GET = "SELECT stall_config FROM bunqueue_queues WHERE namespace = $1 AND queue = $2"


class StallsFamily(Family):
    events: EventHub

    async def set_stall_config(self, queue: str, update: Any) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute(_ENSURE, self.namespace, queue)
            merged = merged_config(stall_config(await conn.fetchval(_FOR_UPDATE, self.namespace, queue)), update)
            await conn.execute(_SET, self.namespace, queue, None if merged == DEFAULT_STALL_CONFIG else pack(merged))
        if self.events.notices:
            self.events.notify(eventnames.CONFIG_STALL_CHANGED, {"queue": queue, "config": update})

    async def stall_config(self, queue: str) -> dict[str, Any]:
        return dict(stall_config(await self.pool.fetchval(_GET, self.namespace, queue)))
