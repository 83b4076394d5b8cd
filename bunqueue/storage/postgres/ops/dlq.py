"""The DLQ and out of completion, from PostgreSQL: Dlq, GetDlqStats, GetDlqConfig read it; RetryDlq, PurgeDlq,
RemoveDlqJob, SetDlqConfig and RetryCompleted change it (the memory engine's ``broker/ops/dlq.py``).

An entry is a ``bunqueue_dlq`` row (its job by id, as ``attempts.dead_letter_entry`` files it) over its job's
row, which stays FAILED while the entry lives; a queue's policy is ``bunqueue_queues.dlq_config``. Filters
and stats are the memory engine's own functions over the entries read. A retry writes every job it moves in
one statement (``_REQUEUE``), which skips a job whose unique key another live job holds, as in memory.

The timed maintenance (automatic retries, maxAge expiry) runs on every broker's timer over the entries whose
``due_at`` came (``maintenance_time``, set when filed and when the policy changes), each batch locked so that
one broker takes it. Its system events (dlq:retried, dlq:purged, dlq:auto-retried, ...) go to the streams of
the broker that ran the change, as memory tells them; dlq:added is told where a job is filed (``jobevents``).
"""
from __future__ import annotations

import math
from typing import Any

import asyncpg

from bunqueue._core.jobs import Job
from bunqueue.broker import states
from bunqueue.broker.components import eventnames
from bunqueue.broker.components.deadletters import (
    BLOCKED_RETRY_DELAY,
    DEFAULT_CONFIG,
    Entry,
    can_auto_retry,
    entry_stats,
    is_expired,
    maintenance_time,
    merge_config,
    next_generation,
    select_entries,
)
from bunqueue.broker.components.eventhub import EventHub
from bunqueue.storage.postgres.attempts import dead_letter_config
from bunqueue.storage.postgres.jobrows import stored_columns, stored_job
from bunqueue.storage.postgres.ops.family import Family
from bunqueue.storage.postgres.sessions import NOW_MS
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

# Jobs ($2 ids, $3 records, $4 run times) back to waiting from one of the states $7: fresh attempts, no result
# or DLQ entry, the failure history $5 and DLQ lifetime $6 an automatic retry keeps (NULL: none), their unique
# key ($8) claimed anew. A job whose unique key another live job holds stays.
_REQUEUE = f"""
WITH req AS (
    SELECT * FROM unnest($2::text[], $3::bytea[], $4::bigint[], $5::bytea[], $6::bytea[], $8::text[])
        AS r(id, record, run_at, failures, generation, unique_key)
), back AS (
    UPDATE bunqueue_jobs j
    SET state = {states.READY}, attempts = 0, stall_count = 0, started_at = NULL, completed_at = NULL,
        run_at = r.run_at, last_heartbeat = r.run_at, record = r.record, failures = r.failures,
        dlq_generation = r.generation, unique_key = r.unique_key
    FROM req r
    WHERE j.namespace = $1 AND j.id = r.id AND j.state = ANY($7::smallint[])
      AND (r.unique_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM bunqueue_jobs o WHERE o.namespace = $1 AND o.queue = j.queue
          AND o.unique_key = r.unique_key AND o.state IN ({_LIVE}) AND o.id <> j.id))
    RETURNING j.id, j.queue, j.state
), dlq_gone AS (
    DELETE FROM bunqueue_dlq d USING back WHERE d.namespace = $1 AND d.job_id = back.id
), results_gone AS (
    DELETE FROM bunqueue_results r USING back WHERE r.namespace = $1 AND r.job_id = back.id
), {_notify_ready("back")}
SELECT back.id FROM back, woken
"""

