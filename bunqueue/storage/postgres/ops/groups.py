"""Job groups: the group counts, the group rate limit and concurrency overrides, PauseGroup/ResumeGroup/
IsGroupPaused and RateLimitGroup, over ``bunqueue_groups`` and the group's job rows.

A group's controls and its runtime limits (RateLimitGroup's deadline, the open rate window) live on its
``bunqueue_groups`` row, which every broker's group claim (``groupclaim``) reads under the queue's claim
lock; a change that may let a waiting pull claim notifies the queue, as the memory engine wakes its
waiters. A row that holds nothing a claim or a getter reads any more goes on a timer
(``forget_idle_groups``), as the memory engine drops an idle lane: the table follows the groups in use.
"""
from __future__ import annotations

from bunqueue._core.groups import NO_WINDOW_TTL
from bunqueue.broker.states import ACTIVE, DELAYED, READY
from bunqueue.storage.postgres.ops.family import Family
from bunqueue.storage.postgres.sessions import NOW_MS
from bunqueue.storage.postgres.statements import CHANNEL

_GROUP = "namespace = $1 AND queue = $2 AND group_id = $3"
_NOTIFY = f"pg_notify('{CHANNEL}', json_build_array($1::text, $2::text)::text)"

JOBS_COUNT = f"SELECT count(*) FROM bunqueue_jobs WHERE {_GROUP} AND state IN ({READY}, {DELAYED})"
ACTIVE_COUNT = f"SELECT count(*) FROM bunqueue_jobs WHERE {_GROUP} AND state = {ACTIVE}"
# Every grouped job waiting, prioritized or delayed in the queue (the memory scheduler's pending count).
GROUPS_COUNT = f"""
SELECT count(*) FROM bunqueue_jobs
WHERE namespace = $1 AND queue = $2 AND group_id IS NOT NULL AND state IN ({READY}, {DELAYED})
"""

# $4 the new value. Each upsert's reply row is its notification.
SET_CONCURRENCY = f"""
INSERT INTO bunqueue_groups (namespace, queue, group_id, concurrency) VALUES ($1, $2, $3, $4)
ON CONFLICT (namespace, queue, group_id) DO UPDATE SET concurrency = excluded.concurrency
RETURNING {_NOTIFY}
"""
REMOVE_CONCURRENCY = f"""
UPDATE bunqueue_groups SET concurrency = NULL WHERE {_GROUP} AND concurrency IS NOT NULL RETURNING {_NOTIFY}
"""
CONCURRENCY = f"SELECT concurrency FROM bunqueue_groups WHERE {_GROUP}"

# A new override closes the open window: the next claim opens one under it.
SET_RATE_LIMIT = f"""
INSERT INTO bunqueue_groups (namespace, queue, group_id, rate_max, rate_duration) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (namespace, queue, group_id) DO UPDATE
SET rate_max = excluded.rate_max, rate_duration = excluded.rate_duration, window_max = NULL,
    window_duration = NULL, window_start = NULL, window_count = 0
RETURNING {_NOTIFY}
"""
# Whether there was an override; the open window goes either way.
REMOVE_RATE_LIMIT = f"""
UPDATE bunqueue_groups g
SET rate_max = NULL, rate_duration = NULL, window_max = NULL, window_duration = NULL, window_start = NULL,
    window_count = 0
FROM (SELECT rate_max IS NOT NULL AS had FROM bunqueue_groups WHERE {_GROUP}) before
WHERE g.namespace = $1 AND g.queue = $2 AND g.group_id = $3
RETURNING before.had, {_NOTIFY}
"""
RATE_LIMIT = f"SELECT rate_max, rate_duration FROM bunqueue_groups WHERE {_GROUP} AND rate_max IS NOT NULL"
LIMITS_NOW = f"""
SELECT limited_until, window_max, window_start, window_duration, window_count, {NOW_MS} AS now
FROM bunqueue_groups WHERE {_GROUP}
"""
# RateLimitGroup: $4 ms from now, by the database's clock.
LIMIT_FOR = f"""
INSERT INTO bunqueue_groups (namespace, queue, group_id, limited_until) VALUES ($1, $2, $3, {NOW_MS} + $4)
ON CONFLICT (namespace, queue, group_id) DO UPDATE SET limited_until = excluded.limited_until
"""

