"""The DLQ and out of completion, from PostgreSQL: Dlq, GetDlqStats, GetDlqConfig read it; RetryDlq, PurgeDlq,
RemoveDlqJob, SetDlqConfig and RetryCompleted change it (the memory engine's ``broker/ops/dlq.py``).

An entry is a ``bunqueue_dlq`` row (its job by id, as ``attempts.dead_letter_entry`` files it) over its job's
row, which stays FAILED while the entry lives; a queue's policy is ``bunqueue_queues.dlq_config``. Filters
and stats are the memory engine's own functions over the entries read. A retry writes every job it moves in
one statement (``_REQUEUE``), which skips a job whose unique key another live job holds, as in memory.

Not here: the DLQ's timed maintenance (automatic retries and maxAge expiry) and its events.
"""
from __future__ import annotations

import math
from typing import Any

import asyncpg

from bunqueue._core.jobs import Job
from bunqueue.broker import states
from bunqueue.broker.components.deadletters import DEFAULT_CONFIG, Entry, entry_stats, merge_config, select_entries
from bunqueue.storage.postgres.attempts import dead_letter_config
from bunqueue.storage.postgres.jobrows import stored_columns, stored_job
from bunqueue.storage.postgres.ops.family import Family
from bunqueue.storage.postgres.statements import _notify_ready
from bunqueue.storage.schema import pack, unpack

_LIVE = ", ".join(str(code) for code in sorted(states.LIVE))

_ENTRIES = f"""
SELECT d.entry, {stored_columns("j")} FROM bunqueue_dlq d
JOIN bunqueue_jobs j ON j.namespace = d.namespace AND j.id = d.job_id
WHERE d.namespace = $1 AND d.queue = $2 ORDER BY d.seq
"""
_ENTRY = f"""
SELECT d.entry, {stored_columns("j")} FROM bunqueue_dlq d
JOIN bunqueue_jobs j ON j.namespace = d.namespace AND j.id = d.job_id
WHERE d.namespace = $1 AND d.job_id = $2
"""
_CONFIG = "SELECT dlq_config FROM bunqueue_queues WHERE namespace = $1 AND queue = $2"
_LOCK_CONFIG = (
    "INSERT INTO bunqueue_queues (namespace, queue) VALUES ($1, $2) ON CONFLICT (namespace, queue) DO NOTHING"
)
_CONFIG_FOR_UPDATE = "SELECT dlq_config FROM bunqueue_queues WHERE namespace = $1 AND queue = $2 FOR UPDATE"
_SET_CONFIG = "UPDATE bunqueue_queues SET dlq_config = $3 WHERE namespace = $1 AND queue = $2"

# Entries (and their jobs) of a queue: all of them ($3 NULL), one job, or those beyond the newest $4.
_DROP = f"""
WITH doomed AS (
    SELECT job_id FROM bunqueue_dlq
    WHERE namespace = $1 AND queue = $2 AND ($3::text IS NULL OR job_id = $3)
    ORDER BY seq DESC OFFSET $4
), dropped AS (
    DELETE FROM bunqueue_dlq d USING doomed
    WHERE d.namespace = $1 AND d.queue = $2 AND d.job_id = doomed.job_id RETURNING d.job_id
), gone AS (
    DELETE FROM bunqueue_jobs j USING dropped
    WHERE j.namespace = $1 AND j.id = dropped.job_id AND j.state = {states.FAILED} RETURNING j.id
), gone_logs AS (
    DELETE FROM bunqueue_job_logs l USING gone WHERE l.namespace = $1 AND l.job_id = gone.id
)
SELECT count(*) FROM dropped
"""

# Jobs ($2 ids, $3 records, $4 run times) back to waiting from one of the states $5: fresh attempts, no
# failure history, result or DLQ entry. A job whose unique key another live job holds stays.
_REQUEUE = f"""
WITH req AS (SELECT * FROM unnest($2::text[], $3::bytea[], $4::bigint[]) AS r(id, record, run_at)),
back AS (
    UPDATE bunqueue_jobs j
    SET state = {states.READY}, attempts = 0, stall_count = 0, started_at = NULL, completed_at = NULL,
        run_at = r.run_at, last_heartbeat = r.run_at, record = r.record, failures = NULL
    FROM req r
    WHERE j.namespace = $1 AND j.id = r.id AND j.state = ANY($5::smallint[])
      AND (j.unique_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM bunqueue_jobs o WHERE o.namespace = $1 AND o.queue = j.queue
          AND o.unique_key = j.unique_key AND o.state IN ({_LIVE}) AND o.id <> j.id))
    RETURNING j.id, j.queue, j.state
), dlq_gone AS (
    DELETE FROM bunqueue_dlq d USING back WHERE d.namespace = $1 AND d.job_id = back.id
), results_gone AS (
    DELETE FROM bunqueue_results r USING back WHERE r.namespace = $1 AND r.job_id = back.id
), {_notify_ready("back")}
SELECT back.id FROM back, woken
"""

