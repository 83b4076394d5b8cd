"""Queue limits in PostgreSQL: RateLimit, RateLimitClear, SetConcurrency, ClearConcurrency, GetQueueLimits.

The limits live in the queue's ``bunqueue_queues`` row and the claim statement enforces them
(``statements.CLAIM``, under the queue's lock), so they hold across brokers: concurrency counts the
queue's running jobs, the rate limit is the memory engine's token bucket kept in the row, on the database's
clock. A change notifies the queue, so pulls it may free claim again on every broker. The limit events are
the events family's (not sent from here); stall settings are another family's.
"""
from __future__ import annotations

from typing import Any

import asyncpg

from bunqueue.broker.components import eventnames
from bunqueue.broker.components.eventhub import EventHub
from bunqueue.broker.components.queuelimits import QueueLimits
from bunqueue.broker.states import ACTIVE
from bunqueue.broker.timers.ratelimits import limits_status
from bunqueue.storage.postgres.ops.family import Family
from bunqueue.storage.postgres.ops.queuecontrol import waking
from bunqueue.storage.postgres.sessions import NOW_MS

# A new rate limit starts with a full bucket ($3 tokens) and lapses $5 ms from now (never when NULL).
SET_RATE_LIMIT = waking(f"""
INSERT INTO bunqueue_queues AS q (namespace, queue, rate_max, rate_duration, rate_expires_at, rate_tokens,
                                  rate_refilled_at)
SELECT $1, $2, $3, $4, clock.now + $5::float8, $3, clock.now FROM (SELECT {NOW_MS} AS now) clock
ON CONFLICT (namespace, queue) DO UPDATE SET
    rate_max = excluded.rate_max, rate_duration = excluded.rate_duration,
    rate_expires_at = excluded.rate_expires_at, rate_tokens = excluded.rate_tokens,
    rate_refilled_at = excluded.rate_refilled_at
""")
# Only a limit that exists is cleared (the row of a queue never limited is not made).
CLEAR_RATE_LIMIT = waking("""
UPDATE bunqueue_queues SET rate_max = NULL, rate_duration = NULL, rate_expires_at = NULL
WHERE namespace = $1 AND queue = $2 AND rate_max IS NOT NULL
""")
SET_CONCURRENCY = waking("""
INSERT INTO bunqueue_queues (namespace, queue, concurrency) VALUES ($1, $2, $3)
ON CONFLICT (namespace, queue) DO UPDATE SET concurrency = excluded.concurrency
""")
CLEAR_CONCURRENCY = waking("""
UPDATE bunqueue_queues SET concurrency = NULL WHERE namespace = $1 AND queue = $2 AND concurrency IS NOT NULL
""")
# The limits, the queue's running jobs (counted only under a concurrency limit) and the database's clock.
QUEUE_LIMITS = f"""
SELECT concurrency, rate_max, rate_duration, rate_expires_at, rate_tokens, rate_refilled_at,
       CASE WHEN concurrency IS NULL THEN 0 ELSE (
           SELECT count(*) FROM bunqueue_jobs WHERE namespace = $1 AND queue = $2 AND state = {ACTIVE}) END
           AS active,
       {NOW_MS} AS now
FROM bunqueue_queues WHERE namespace = $1 AND queue = $2
"""
# A rate limit whose ttl ran out is cleared when read, as in memory (the one read, not a newer one).
EXPIRE_RATE_LIMIT = """
UPDATE bunqueue_queues SET rate_max = NULL, rate_duration = NULL, rate_expires_at = NULL
WHERE namespace = $1 AND queue = $2 AND rate_expires_at = $3
"""


def limits_of(row: asyncpg.Record) -> QueueLimits:
    """The row's limits as the memory engine's ``QueueLimits`` (its bucket as of ``rate_refilled_at``)."""
    limits = QueueLimits()
    limits.concurrency = row["concurrency"]
    limits.rate_max = row["rate_max"]
    limits.rate_duration = row["rate_duration"]
    limits.rate_expires_at = row["rate_expires_at"]
    limits.tokens = row["rate_tokens"]
    limits.refilled_at = row["rate_refilled_at"]
    return limits


class LimitsFamily(Family):
    """The changes are told to every broker's streams as the memory engine tells them (``timers.ratelimits``);
    a clear is told of a queue with no limit too."""

    events: EventHub

    async def set_rate_limit(self, queue: str, limit: float, duration: float | None, ttl: float | None) -> None:
        await self.pool.execute(SET_RATE_LIMIT, self.namespace, queue, limit, duration, ttl)
        if self.events.notices:
            data: dict[str, Any] = {"queue": queue, "max": limit}
            if duration is not None:
                data["duration"] = duration
            if ttl is not None:
                data["ttl"] = ttl
            self.events.notify(eventnames.RATELIMIT_SET, data)

    async def clear_rate_limit(self, queue: str) -> None:
        await self.pool.execute(CLEAR_RATE_LIMIT, self.namespace, queue)
        if self.events.notices:
            self.events.notify(eventnames.RATELIMIT_CLEARED, {"queue": queue})

    async def set_concurrency(self, queue: str, limit: float) -> None:
        await self.pool.execute(SET_CONCURRENCY, self.namespace, queue, limit)
        if self.events.notices:
            self.events.notify(eventnames.CONCURRENCY_SET, {"queue": queue, "concurrency": limit})

    async def clear_concurrency(self, queue: str) -> None:
        await self.pool.execute(CLEAR_CONCURRENCY, self.namespace, queue)
        if self.events.notices:
            self.events.notify(eventnames.CONCURRENCY_CLEARED, {"queue": queue})

    async def queue_limits(self, queue: str, max_jobs: float | None) -> dict[str, Any]:
        row = await self.pool.fetchrow(QUEUE_LIMITS, self.namespace, queue)
        if row is None:
            return limits_status(None, 0, max_jobs, 0)
        limits = limits_of(row)
        now = row["now"]
        expires_at = limits.rate_expires_at
        if limits.expire_rate(now):
            await self.pool.execute(EXPIRE_RATE_LIMIT, self.namespace, queue, expires_at)
        return limits_status(limits, row["active"], max_jobs, now)