PAUSE = """
INSERT INTO bunqueue_groups AS g (namespace, queue, group_id, paused) VALUES ($1, $2, $3, true)
ON CONFLICT (namespace, queue, group_id) DO UPDATE SET paused = true WHERE NOT g.paused
RETURNING true
"""
RESUME = f"UPDATE bunqueue_groups SET paused = false WHERE {_GROUP} AND paused RETURNING {_NOTIFY}"
IS_PAUSED = f"SELECT paused FROM bunqueue_groups WHERE {_GROUP}"

# Rows with no control, no deadline or window still open, and no ready or running job: only their turn is
# left, and a lane that comes back without it waits behind the others by its jobs' seq all the same.
FORGET_IDLE = f"""
DELETE FROM bunqueue_groups g USING (SELECT {NOW_MS} AS now) clock
WHERE g.namespace = $1 AND NOT g.paused AND g.concurrency IS NULL AND g.rate_max IS NULL
  AND coalesce(g.limited_until, 0) <= clock.now
  AND (g.window_start IS NULL OR g.window_start + g.window_duration <= clock.now)
  AND NOT EXISTS (SELECT 1 FROM bunqueue_jobs j WHERE j.namespace = $1 AND j.queue = g.queue
                  AND j.group_id = g.group_id AND j.state IN ({READY}, {ACTIVE}))
"""


class GroupsFamily(Family):
    async def group_jobs_count(self, queue: str, group_id: str) -> int:
        return int(await self.pool.fetchval(JOBS_COUNT, self.namespace, queue, group_id))

    async def groups_count(self, queue: str) -> int:
        return int(await self.pool.fetchval(GROUPS_COUNT, self.namespace, queue))

    async def group_active_count(self, queue: str, group_id: str) -> int:
        return int(await self.pool.fetchval(ACTIVE_COUNT, self.namespace, queue, group_id))

    async def set_group_rate_limit(self, queue: str, group_id: str, max_jobs: int, duration: int) -> None:
        await self.pool.execute(SET_RATE_LIMIT, self.namespace, queue, group_id, max_jobs, duration)

    async def group_rate_limit(self, queue: str, group_id: str) -> dict[str, int] | None:
        row = await self.pool.fetchrow(RATE_LIMIT, self.namespace, queue, group_id)
        return None if row is None else {"max": row["rate_max"], "duration": row["rate_duration"]}

    async def remove_group_rate_limit(self, queue: str, group_id: str) -> int:
        row = await self.pool.fetchrow(REMOVE_RATE_LIMIT, self.namespace, queue, group_id)
        return 1 if row is not None and row["had"] else 0

    async def group_rate_limit_ttl(self, queue: str, group_id: str, max_jobs: int) -> float:
        """Milliseconds until the group's window has room; ``max_jobs`` -1 means the group's own limit."""
        row = await self.pool.fetchrow(LIMITS_NOW, self.namespace, queue, group_id)
        if row is None:
            return NO_WINDOW_TTL
        now = row["now"]
        if row["limited_until"] is not None and now < row["limited_until"]:
            return float(row["limited_until"] - now)
        if row["window_max"] is None or now >= row["window_start"] + row["window_duration"]:
            return NO_WINDOW_TTL
        if max_jobs >= 0 and row["window_count"] < max_jobs:
            return 0.0
        return float(row["window_start"] + row["window_duration"] - now)

    async def set_group_concurrency(self, queue: str, group_id: str, concurrency: int) -> None:
        await self.pool.execute(SET_CONCURRENCY, self.namespace, queue, group_id, concurrency)

    async def group_concurrency(self, queue: str, group_id: str) -> int | None:
        value: int | None = await self.pool.fetchval(CONCURRENCY, self.namespace, queue, group_id)
        return value

    async def remove_group_concurrency(self, queue: str, group_id: str) -> int:
        return 0 if await self.pool.fetchrow(REMOVE_CONCURRENCY, self.namespace, queue, group_id) is None else 1

    async def pause_group(self, queue: str, group_id: str) -> bool:
        return await self.pool.fetchrow(PAUSE, self.namespace, queue, group_id) is not None

    async def resume_group(self, queue: str, group_id: str) -> bool:
        return await self.pool.fetchrow(RESUME, self.namespace, queue, group_id) is not None

    async def is_group_paused(self, queue: str, group_id: str) -> bool:
        return bool(await self.pool.fetchval(IS_PAUSED, self.namespace, queue, group_id))

    async def rate_limit_group(self, queue: str, group_id: str, duration: int) -> None:
        await self.pool.execute(LIMIT_FOR, self.namespace, queue, group_id, duration)

    async def forget_idle_groups(self) -> None:
        await self.pool.execute(FORGET_IDLE, self.namespace)
