"""Administrative job transitions in PostgreSQL: Cancel, Update, ChangePriority, Promote, PromoteJobs,
ChangeDelay, MoveToDelayed, MoveToWait, Discard and Progress.

Each change is one statement whose WHERE names the states it moves from (and, for a leased job, the lease's
token), so of two brokers changing one job only one wins; a statement that changes nothing is refused with
the memory engine's error, chosen from the row as it is afterwards (one more read, on the refusal path
only). Times are the database's. A move that makes a job claimable notifies its queue from inside the
statement. Values that live only in the job's record (data, progress) are rewritten against the row version
that was read (``xmin``), and read again when another write came first.

Discard files the job in its queue's DLQ as a terminal failure is filed (``attempts.Losses``, the hot path's
``LOSE``), after reading the row under a lock in the same transaction: of two brokers discarding one job,
the second finds it failed.

As in memory, a job pulled without an owner holds no lease: anyone may move it.

The events are the memory engine's (``broker.ops.jobcontrol``): job events (removed, delayed, progress) go
to every broker through ``publish`` once the statement committed; the system events naming a command
(``job:promoted``, ``job:priority-changed``, ...) are told to every broker's streams (``ops.events``).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import asyncpg

from bunqueue import errors
from bunqueue._core.jobs import Job
from bunqueue.broker import states
from bunqueue.broker.components import eventhub, eventnames
from bunqueue.broker.components.eventhub import JOB_DISCARDED, EventHub
from bunqueue.broker.ops.jobcontrol import UPDATABLE, _keep_flow_metadata, normalize_progress
from bunqueue.errors import CommandError
from bunqueue.monitoring.counters import Counters
from bunqueue.storage.postgres import statements
from bunqueue.storage.postgres.attempts import Losses, Lost
from bunqueue.storage.postgres.ops.family import Family
from bunqueue.storage.postgres.pgtext import bigint_sql
from bunqueue.storage.postgres.sessions import NOW_MS
from bunqueue.storage.postgres.statements import _END_LEASE, _LOST_COLUMNS, _notify_ready
from bunqueue.storage.schema import pack, unpack

READY, DELAYED, ACTIVE = states.READY, states.DELAYED, states.ACTIVE
QUEUED = [READY, DELAYED]
# A rewrite of a record loses to a concurrent write at most this many times before the command gives up.
RECORD_RETRIES = 20

# Queued and waiting-children jobs leave (with the dependencies they wait on; their logs cascade).
CANCEL = f"""
WITH gone AS (
    DELETE FROM bunqueue_jobs
    WHERE namespace = $1 AND id = $2 AND state IN ({READY}, {DELAYED}, {states.WAITING_CHILDREN})
    RETURNING id, queue, state, priority, run_at
), unlinked AS (
    DELETE FROM bunqueue_job_dependencies d USING gone WHERE d.namespace = $1 AND d.job_id = gone.id
)
SELECT queue, state, priority, run_at, {NOW_MS} AS now FROM gone
"""

CHANGE_PRIORITY = f"""
UPDATE bunqueue_jobs SET priority = $3, lifo = coalesce($4, lifo)
WHERE namespace = $1 AND id = $2 AND state IN ({READY}, {DELAYED})
"""

# A job from one of the states $4 runs $3 ms from now (ready at once when $3 <= 0). A running job leaves its
# worker with no attempt charged (the claim counted one); a leased one only for its token ($5). With $6 the
# job goes behind the jobs already waiting (a fresh seq), and with $7 it must still be delayed.
REQUEUE = f"""
WITH clock AS (SELECT {NOW_MS} AS now),
moved AS (
    UPDATE bunqueue_jobs j
    SET run_at = {bigint_sql("clock.now + $3::float8")},
        state = CASE WHEN $3::float8 > 0 THEN {DELAYED} ELSE {READY} END,
        seq = CASE WHEN $6 THEN nextval('bunqueue_job_seq') ELSE j.seq END,
        attempts = CASE WHEN j.state = {ACTIVE} THEN j.attempts - 1 ELSE j.attempts END,
        started_at = CASE WHEN j.state = {ACTIVE} THEN NULL ELSE j.started_at END,
        worker_id = NULL, lease_ttl = NULL, {_END_LEASE}
    FROM clock
    WHERE j.namespace = $1 AND j.id = $2 AND j.state = ANY($4::smallint[])
      AND (j.state <> {ACTIVE} OR j.worker_id IS NULL OR j.lease_token = $5)
      AND (NOT $7 OR j.run_at > clock.now)
    RETURNING j.queue, j.state
), {_notify_ready("moved")}
SELECT moved.queue, moved.state FROM moved, woken
"""

# The oldest delayed jobs of a queue by creation (then id), at most $3 (NULL: all), ready now in that order.
PROMOTE_JOBS = f"""
WITH clock AS (SELECT {NOW_MS} AS now),
picked AS (
    SELECT id, created_at FROM bunqueue_jobs, clock
    WHERE namespace = $1 AND queue = $2 AND state IN ({READY}, {DELAYED}) AND run_at > clock.now
    ORDER BY created_at, id COLLATE "C" LIMIT $3
    FOR UPDATE
), numbered AS (
    SELECT id, nextval('bunqueue_job_seq') AS seq FROM (SELECT id FROM picked ORDER BY created_at, id COLLATE "C") o
), moved AS (
    UPDATE bunqueue_jobs j SET state = {READY}, run_at = clock.now, seq = numbered.seq
    FROM numbered, clock
    WHERE j.namespace = $1 AND j.id = numbered.id
    RETURNING j.queue, j.state
), {_notify_ready("moved")}
SELECT count(*) FROM moved, woken
"""

# What a refusal is chosen from.
JOB_ROW = f"""
SELECT state, priority, run_at, worker_id IS NOT NULL AND lease_token IS NOT NULL AS leased, lease_token,
       {NOW_MS} AS now
