"""The namespace's job counts, per queue and state, read in one statement: what monitoring shows.

Every monitoring answer (Stats, the dashboards, Prometheus, the stream snapshots, the probes' totals) starts
from one ``Figures`` reading: one GROUP BY over the jobs, the DLQ sizes, the paused flags and the sizes of
the result and log tables, in a single round trip. Readers share readings (``FigureReader``): a burst of
probes costs one statement.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import asyncpg

from bunqueue.broker import states
from bunqueue.monitoring.snapshot import Totals

_DLQ, _PAUSED, _RESULTS, _LOGS = -1, -2, -3, -4

READ = f"""
SELECT queue, state, priority > 0 AS flag, count(*) AS n FROM bunqueue_jobs WHERE namespace = $1 GROUP BY 1, 2, 3
UNION ALL SELECT queue, {_DLQ}, false, count(*) FROM bunqueue_dlq WHERE namespace = $1 GROUP BY 1
UNION ALL SELECT queue, {_PAUSED}, paused, 0 FROM bunqueue_queues WHERE namespace = $1
UNION ALL SELECT NULL, {_RESULTS}, false, count(*) FROM bunqueue_results WHERE namespace = $1
UNION ALL SELECT NULL, {_LOGS}, false, count(*) FROM bunqueue_job_logs WHERE namespace = $1
"""


@dataclass
class QueueFigures:
    waiting: int = 0
    prioritized: int = 0
    delayed: int = 0
    active: int = 0
    completed: int = 0
    failed: int = 0
    waiting_children: int = 0
    dlq: int = 0
    paused: bool = False

    @property
    def ready(self) -> int:
        return self.waiting + self.prioritized

    def job_counts(self, split_paused: bool = True) -> dict[str, int]:
        """GetJobCounts' counts, as ``broker.ops.queries.job_counts`` gives them."""
        paused = self.paused and split_paused
        return {
            "waiting": 0 if paused else self.waiting,
            "prioritized": 0 if paused else self.prioritized,
            "delayed": self.delayed,
            "active": self.active,
            "completed": self.completed,
            "failed": self.dlq,
            "waiting-children": self.waiting_children,
            "paused": self.ready if paused else 0,
        }


@dataclass
class Figures:
    queues: dict[str, QueueFigures] = field(default_factory=dict)
    results: int = 0
    logs: int = 0

    def totals(self) -> Totals:
        out = Totals()
        for q in self.queues.values():
            out.waiting += q.waiting
            out.prioritized += q.prioritized
            out.delayed += q.delayed
            out.active += q.active
            out.completed += q.completed
            out.waiting_children += q.waiting_children
            out.dlq += q.dlq
        return out

    @property
    def jobs(self) -> int:
        return sum(q.ready + q.delayed + q.active + q.completed + q.failed + q.waiting_children
                   for q in self.queues.values())


async def read_figures(pool: asyncpg.Pool, namespace: str) -> Figures:
    out = Figures()
    for queue, state, flag, n in await pool.fetch(READ, namespace):
        if state == _RESULTS:
            out.results = n
            continue
        if state == _LOGS:
            out.logs = n
            continue
        q = out.queues.get(queue)
        if q is None:
            q = out.queues[queue] = QueueFigures()
        if state == states.READY:
            if flag:
                q.prioritized += n
            else:
                q.waiting += n
        elif state == states.DELAYED:
            q.delayed += n
        elif state == states.ACTIVE:
            q.active += n
        elif state == states.COMPLETED:
            q.completed += n
        elif state == states.FAILED:
            q.failed += n
        elif state == states.WAITING_CHILDREN:
            q.waiting_children += n
        elif state == _DLQ:
            q.dlq += n
        elif state == _PAUSED:
            q.paused = flag
    return out


class FigureReader:
    """The namespace's figures, one statement at a time however many ask: a reader that asks while a
    reading runs shares it, and one that asks within as long as the last reading took after it ended gets
    that reading, so that monitoring never keeps the database reading counts more than half the time (a
    stream's ``queue:counts`` may ask every 10 ms under load). ``totals`` keeps the last reading's totals
    for the readers that cannot wait (the HTTP probes read them right after a command that read the
    figures)."""

    def __init__(self, pool: asyncpg.Pool, namespace: str) -> None:
        self.pool = pool
        self.namespace = namespace
        self.totals = Totals()
        self._reading: asyncio.Future[Figures] | None = None
        self._last: Figures | None = None
        self._started = 0.0
        # Loop time until which the last reading is given again.
        self._reused_until = 0.0

    async def read(self) -> Figures:
        if self._reading is None:
            now = asyncio.get_running_loop().time()
            if self._last is not None and now < self._reused_until:
                return self._last
            self._started = now
            self._reading = asyncio.ensure_future(read_figures(self.pool, self.namespace))
            self._reading.add_done_callback(self._done)
        return await asyncio.shield(self._reading)

    def _done(self, reading: asyncio.Future[Figures]) -> None:
        self._reading = None
        if not reading.cancelled() and reading.exception() is None:
            now = asyncio.get_running_loop().time()
            self._last = reading.result()
            self._reused_until = now + (now - self._started)
            self.totals = self._last.totals()
