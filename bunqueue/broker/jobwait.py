"""WaitJob: wait, without polling, for a job to complete.

The job records keep the waiting futures per job id (``JobRecords.waiters``) and settles them where the job
changes: True when it completes, False when its record is removed (cancel, drain, clean, obliterate,
removeOnFail, DLQ removal...), since a removed job can never complete. A terminal failure settles
nothing: a DLQ job may still be retried and complete, as the reference's waiters keep waiting too.
"""
from __future__ import annotations

import asyncio
from typing import Any

from bunqueue import errors
from bunqueue.broker import states
from bunqueue.broker.components.records import JobRecords
from bunqueue.errors import CommandError


def _completed_reply(records: JobRecords, job_id: str) -> dict[str, Any]:
    reply: dict[str, Any] = {"ok": True, "completed": True}
    stored, result = records.find_result(job_id)
    if stored:
        reply["result"] = result
    return reply


def wait_for_job(records: JobRecords, job_id: Any, timeout_ms: float) -> dict[str, Any] | Any:
    """The WaitJob reply now when the outcome is known, else an awaitable of it."""
    job = records.find_job(job_id)
    if job is None:
        raise CommandError(errors.JOB_NOT_FOUND)
    if job.state == states.COMPLETED:
        return _completed_reply(records, job.id)
    return _wait(records, job.id, timeout_ms)


async def _wait(records: JobRecords, job_id: str, timeout_ms: float) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[bool] = loop.create_future()
    futures = records.waiters.setdefault(job_id, [])
    futures.append(fut)
    timer = loop.call_later(timeout_ms / 1000.0, _time_out, fut)
    try:
        completed = await fut
    finally:
        timer.cancel()
        # Timed out or cancelled (the connection closed): still registered, and must not be left behind.
        pending = records.waiters.get(job_id)
        if pending is not None and fut in pending:
            pending.remove(fut)
            if not pending:
                del records.waiters[job_id]
    if completed:
        return _completed_reply(records, job_id)
    return {"ok": True, "completed": False}


def _time_out(fut: asyncio.Future[bool]) -> None:
    if not fut.done():
        fut.set_result(False)