FROM bunqueue_jobs WHERE namespace = $1 AND id = $2
"""

# A job to discard, locked until ``statements.LOSE`` files it, with its lease (``_check_lease``).
DISCARD_READ = f"""
SELECT {_LOST_COLUMNS}, j.worker_id IS NOT NULL AND j.lease_token IS NOT NULL AS leased, j.lease_token
FROM bunqueue_jobs j
LEFT JOIN bunqueue_queues q ON q.namespace = $1 AND q.queue = j.queue
WHERE j.namespace = $1 AND j.id = $2
FOR UPDATE OF j
"""

# The record and the columns that win over its copies of them.
RECORD = """
SELECT state, priority, lifo, run_at, record, xmin::text AS version FROM bunqueue_jobs
WHERE namespace = $1 AND id = $2
"""
# $4 the version read; $5 a new last_heartbeat (NULL keeps it).
REWRITE = """
UPDATE bunqueue_jobs SET record = $3, last_heartbeat = coalesce($5, last_heartbeat)
WHERE namespace = $1 AND id = $2 AND xmin::text = $4
"""


class JobControlFamily(Family):
    events: EventHub
    counters: Counters
    # ``EventsFamily.publish``: publish(queue, event type, job id, **fields).
    publish: Callable[..., None]

    async def cancel(self, job_id: str) -> None:
        row = await self.pool.fetchrow(CANCEL, self.namespace, job_id)
        if row is None:
            raise CommandError(errors.CANNOT_CANCEL)
        self.counters.on_event(row["queue"])
        self.publish(row["queue"], eventhub.REMOVED, job_id, prev=_state_name(row))

    async def update_data(self, job_id: str, data: Any) -> None:
        def change(job: Job) -> None:
            if job.state not in UPDATABLE:
                raise CommandError(errors.CANNOT_UPDATE)
            job.data = _keep_flow_metadata(job.data, data)

        await self._rewrite(job_id, change, None, errors.CANNOT_UPDATE)
        if self.events.notices:
            self.events.notify(eventnames.JOB_DATA_UPDATED, {"jobId": job_id})

    async def change_priority(self, job_id: str, priority: float, lifo: bool | None) -> None:
        if await self.pool.execute(CHANGE_PRIORITY, self.namespace, job_id, priority, lifo) == "UPDATE 0":
            raise CommandError(errors.NOT_IN_QUEUE)
        if self.events.notices:
            self.events.notify(eventnames.JOB_PRIORITY_CHANGED, {"jobId": job_id, "newPriority": priority})

    async def promote(self, job_id: str, now: float) -> None:
        if await self._requeue_job(job_id, 0.0, QUEUED, None, fresh=True, delayed_only=True) is None:
            raise CommandError(errors.NOT_DELAYED)
        self.events.job_moved(eventhub.JOB_PROMOTED, job_id)

    async def promote_jobs(self, queue: str, count: float, now: float) -> int:
        limit = None if count == math.inf else int(count)
        promoted = int(await self.pool.fetchval(PROMOTE_JOBS, self.namespace, queue, limit))
        if promoted:
            self.hot.wakeups.wake(queue)
        return promoted

    async def change_delay(self, job_id: str, delay: float, token: Any, now: float, failure: str) -> None:
        if await self._requeue_job(job_id, delay, [READY, DELAYED, ACTIVE], token) is None:
            row = await self._job_row(job_id)
            _check_lease(row, job_id, token)
            raise CommandError(failure)
        if self.events.notices:
            self.events.notify(eventnames.JOB_DELAY_CHANGED, {"jobId": job_id, "newDelay": delay})

    async def move_to_delayed(self, job_id: str, delay: float, token: Any, now: float) -> None:
        moved = await self._requeue_job(job_id, delay, [READY, DELAYED, ACTIVE], token)
        if moved is None:
            row = await self._job_row(job_id)
            if row is None:
                raise CommandError(errors.JOB_NOT_FOUND)
            _check_lease(row, job_id, token)
            raise CommandError(errors.not_active(_state_name(row)))
        queue = moved["queue"]
        self.counters.on_event(queue)
        if self.events.notices:
            self.events.notify(eventnames.JOB_MOVED_TO_DELAYED, {"jobId": job_id, "delay": delay})
        self.publish(queue, eventhub.DELAYED, job_id, delay=delay)

    async def move_to_wait(self, job_id: str, token: Any, now: float) -> None:
        """Back to waiting by the current state: active is released, delayed promoted, failed retried."""
        for _ in range(RECORD_RETRIES):
            row = await self._job_row(job_id)
            state = states.UNKNOWN if row is None else _state_name(row)
            if state in (states.WAITING, states.PRIORITIZED):
                return
            if state == states.ACTIVE_NAME:
                _check_lease(row, job_id, token)
                moved = await self._requeue_job(job_id, 0.0, [ACTIVE], token)
            elif state == states.DELAYED_NAME:
                moved = await self._requeue_job(job_id, 0.0, QUEUED, None, fresh=True, delayed_only=True)
                if moved is not None:
                    self.events.job_moved(eventhub.JOB_PROMOTED, job_id)
            elif state == states.FAILED_NAME:
                return await self._retry_failed(job_id, now)
            else:
                raise CommandError(errors.cannot_move_to_wait(state))
            if moved is not None:
                return
        raise CommandError(errors.cannot_move_to_wait(state))

    async def discard(self, job_id: str, token: Any, now: float) -> None:
        """Straight to the DLQ (reason unknown) from waiting, delayed or active; else not found, as in memory."""
        losses = Losses()
        async with self.pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(DISCARD_READ, self.namespace, job_id) if type(job_id) is str else None
            _check_lease(row, job_id, token)
            if row is None or row["state"] not in (READY, DELAYED, ACTIVE):
                raise CommandError(errors.JOB_NOT_FOUND)
            losses.discarded(Lost(row))
            await conn.execute(statements.LOSE, self.namespace, *losses.arrays())
        self.events.job_moved(JOB_DISCARDED, job_id)

    async def update_progress(
        self, job_id: str, progress: Any, message: Any, has_message: bool, now: float
    ) -> None:
        value, derived = normalize_progress(progress)

        def change(job: Job) -> None:
            if job.state != ACTIVE:
                raise CommandError(errors.not_active(states.state_name(job.state, job.priority, job.run_at, now)))
            if has_message:
                job.progress_message = message
            elif derived is not None:
                job.progress_message = derived
            job.progress = value

        # Progress is a sign of life, as a heartbeat is.
        job = await self._rewrite(job_id, change, int(now), errors.JOB_NOT_FOUND)
        self.counters.on_event(job.queue)
        self.publish(
            job.queue, eventhub.PROGRESS, job_id, progress=value,
            data={"progress": value, "message": job.progress_message},
        )

    # -- helpers ---------------------------------------------------------------------------------------

    async def _requeue_job(
        self, job_id: str, delay: float, from_states: list[int], token: Any,
        fresh: bool = False, delayed_only: bool = False,
    ) -> asyncpg.Record | None:
        """Run ``REQUEUE``; the job's queue and state after it, or None when it did not move."""
        row = await self.pool.fetchrow(
            REQUEUE, self.namespace, job_id, delay, from_states, token if type(token) is str else None,
            fresh, delayed_only,
        )
        if row is None:
            return None
        if row["state"] == READY:
            self.hot.wakeups.wake(row["queue"])
        return row

    async def _job_row(self, job_id: str) -> asyncpg.Record | None:
        return await self.pool.fetchrow(JOB_ROW, self.namespace, job_id)

    async def _rewrite(self, job_id: str, change: Any, heartbeat: int | None, missing: str) -> Job:
        """Apply ``change`` to the job's record (the row's columns laid over it) and write it back, unless
        another write changed the row since it was read; then read and apply again. The job as written."""
        for _ in range(RECORD_RETRIES):
            row = await self.pool.fetchrow(RECORD, self.namespace, job_id)
            if row is None:
                raise CommandError(missing)
            job = Job.from_record(unpack(row["record"]))
            job.state, job.priority, job.lifo, job.run_at = row["state"], row["priority"], row["lifo"], row["run_at"]
            change(job)
            written = await self.pool.execute(
                REWRITE, self.namespace, job_id, pack(job.to_record()), row["version"], heartbeat
            )
            if written != "UPDATE 0":
                return job
        raise CommandError(missing)

    async def _retry_failed(self, job_id: str, now: float) -> None:
        """A failed job goes back through its DLQ entry (the DLQ family's); refused without one."""
        entry = await self.dlq_entry(job_id)  # type: ignore[attr-defined]
        if entry is None or not await self.restart_dlq_entries([entry], now):  # type: ignore[attr-defined]
            raise CommandError(errors.FAILED_NOT_IN_DLQ)


def _state_name(row: asyncpg.Record) -> str:
    return states.state_name(row["state"], row["priority"], row["run_at"], row["now"])


def _check_lease(row: asyncpg.Record | None, job_id: str, token: Any) -> None:
    """A leased job moves only for the holder of its current token, as in memory."""
    if row is None or not row["leased"]:
        return
    if token is None:
        raise CommandError(errors.lock_token_required(job_id))
    if token != row["lease_token"]:
        raise CommandError(errors.invalid_lock_token(job_id))
