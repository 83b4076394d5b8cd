"""Deduplication keys in PostgreSQL: GetDeduplicationJobId, RemoveDeduplicationKey, RemoveJobDeduplicationKey.

A key belongs to the live job whose ``unique_key`` column names it (the push's partial unique index keeps
one per queue) until its deduplication ttl, counted from the job's admission, runs out, as in memory.
Releasing a key clears the owner's column and its record's copy, so a push may take the key again.
"""
from __future__ import annotations

from typing import Any

import asyncpg

from bunqueue._core.jobs import Job
from bunqueue.broker import states
from bunqueue.storage.postgres.ops.family import Family
from bunqueue.storage.schema import pack, unpack

_LIVE = ", ".join(str(code) for code in sorted(states.LIVE))

KEY_OWNER = f"""
SELECT id, created_at, record FROM bunqueue_jobs
WHERE namespace = $1 AND queue = $2 AND unique_key = $3 AND state IN ({_LIVE})
"""
KEY_OWNER_LOCKED = KEY_OWNER + " FOR UPDATE"
JOB_KEY_LOCKED = f"""
SELECT id, created_at, record FROM bunqueue_jobs
WHERE namespace = $1 AND id = $2 AND unique_key IS NOT NULL AND state IN ({_LIVE}) FOR UPDATE
"""
RELEASE_KEY = "UPDATE bunqueue_jobs SET unique_key = NULL, record = $3 WHERE namespace = $1 AND id = $2"


def _storable(value: Any) -> bool:
    """Whether ``value`` can name a stored key or job: a string (another value names nothing, as an
    unknown key in memory)."""
    return type(value) is str


def _holds_key(row: asyncpg.Record | None, now: float) -> Job | None:
    """The owner the row is, while its key's ttl lasts."""
    if row is None:
        return None
    job = Job.from_record(unpack(row["record"]))
    ttl = job.deduplication_ttl
    if ttl is not None and row["created_at"] + ttl <= now:
        return None
    return job


class DedupFamily(Family):
    async def dedup_owner(self, queue: str, key: Any) -> str | None:
        if not _storable(key):
            return None
        row = await self.pool.fetchrow(KEY_OWNER, self.namespace, queue, key)
        return row["id"] if _holds_key(row, self.clock()) is not None else None

    async def remove_dedup_key(self, queue: str, key: Any) -> int:
        if not _storable(key):
            return 0
        async with self.pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(KEY_OWNER_LOCKED, self.namespace, queue, key)
            return 1 if await self._release(conn, row) else 0

    async def remove_job_dedup_key(self, job_id: Any) -> bool:
        if not _storable(job_id):
            return False
        async with self.pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(JOB_KEY_LOCKED, self.namespace, job_id)
            return await self._release(conn, row)

    async def _release(self, conn: asyncpg.Connection, row: asyncpg.Record | None) -> bool:
        job = _holds_key(row, self.clock())
        if row is None or job is None:
            return False
        job.unique_key = None
        await conn.execute(RELEASE_KEY, self.namespace, row["id"], pack(job.to_record()))
        return True
