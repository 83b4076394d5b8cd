"""Job logs: AddLog, GetLogs, ClearLogs.

Memory only, as in the reference: at most 100 entries per job (the oldest give way) and logs for at most
10,000 jobs (the least recently written give way). A job's logs go with its record (``JobRecords.logs`` is
cleared in ``JobRecords.drop_from_memory``).
"""
from __future__ import annotations

from typing import Any

from bunqueue.broker.wiring import Wiring
from bunqueue.options import js_slice_bounds

MAX_ENTRIES_PER_JOB = 100
MAX_JOBS_WITH_LOGS = 10_000


def add_log(broker: Wiring, job_id: str, message: str, level: str, now: float) -> bool:
    """Append an entry; False when no such job exists."""
    if job_id not in broker.jobs:
        return False
    logs = broker.records.logs
    entries = logs.get(job_id)
    if entries is None:
        entries = logs[job_id] = []
        if len(logs) > MAX_JOBS_WITH_LOGS:
            logs.popitem(last=False)
    else:
        logs.move_to_end(job_id)
    entries.append({"timestamp": now, "level": level, "message": message})
    if len(entries) > MAX_ENTRIES_PER_JOB:
        del entries[0]
    return True


def get_logs(broker: Wiring, job_id: str) -> list[dict[str, Any]]:
    return broker.records.logs.get(job_id, [])


def clear_logs(broker: Wiring, job_id: str, keep: int) -> None:
    """Keep the ``keep`` most recent entries (0 clears them all)."""
    if keep <= 0:
        broker.records.logs.pop(job_id, None)
        return
    entries = broker.records.logs.get(job_id)
    if entries is not None and len(entries) > keep:
        del entries[:-keep]


def get_logs_page(
    broker: Wiring, job_id: str, start: float | None, end: float | None
) -> tuple[list[dict[str, Any]], int]:
    """GetLogs: the entries from ``start`` to ``end`` and how many the job has."""
    entries = get_logs(broker, job_id)
    return page(entries, start, end), len(entries)


def page(entries: list[dict[str, Any]], start: float | None, end: float | None) -> list[dict[str, Any]]:
    """Entries ``start`` through ``end`` inclusive, with JS ``slice`` rules (negative counts from the end)."""
    if start is None and end is None:
        return list(entries)
    total = len(entries)
    first, stop = js_slice_bounds(0.0 if start is None else start, (total - 1 if end is None else end) + 1, total)
    return entries[first:stop]
