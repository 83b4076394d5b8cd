"""Job logs in PostgreSQL: AddLog, GetLogs, ClearLogs over ``bunqueue_job_logs``.

A job keeps its newest ``MAX_ENTRIES_PER_JOB`` entries, as in memory: an add trims the older ones in the
same statement. Two brokers adding to one job at the same instant may each keep the entry the other just
added (both trim what they saw), so reads take only the newest entries and the next add trims the rest.
Entries go with their job (a cascading foreign key), whichever command deletes it. The memory engine's cap
on how many jobs keep logs bounds its memory; here the logs live as long as their job.
"""
from __future__ import annotations

from typing import Any

import asyncpg

from bunqueue.broker.ops.logs import MAX_ENTRIES_PER_JOB, page
from bunqueue.storage.postgres.ops.family import Family
from bunqueue.storage.schema import pack, unpack

# $2 job id, $3 the packed entry, $4 how many older entries stay (the cap less the new one).
ADD_LOG = """
WITH job AS (SELECT id FROM bunqueue_jobs WHERE namespace = $1 AND id = $2),
added AS (
    INSERT INTO bunqueue_job_logs (namespace, job_id, entry) SELECT $1, id, $3 FROM job RETURNING seq
),
trimmed AS (
    DELETE FROM bunqueue_job_logs
    WHERE namespace = $1 AND job_id = $2 AND EXISTS (SELECT 1 FROM added) AND seq <= (
        SELECT seq FROM bunqueue_job_logs WHERE namespace = $1 AND job_id = $2
        ORDER BY seq DESC OFFSET $4 LIMIT 1)
)
SELECT count(*) FROM added
"""

# The newest entries, newest first ($3 the cap).
GET_LOGS = """
SELECT entry FROM bunqueue_job_logs WHERE namespace = $1 AND job_id = $2 ORDER BY seq DESC LIMIT $3
"""

# Every entry but the newest $3 (0 deletes them all).
CLEAR_LOGS = """
DELETE FROM bunqueue_job_logs
WHERE namespace = $1 AND job_id = $2 AND ($3 = 0 OR seq <= (
    SELECT seq FROM bunqueue_job_logs WHERE namespace = $1 AND job_id = $2 ORDER BY seq DESC OFFSET $3 LIMIT 1))
"""


class LogsFamily(Family):
    async def add_log(self, job_id: str, message: str, level: str, now: float) -> bool:
        """Append an entry; False when no such job exists."""
        entry = pack({"timestamp": now, "level": level, "message": message})
        try:
            added = await self.pool.fetchval(ADD_LOG, self.namespace, job_id, entry, MAX_ENTRIES_PER_JOB - 1)
        except asyncpg.ForeignKeyViolationError:
            # The job was deleted between the statement's look-up and its insert.
            return False
        return bool(added)

    async def get_logs_page(
        self, job_id: str, start: float | None, end: float | None
    ) -> tuple[list[dict[str, Any]], int]:
        """GetLogs: the entries from ``start`` to ``end`` (inclusive, JS ``slice`` rules) and how many."""
        rows = await self.pool.fetch(GET_LOGS, self.namespace, job_id, MAX_ENTRIES_PER_JOB)
        entries: list[dict[str, Any]] = [unpack(row[0]) for row in reversed(rows)]
        return page(entries, start, end), len(entries)

    async def clear_logs(self, job_id: str, keep: int) -> None:
        """Keep the ``keep`` most recent entries (0 clears them all)."""
        await self.pool.execute(CLEAR_LOGS, self.namespace, job_id, min(max(keep, 0), MAX_ENTRIES_PER_JOB))