# Entries whose maintenance time has come, up to $2, locked (another broker's maintenance skips them).
_DUE = f"""
SELECT d.entry, {stored_columns("j")}, q.dlq_config, {NOW_MS} AS now
FROM bunqueue_dlq d
JOIN bunqueue_jobs j ON j.namespace = d.namespace AND j.id = d.job_id
LEFT JOIN bunqueue_queues q ON q.namespace = d.namespace AND q.queue = d.queue
WHERE d.namespace = $1 AND d.due_at <= {NOW_MS}
ORDER BY d.due_at LIMIT $2
FOR UPDATE OF d SKIP LOCKED
"""
# Expired entries ($2 queues, $3 job ids) and their jobs.
_EXPIRE = f"""
WITH dropped AS (
    DELETE FROM bunqueue_dlq d USING unnest($2::text[], $3::text[]) AS e(queue, job_id)
    WHERE d.namespace = $1 AND d.queue = e.queue AND d.job_id = e.job_id RETURNING d.job_id
), gone AS (
    DELETE FROM bunqueue_jobs j USING dropped
    WHERE j.namespace = $1 AND j.id = dropped.job_id AND j.state = {states.FAILED} RETURNING j.id
)
DELETE FROM bunqueue_job_logs l USING gone WHERE l.namespace = $1 AND l.job_id = gone.id
"""
# New maintenance times ($2 queues, $3 job ids, $4 times or NULL).
_RESCHEDULE = """
UPDATE bunqueue_dlq d SET due_at = r.due_at
FROM unnest($2::text[], $3::text[], $4::bigint[]) AS r(queue, job_id, due_at)
WHERE d.namespace = $1 AND d.queue = r.queue AND d.job_id = r.job_id
"""
_QUEUE_ENTRIES = "SELECT job_id, entry FROM bunqueue_dlq WHERE namespace = $1 AND queue = $2"
# How many due entries one maintenance run takes (the rest wait for the next).
MAINTENANCE_BATCH = 1000

# The completed jobs RetryCompleted may restart: one by id ($3), or the oldest at or before $4, up to $5.
_COMPLETED = f"""
SELECT {stored_columns("j")} FROM bunqueue_jobs j
WHERE namespace = $1 AND queue = $2 AND state = {states.COMPLETED}
  AND ($3::text IS NULL OR id = $3) AND completed_at <= $4
ORDER BY completed_at, seq LIMIT $5
"""