# The completed jobs RetryCompleted may restart: one by id ($3), or the oldest at or before $4, up to $5.
_COMPLETED = f"""
SELECT {stored_columns("j")} FROM bunqueue_jobs j
WHERE namespace = $1 AND queue = $2 AND state = {states.COMPLETED}
  AND ($3::text IS NULL OR id = $3) AND completed_at <= $4
ORDER BY completed_at, seq LIMIT $5
"""


class DlqFamily(Family):
    async def dlq_entries(self, queue: str, spec: dict[str, Any] | None) -> list[Entry]:
        async with self.pool.acquire() as conn:
            rows = await conn.fetch(_ENTRIES, self.namespace, queue)
            entries = [_entry(row) for row in rows]
            if spec is None:
                return entries
            return select_entries(entries, await self._config(conn, queue), spec, self.clock())

    async def dlq_entry(self, job_id: str) -> Entry | None:
        row = await self.pool.fetchrow(_ENTRY, self.namespace, job_id)
        return None if row is None else _entry(row)

    async def dlq_stats(self, queue: str) -> dict[str, Any]:
        async with self.pool.acquire() as conn:
            entries = [_entry(row) for row in await conn.fetch(_ENTRIES, self.namespace, queue)]
            return entry_stats(queue, entries, await self._config(conn, queue), self.clock())

    async def dlq_config(self, queue: str) -> dict[str, Any]:
        async with self.pool.acquire() as conn:
            return dict(await self._config(conn, queue))

    async def set_dlq_config(self, queue: str, changes: dict[str, Any]) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute(_LOCK_CONFIG, self.namespace, queue)
            current = dead_letter_config(await conn.fetchval(_CONFIG_FOR_UPDATE, self.namespace, queue))
            merged = merge_config(current, changes)
            await conn.execute(_SET_CONFIG, self.namespace, queue, None if merged == DEFAULT_CONFIG else pack(merged))
            # A lower maxEntries applies at once.
            await conn.fetchval(_DROP, self.namespace, queue, None, int(merged["maxEntries"]))

    async def retry_dlq_entries(self, entries: list[Entry], now: float, job_id: str | None = None) -> int:
        """A manual retry: each job back to waiting with a new history (``Transitions.retry_dead``)."""
        return await self._requeue([entry["job"] for entry in entries], now, states.FAILED)

    async def purge_dlq(self, queue: str) -> int:
        return int(await self.pool.fetchval(_DROP, self.namespace, queue, None, 0))

    async def remove_dlq_entry(self, queue: str, job_id: str) -> bool:
        return bool(await self.pool.fetchval(_DROP, self.namespace, queue, job_id, 0))

    async def retry_completed(self, queue: str, job_id: str | None, limit: float, cutoff: float, now: float) -> int:
        """One completed job by id, or the oldest completions (up to ``limit``, at or before ``cutoff``)."""
        if job_id is None and limit <= 0:
            return 0
        rows = await self.pool.fetch(
            _COMPLETED, self.namespace, queue, job_id, _bigint(math.inf if job_id is not None else cutoff),
            None if job_id is not None or math.isinf(limit) else math.ceil(limit),
        )
        jobs = []
        for row in rows:
            job = stored_job(row)
            job.progress = 0
            job.progress_message = None
            job.completed_at = math.nan
            jobs.append(job)
        return await self._requeue(jobs, now, states.COMPLETED)

    async def _requeue(self, jobs: list[Job], now: float, from_state: int) -> int:
        """``Transitions.restart`` for each job, in one statement: how many moved."""
        for job in jobs:
            job.attempts = 0
            job.stall_count = 0
            job.started_at = math.nan
            job.run_at = now
            job.last_heartbeat = now
            job.state = states.READY
            job.note({"state": states.WAITING, "timestamp": now})
        if not jobs:
            return 0
        rows = await self.pool.fetch(
            _REQUEUE, self.namespace, [job.id for job in jobs], [pack(job.to_record()) for job in jobs],
            [int(now)] * len(jobs), [from_state],
        )
        for queue in {job.queue for job in jobs}:
            self.hot.wakeups.wake(queue)
        return len(rows)

    async def _config(self, conn: asyncpg.Connection, queue: str) -> dict[str, Any]:
        return dead_letter_config(await conn.fetchval(_CONFIG, self.namespace, queue))


def _entry(row: asyncpg.Record) -> Entry:
    entry: Entry = unpack(row["entry"])
    entry["job"] = stored_job(row)
    return entry


def _bigint(value: float) -> int:
    """A time bound as a bigint: infinities to the type's ends."""
    if math.isinf(value):
        return 2**63 - 1 if value > 0 else -(2**63)
    return math.floor(value)
