"""WaitJob over PostgreSQL: a waiter learns that its job completed on whichever broker completed it.

The waiters of one broker share one poll: while any waits, one statement every ``WAIT_POLL_S`` reads the
state (and result) of every job waited on, and settles the waiters of the jobs that completed or are gone.
No poll runs, and no task exists, while nothing waits. As in memory, a job that is removed can never
complete, so its waiters get ``completed: false`` at once; a terminal failure settles nothing (a DLQ job
may still be retried and complete).
"""
from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

from bunqueue import errors
from bunqueue.broker import states
from bunqueue.errors import CommandError
from bunqueue.storage.postgres.outages import OutageLog
from bunqueue.storage.postgres.statements import requests_cte
from bunqueue.storage.schema import unpack

Reply = dict[str, Any]
# How soon a waiter hears of a completion: short, since a waiter is a client blocked on the answer.
WAIT_POLL_S = 0.05

# The jobs named by $2, each with whether it still exists, its state and its result (NULL for none).
OUTCOMES = f"""
WITH {requests_cte("$2::text[]", "id")}
SELECT w.id, j.id IS NOT NULL AS present, j.state, r.result
FROM req w
LEFT JOIN bunqueue_jobs j ON j.namespace = w.namespace AND j.id = w.id
LEFT JOIN bunqueue_results r ON r.namespace = $1 AND r.job_id = w.id
"""

NOT_COMPLETED: Reply = {"ok": True, "completed": False}


def _completed(result: bytes | None) -> Reply:
    reply: Reply = {"ok": True, "completed": True}
    if result is not None:
        reply["result"] = unpack(result)
    return reply


class JobWaits:
    """This broker's WaitJob waiters, per job id, and the poll that settles them."""

    def __init__(self, pool: asyncpg.Pool, namespace: str) -> None:
        self.pool = pool
        self.namespace = namespace
        self.waiters: dict[str, list[asyncio.Future[Reply]]] = {}
        self.poller: asyncio.Task[None] | None = None
        self.waits_outage = OutageLog("job waits")

    async def wait(self, job_id: Any, timeout_ms: float) -> Reply:
        """The reply at once when the job completed already; else when it completes, goes, or time is up."""
        if type(job_id) is not str:
            raise CommandError(errors.JOB_NOT_FOUND)
        (_id, present, state, result), = await self.pool.fetch(OUTCOMES, self.namespace, [job_id])
        if not present:
            raise CommandError(errors.JOB_NOT_FOUND)
        if state == states.COMPLETED:
            return _completed(result)
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Reply] = loop.create_future()
        self.waiters.setdefault(job_id, []).append(fut)
        if self.poller is None:
            self.poller = asyncio.create_task(self._poll(), name="bunqueue-job-waits")
        timer = loop.call_later(timeout_ms / 1000.0, _time_out, fut)
        try:
            return await fut
        finally:
            timer.cancel()
            # Timed out or cancelled (the connection closed): still registered, and must not be left behind.
            pending = self.waiters.get(job_id)
            if pending is not None and fut in pending:
                pending.remove(fut)
                if not pending:
                    del self.waiters[job_id]

    async def _poll(self) -> None:
        try:
            while self.waiters:
                await asyncio.sleep(WAIT_POLL_S)
                if not self.waiters:
                    break
                try:
                    rows = await self.pool.fetch(OUTCOMES, self.namespace, list(self.waiters))
                except Exception as exc:
                    self.waits_outage.failed(exc)
                    continue
                self.waits_outage.ran()
                for job_id, present, state, result in rows:
                    if not present:
                        self._settle(job_id, NOT_COMPLETED)
                    elif state == states.COMPLETED:
                        self._settle(job_id, _completed(result))
        finally:
            self.poller = None

    def _settle(self, job_id: str, reply: Reply) -> None:
        for fut in self.waiters.pop(job_id, ()):
            if not fut.done():
                fut.set_result(dict(reply))


def _time_out(fut: asyncio.Future[Reply]) -> None:
    if not fut.done():
        fut.set_result(dict(NOT_COMPLETED))