class DlqFamily(Family):
    events: EventHub

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
            # A lower maxEntries applies at once; the new retry policy to every entry's next maintenance time.
            await conn.fetchval(_DROP, self.namespace, queue, None, int(merged["maxEntries"]))
            rows = await conn.fetch(_QUEUE_ENTRIES, self.namespace, queue)
            if rows:
                await conn.execute(
                    _RESCHEDULE, self.namespace, [queue] * len(rows), [row["job_id"] for row in rows],
                    [_due(maintenance_time(unpack(row["entry"]), merged)) for row in rows],
                )
        if self.events.notices:
            self.events.notify(eventnames.CONFIG_DLQ_CHANGED, {"queue": queue, "config": changes})

    async def retry_dlq_entries(self, entries: list[Entry], now: float, job_id: str | None = None) -> int:
        """RetryDlq: ``entries`` (of one queue) retried, told as in memory; ``job_id`` when the command named one."""
        count = await self.restart_dlq_entries(entries, now)
        if count and self.events.notices:
            retried: dict[str, Any] = {"queue": entries[0]["job"].queue, "count": count}
            if job_id is None:
                self.events.notify(eventnames.DLQ_RETRY_ALL, retried)
            else:
                retried["jobId"] = job_id
                self.events.notify(eventnames.DLQ_RETRIED, retried)
        return count

    async def restart_dlq_entries(self, entries: list[Entry], now: float) -> int:
        """A manual retry: each job back to waiting with a new history (``Transitions.retry_dead``)."""
        async with self.pool.acquire() as conn:
            return len(await self._requeue_finished(conn, [entry["job"] for entry in entries], now, states.FAILED))

    async def purge_dlq(self, queue: str) -> int:
        count = int(await self.pool.fetchval(_DROP, self.namespace, queue, None, 0))
        if count and self.events.notices:
            self.events.notify(eventnames.DLQ_PURGED, {"queue": queue, "count": count})
        return count

    async def remove_dlq_entry(self, queue: str, job_id: str) -> bool:
        return bool(await self.pool.fetchval(_DROP, self.namespace, queue, job_id, 0))

    async def retry_completed(self, queue: str, job_id: str | None, limit: float, cutoff: float, now: float) -> int:
        """One completed job by id, or the oldest completions (up to ``limit``, at or before ``cutoff``)."""
        if job_id is None and limit <= 0:
            return 0
        async with self.pool.acquire() as conn:
            rows = await conn.fetch(
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
            return len(await self._requeue_finished(conn, jobs, now, states.COMPLETED))

    async def maintain_dlq(self) -> None:
        """The DLQ work that is due, across brokers (``Transitions.maintain_dlq``): automatic retries first,
        then expiry (maxAge); every other due entry gets its next maintenance time."""
        async with self.pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(_DUE, self.namespace, MAINTENANCE_BATCH)
            if not rows:
                return
            now = float(rows[0]["now"])
            entries = [(_entry(row), dead_letter_config(row["dlq_config"])) for row in rows]
            retries = [(entry, config) for entry, config in entries if can_auto_retry(entry, config, now)]
            retried = await self._requeue_finished(
                conn, [entry["job"] for entry, _ in retries], now, states.FAILED,
                [pack(entry["attempts"]) for entry, _ in retries],
                [pack(next_generation(entry, config, now)) for entry, config in retries],
            ) if retries else set()
            expired: list[Entry] = []
            later: list[tuple[Entry, float | None]] = []
            for entry, config in entries:
                if entry["job"].id in retried:
                    continue
                if is_expired(entry, now):
                    expired.append(entry)
                elif can_auto_retry(entry, config, now):
                    # Its unique key is held by another live job: try again later (or expire first).
                    expires_at = entry["expiresAt"]
                    retry_at = now + BLOCKED_RETRY_DELAY
                    later.append((entry, retry_at if expires_at is None else min(retry_at, expires_at)))
                else:
                    later.append((entry, maintenance_time(entry, config)))
            if expired:
                await conn.execute(
                    _EXPIRE, self.namespace, [e["job"].queue for e in expired], [e["job"].id for e in expired]
                )
            if later:
                await conn.execute(
                    _RESCHEDULE, self.namespace, [e["job"].queue for e, _ in later], [e["job"].id for e, _ in later],
                    [_due(when) for _, when in later],
                )
        if self.events.notices:
            self._maintained([entry for entry, _ in retries if entry["job"].id in retried], expired)

    def _maintained(self, retried: list[Entry], expired: list[Entry]) -> None:
        """dlq:auto-retried, then dlq:expired, for each queue with any, as the memory engine's maintenance."""
        told: dict[str, list[int]] = {}
        for i, entries in enumerate((retried, expired)):
            for entry in entries:
                told.setdefault(entry["job"].queue, [0, 0])[i] += 1
        for queue, (retries, expiries) in told.items():
            if retries:
                self.events.notify(eventnames.DLQ_AUTO_RETRIED, {"queue": queue, "count": retries})
            if expiries:
                self.events.notify(eventnames.DLQ_EXPIRED, {"queue": queue, "count": expiries})

    async def _requeue_finished(
        self, conn: asyncpg.Connection, jobs: list[Job], now: float, from_state: int,
        histories: list[bytes] | None = None, generations: list[bytes] | None = None,
    ) -> set[str]:
        """``Transitions.restart`` for each job, in one statement: the ids that moved. An automatic DLQ retry
        keeps each job's failure history and next DLQ lifetime (``histories``, ``generations``). Of jobs that
        share a unique key only the first may take it, as in memory, where it is taken in turn."""
        keys: set[tuple[str, str]] = set()
        kept = []
        for i, job in enumerate(jobs):
            if job.unique_key is not None:
                if (job.queue, job.unique_key) in keys:
                    continue
                keys.add((job.queue, job.unique_key))
            kept.append(i)
        if len(kept) < len(jobs):
            jobs = [jobs[i] for i in kept]
            histories = None if histories is None else [histories[i] for i in kept]
            generations = None if generations is None else [generations[i] for i in kept]
        for job in jobs:
            job.attempts = 0
            job.stall_count = 0
            job.started_at = math.nan
            job.run_at = now
            job.last_heartbeat = now
            job.state = states.READY
            job.note({"state": states.WAITING, "timestamp": now})
        if not jobs:
            return set()
        none: list[bytes | None] = [None] * len(jobs)
        rows = await conn.fetch(
            _REQUEUE, self.namespace, [job.id for job in jobs], [pack(job.to_record()) for job in jobs],
            [int(now)] * len(jobs), none if histories is None else histories,
            none if generations is None else generations, [from_state], [job.unique_key for job in jobs],
        )
        for queue in {job.queue for job in jobs}:
            self.hot.wakeups.wake(queue)
        return {row[0] for row in rows}

    async def _config(self, conn: asyncpg.Connection, queue: str) -> dict[str, Any]:
        return dead_letter_config(await conn.fetchval(_CONFIG, self.namespace, queue))


def _entry(row: asyncpg.Record) -> Entry:
    entry: Entry = unpack(row["entry"])
    entry["job"] = stored_job(row)
    return entry


def _due(when: float | None) -> int | None:
    return None if when is None else math.ceil(when)


def _bigint(value: float) -> int:
    """A time bound as a bigint: infinities to the type's ends."""
    if math.isinf(value):
        return 2**63 - 1 if value > 0 else -(2**63)
    return math.floor(value)
