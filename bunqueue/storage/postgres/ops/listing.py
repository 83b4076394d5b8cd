"""Listings of the PostgreSQL engine: GetJobs, GetCountsPerPriority and ListQueues, as the memory engine
lists them (``bunqueue.broker.ops.listing``), each one statement over the queue's range of
``bunqueue_jobs_queue_order``.

GetJobs pages in SQL: ordered by creation time then id (ids compared byte-wise, as Python compares them),
offset and limit as JS ``slice`` takes them. Its handler asks ``find_result`` for every job of the page,
so the page's results are read with the page and kept for those asks (``page_results``).
"""
from __future__ import annotations

from typing import Any

from bunqueue._core.jobs import Job
from bunqueue.broker import states
from bunqueue.broker.ops.listing import is_array_index, js_number_key
from bunqueue.options import js_slice_bounds
from bunqueue.storage.postgres.jobrows import stored_columns, stored_job
from bunqueue.storage.postgres.ops.family import Family
from bunqueue.storage.schema import unpack

# Past any real offset or page size: a bound beyond it is as good as none.
_MAX_BOUND = 2**62

# The jobs of queue $2 a GetJobs filter selects. $3 is the caller's clock; $4 the states to read; $5..$9
# what a queued job must be to be wanted: delayed, waiting, prioritized, paused (when the queue is paused
# and the filter asks for "paused" by name, ready jobs are listed under it only), and whether a filter was
# given at all (without one, every job is listed, paused or not).
_SELECTED = f"""
FROM bunqueue_jobs j
LEFT JOIN bunqueue_queues q ON q.namespace = $1 AND q.queue = $2
WHERE j.namespace = $1 AND j.queue = $2 AND j.state = ANY($4::smallint[])
  AND (j.state NOT IN ({states.READY}, {states.DELAYED})
       OR (CASE WHEN j.run_at > $3::float8 THEN $5::bool
                WHEN $9::bool AND coalesce(q.paused, false) THEN $8::bool
                WHEN j.priority > 0 THEN $7::bool
                ELSE $6::bool END))
"""
_ORDER = {True: 'created_at, id COLLATE "C"', False: 'created_at DESC, id COLLATE "C" DESC'}
_COLUMNS = stored_columns("j")
# A page ($10 offset, $11 limit), its jobs' results read with it.
PAGE = {
    asc: f"""
SELECT page.*, r.result FROM (
    SELECT {_COLUMNS}, j.id, j.created_at {_SELECTED}
    ORDER BY {order} OFFSET $10 LIMIT $11
) page
LEFT JOIN bunqueue_results r ON r.namespace = $1 AND r.job_id = page.id
ORDER BY {order}
"""
    for asc, order in _ORDER.items()
}
COUNT_SELECTED = f"SELECT count(*) {_SELECTED}"

# Queued jobs per priority, each priority with its first job's seq (the order a JS object keeps for keys
# that are not array indexes).
PER_PRIORITY = f"""
SELECT priority, count(*), min(seq) FROM bunqueue_jobs
WHERE namespace = $1 AND queue = $2 AND state IN ({states.READY}, {states.DELAYED})
GROUP BY priority
"""

# Queues with jobs, DLQ entries or non-default controls, first created first (a queue known by its jobs
# by its first job's seq; the rest after them).
LIST_QUEUES = """
SELECT queue FROM (
    SELECT queue, min(seq) AS first FROM bunqueue_jobs WHERE namespace = $1 GROUP BY queue
    UNION ALL SELECT queue, NULL FROM bunqueue_dlq WHERE namespace = $1
    UNION ALL SELECT queue, NULL FROM bunqueue_queues
        WHERE namespace = $1 AND (paused OR concurrency IS NOT NULL OR rate_max IS NOT NULL OR settings IS NOT NULL)
    UNION ALL SELECT queue, NULL FROM bunqueue_groups WHERE namespace = $1
) known
GROUP BY queue ORDER BY min(first) NULLS LAST, queue COLLATE "C"
"""

_STATE_CODES = {
    "active": states.ACTIVE, "completed": states.COMPLETED, "failed": states.FAILED,
    "waiting-children": states.WAITING_CHILDREN,
}
_QUEUED_NAMES = ("waiting", "prioritized", "delayed", "paused")
_EVERY_STATE = [states.READY, states.DELAYED, states.ACTIVE, states.COMPLETED, states.FAILED,
                states.WAITING_CHILDREN]


def _filter_args(wanted: list[str] | None) -> list[Any]:
    """$4..$9 of ``_SELECTED`` for a GetJobs state filter (None: every job)."""
    if wanted is None:
        return [_EVERY_STATE, True, True, True, True, False]
    codes = [_STATE_CODES[name] for name in _STATE_CODES if name in wanted]
    if any(name in wanted for name in _QUEUED_NAMES):
        codes += [states.READY, states.DELAYED]
    return [codes, "delayed" in wanted, "waiting" in wanted, "prioritized" in wanted, "paused" in wanted, True]


class ListingFamily(Family):
    # The results read with the last GetJobs page, each taken by the ``find_result`` that asks for it.
    page_results: dict[str, tuple[bool, Any]] | None = None

    async def jobs_page(
        self, queue: str, wanted: list[str] | None, now: float, offset: float, limit: float, asc: bool
    ) -> list[Job]:
        """GetJobs: as ``bunqueue.broker.ops.listing.page`` pages (a negative bound counts from the end)."""
        args = [self.namespace, queue, now, *_filter_args(wanted)]
        if offset < 0 or offset + limit < 0:
            total = await self.pool.fetchval(COUNT_SELECTED, *args)
            start, end = js_slice_bounds(offset, offset + limit, total)
        else:
            start, end = (int(min(bound, _MAX_BOUND)) for bound in (offset, offset + limit))
        if end <= start:
            return []
        rows = await self.pool.fetch(PAGE[asc], *args, start, end - start)
        results = self.page_results = {}
        jobs = []
        for row in rows:
            job = stored_job(row)
            jobs.append(job)
            result = row[-1]
            results[job.id] = (True, unpack(result)) if result is not None else (False, None)
        return jobs

    async def counts_per_priority(self, queue: str) -> dict[str, int]:
        """Queued jobs per priority, keyed and ordered as the memory engine's (and the reference's JS
        object): integer keys ascending, then the others in the order their first job came."""
        rows = await self.pool.fetch(PER_PRIORITY, self.namespace, queue)
        index_keys = sorted((row for row in rows if is_array_index(row[0])), key=lambda row: row[0])
        other_keys = sorted((row for row in rows if not is_array_index(row[0])), key=lambda row: row[2])
        return {js_number_key(priority): count for priority, count, _first in index_keys + other_keys}

    async def list_queues(self) -> list[str]:
        return [row[0] for row in await self.pool.fetch(LIST_QUEUES, self.namespace)]
