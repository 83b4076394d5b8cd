"""Queries of the PostgreSQL engine: GetJob, GetJobByCustomId, GetState, GetResult, GetJobCounts, Count,
GetProgress and WaitJob, each one statement; and the promotion of delayed jobs that came due.

A job is read from its row as the memory engine would show it (``jobrows.stored_job``). A delayed job
whose run time passed reads as waiting at once (the handlers derive the state from ``run_at``); the
timer ``promote_delayed`` makes it claimable on every broker within ``DUE_SWEEP_S``.
"""
from __future__ import annotations

from typing import Any

from bunqueue import errors
from bunqueue._core.jobs import Job
from bunqueue.broker import states
from bunqueue.broker.ops.queries import NO_COUNTS
from bunqueue.errors import CommandError
from bunqueue.storage.postgres.jobrows import stored_columns, stored_job
from bunqueue.storage.postgres.ops.family import Family
from bunqueue.storage.postgres.ops.jobwaits import JobWaits
from bunqueue.storage.schema import unpack

_QUEUED = f"{states.READY}, {states.DELAYED}"

FIND_JOB = f"SELECT {stored_columns('j')} FROM bunqueue_jobs j WHERE namespace = $1 AND id = $2"
# A job pushed with a customId has it as its id.
FIND_CUSTOM = (
    f"SELECT {stored_columns('j')} FROM bunqueue_jobs j WHERE namespace = $1 AND id = $2 AND custom_id IS NOT NULL"
)
FIND_RESULT = "SELECT result FROM bunqueue_results WHERE namespace = $1 AND job_id = $2"

# A queue's jobs by state, a queued one as due or not ($3, the caller's clock) and prioritized or not,
# and whether the queue is paused (the row with state NULL).
JOB_COUNTS = f"""
SELECT state, state IN ({_QUEUED}) AND run_at <= $3::float8 AS due, priority > 0 AS prioritized, count(*)
FROM bunqueue_jobs WHERE namespace = $1 AND queue = $2
GROUP BY 1, 2, 3
UNION ALL
SELECT NULL, paused, false, 0 FROM bunqueue_queues WHERE namespace = $1 AND queue = $2
"""
COUNT_QUEUED = f"SELECT count(*) FROM bunqueue_jobs WHERE namespace = $1 AND queue = $2 AND state IN ({_QUEUED})"

_FIXED_COUNTS = {
    states.ACTIVE: "active", states.COMPLETED: "completed", states.FAILED: "failed",
    states.WAITING_CHILDREN: "waiting-children",
}


class QueueHandle:
    """What ``queue`` hands out: the name, which is all ``promote_due`` needs (no round trip to make one)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


class QueriesFamily(Family):
    # Made on the first WaitJob: the waiters and their poll (see ``jobwaits``).
    job_waits: JobWaits | None = None
    # The results GetJobs read with its page (``ListingFamily.jobs_page``), each taken once.
    page_results: dict[str, tuple[bool, Any]] | None = None

    async def find_job(self, job_id: Any) -> Job | None:
        if type(job_id) is not str:
            return None
        row = await self.pool.fetchrow(FIND_JOB, self.namespace, job_id)
        return stored_job(row) if row is not None else None

    async def find_result(self, job_id: Any) -> tuple[bool, Any]:
        if type(job_id) is not str:
            return False, None
        if self.page_results:
            read = self.page_results.pop(job_id, None)
            if read is not None:
                return read
        packed = await self.pool.fetchval(FIND_RESULT, self.namespace, job_id)
        return (True, unpack(packed)) if packed is not None else (False, None)

    def queue(self, name: str) -> QueueHandle:
        return QueueHandle(name)

    async def promote_due(self, q: QueueHandle, now: float) -> None:
        """A due delayed job was read: every due one becomes claimable now rather than at the next sweep."""
        await self.promote_delayed()

    async def promote_delayed(self) -> None:
        """Every due delayed job of the namespace to ready; this broker's pullers of those queues wake."""
        await self.hot.promote_due()

    async def job_counts(self, queue: str, split_paused: bool = True) -> dict[str, int]:
        """As in memory: a due delayed job counts as ready, and a paused queue's ready jobs as paused
        (unless ``split_paused`` is off); ``failed`` counts the jobs in the DLQ (failed terminally)."""
        counts = dict(NO_COUNTS)
        paused = False
        ready = 0
        for state, due, prioritized, count in await self.pool.fetch(JOB_COUNTS, self.namespace, queue, self.clock()):
            if state is None:
                paused = due and split_paused
            elif state == states.READY or state == states.DELAYED:
                if due:
                    counts["prioritized" if prioritized else "waiting"] += count
                    ready += count
                else:
                    counts["delayed"] += count
            else:
                counts[_FIXED_COUNTS[state]] += count
        if paused:
            counts["waiting"] = counts["prioritized"] = 0
            counts["paused"] = ready
        return counts

    async def count_queued(self, queue: str) -> int:
        count: int = await self.pool.fetchval(COUNT_QUEUED, self.namespace, queue)
        return count

    async def job_by_custom_id(self, custom_id: Any) -> Job | None:
        if type(custom_id) is not str:
            return None
        row = await self.pool.fetchrow(FIND_CUSTOM, self.namespace, custom_id)
        return stored_job(row) if row is not None else None

    async def running_job(self, job_id: str, now: float) -> Job:
        """The active job for Progress / GetProgress, else the memory engine's error naming its state."""
        job = await self.find_job(job_id)
        if job is None:
            raise CommandError(errors.JOB_NOT_FOUND)
        if job.state != states.ACTIVE:
            raise CommandError(errors.not_active(states.state_name(job.state, job.priority, job.run_at, now)))
        return job

    def wait_job(self, job_id: Any, timeout_ms: float) -> Any:
        """WaitJob: an awaitable of the reply, settled by whichever broker completes the job."""
        waits = self.job_waits
        if waits is None:
            waits = self.job_waits = JobWaits(self.pool, self.namespace)
        return waits.wait(job_id, timeout_ms)
