"""Queue-wide removals in PostgreSQL: Drain, Obliterate and Clean, one statement each.

A removed job takes its result, logs and dependency rows with it. Rows a claim holds at that moment are
skipped (SKIP LOCKED) by Drain and Clean: they are becoming active, and active jobs are never drained or
cleaned. The queue events (drained, cleaned, obliterated) are system events, told to every broker's streams
as the memory engine tells them (``broker.ops.cleanup``); no job event is sent for the jobs removed.
"""
from __future__ import annotations

from bunqueue.broker import states
from bunqueue.broker.components import eventnames
from bunqueue.broker.components.eventhub import EventHub
from bunqueue.broker.ops.cleanup import QUEUED_STATES
from bunqueue.storage.postgres.ops.family import Family

_QUEUED = f"{states.READY}, {states.DELAYED}"
# Clean's LIMIT is a bigint: a larger limit removes no more than this one.
_MAX_LIMIT = 2**63 - 1


def _removing(gone: str) -> str:
    """CTEs that delete what the jobs of CTE ``gone`` (their ids) leave behind."""
    return f"""
results AS (DELETE FROM bunqueue_results r USING {gone} g WHERE r.namespace = $1 AND r.job_id = g.id),
logs AS (DELETE FROM bunqueue_job_logs l USING {gone} g WHERE l.namespace = $1 AND l.job_id = g.id),
deps AS (DELETE FROM bunqueue_job_dependencies d USING {gone} g WHERE d.namespace = $1 AND d.job_id = g.id)"""


DRAIN = f"""
WITH gone AS (
    DELETE FROM bunqueue_jobs WHERE (namespace, id) IN (
        SELECT namespace, id FROM bunqueue_jobs
        WHERE namespace = $1 AND queue = $2 AND state IN ({_QUEUED}) FOR UPDATE SKIP LOCKED)
    RETURNING id
), {_removing("gone")}
SELECT count(*) FROM gone
"""

# Everything of the queue: jobs in every state, its DLQ, its controls and settings, its groups' controls.
OBLITERATE = f"""
WITH gone AS (DELETE FROM bunqueue_jobs WHERE namespace = $1 AND queue = $2 RETURNING id),
{_removing("gone")},
dlq AS (DELETE FROM bunqueue_dlq WHERE namespace = $1 AND queue = $2),
controls AS (DELETE FROM bunqueue_queues WHERE namespace = $1 AND queue = $2),
group_controls AS (DELETE FROM bunqueue_groups WHERE namespace = $1 AND queue = $2),
dedup AS (DELETE FROM bunqueue_dedup WHERE namespace = $1 AND queue = $2)
SELECT count(*) FROM gone
"""

# Clean: up to $4 jobs aged at least to $3 (the threshold, ms), oldest first, ties by id as Python orders
# them (COLLATE "C"); the ids with their age, which the caller sorts again (RETURNING keeps no order).
_CLEAN_JOBS = """
WITH gone AS (
    DELETE FROM bunqueue_jobs WHERE (namespace, id) IN (
        SELECT namespace, id FROM bunqueue_jobs
        WHERE namespace = $1 AND queue = $2 AND {where} AND {age} <= $3::float8
        ORDER BY {age}, id COLLATE "C" LIMIT $4 FOR UPDATE SKIP LOCKED)
    RETURNING id, {age} AS age
), {removing}
SELECT id, age FROM gone
"""
CLEAN_QUEUED = _CLEAN_JOBS.format(where=f"state IN ({_QUEUED})", age="created_at", removing=_removing("gone"))
# A completed job ages from its completion (from its creation when that is not known).
CLEAN_COMPLETED = _CLEAN_JOBS.format(
    where=f"state = {states.COMPLETED}", age="coalesce(completed_at, created_at)", removing=_removing("gone"))
# A failed job ages from entering the DLQ: its entry and its job go.
CLEAN_FAILED = f"""
WITH entries AS (
    DELETE FROM bunqueue_dlq WHERE (namespace, queue, job_id) IN (
        SELECT namespace, queue, job_id FROM bunqueue_dlq
        WHERE namespace = $1 AND queue = $2 AND added_at <= $3::float8
        ORDER BY added_at, job_id COLLATE "C" LIMIT $4 FOR UPDATE SKIP LOCKED)
    RETURNING job_id AS id, added_at AS age
), jobs AS (
    DELETE FROM bunqueue_jobs j USING entries e WHERE j.namespace = $1 AND j.id = e.id AND j.state = {states.FAILED}
), {_removing("entries")}
SELECT id, age FROM entries
"""


class CleanupFamily(Family):
    events: EventHub

    async def drain(self, queue: str) -> int:
        count: int = await self.pool.fetchval(DRAIN, self.namespace, queue)
        if count and self.events.notices:
            self.events.notify(eventnames.QUEUE_DRAINED, {"queue": queue, "count": count})
        return count

    async def obliterate(self, queue: str) -> None:
        await self.pool.fetchval(OBLITERATE, self.namespace, queue)
        # Told of every Obliterate, of a queue never seen too, as in memory.
        if self.events.notices:
            self.events.notify(eventnames.QUEUE_OBLITERATED, {"queue": queue})
            self.events.notify(eventnames.QUEUE_REMOVED, {"queue": queue})

    async def clean(self, queue: str, grace: float, state: str | None, limit: int, now: float) -> list[str]:
        """Up to ``limit`` jobs older than ``grace`` ms, oldest first, as the memory engine cleans them."""
        if limit <= 0:
            return []
        if state is None or state in QUEUED_STATES:
            statement = CLEAN_QUEUED
        elif state == "completed":
            statement = CLEAN_COMPLETED
        elif state == "failed":
            statement = CLEAN_FAILED
        else:
            return []
        rows = await self.pool.fetch(statement, self.namespace, queue, now - grace, min(limit, _MAX_LIMIT))
        rows.sort(key=lambda row: (row["age"], row["id"]))
        if rows and self.events.notices:
            cleaned: dict[str, object] = {"queue": queue, "count": len(rows)}
            if state is not None:
                cleaned = {"queue": queue, "state": state, "count": len(rows)}
            self.events.notify(eventnames.QUEUE_CLEANED, cleaned)
        return [row["id"] for row in rows]
