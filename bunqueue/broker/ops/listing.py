"""Read-only listings: GetJobs, GetCountsPerPriority and ListQueues.

They cost O(jobs of the queue) through the per-queue heaps and id sets of ``QueueState``; nothing here
walks the whole broker.
"""
from __future__ import annotations

import heapq
import math
from decimal import Decimal

from bunqueue._core.jobs import Job
from bunqueue.broker.components.queues import QueueState
from bunqueue.broker.wiring import Wiring
from bunqueue.options import js_slice_bounds


def select_jobs(broker: Wiring, queue: str, wanted: list[str] | None, now: float) -> list[Job]:
    """The queue's jobs in the wanted states (all of them for None), unordered.

    On a paused queue an explicit filter finds ready jobs only under "paused", as the reference does;
    without a filter every job is listed.
    """
    q = broker.queues.get(queue)
    if q is None:
        return []

    def want(state: str) -> bool:
        return wanted is None or state in wanted

    hide_ready = wanted is not None and q.paused
    need_waiting = want("waiting") and not hide_ready
    need_prioritized = want("prioritized") and not hide_ready
    need_delayed = want("delayed")
    need_paused = hide_ready and "paused" in wanted  # type: ignore[operator]
    jobs = broker.jobs
    out: list[Job] = []
    if need_waiting or need_prioritized or need_delayed or need_paused:
        for job in map(jobs.__getitem__, q.queued_ids()):
            if job.run_at > now:
                if need_delayed:
                    out.append(job)
            elif need_paused or (need_prioritized if job.priority > 0 else need_waiting):
                out.append(job)
    if want("active"):
        out.extend(map(jobs.__getitem__, q.active))
    if want("failed"):
        out.extend(entry["job"] for entry in broker.dlq.entries(queue))
    if want("completed"):
        out.extend(map(jobs.__getitem__, q.completed))
    if want("waiting-children"):
        out.extend(map(jobs.__getitem__, q.waiting_children))
    return out


def _created_order(job: Job) -> tuple[float, str]:
    return (job.created_at, job.id)


def jobs_page(
    broker: Wiring, queue: str, wanted: list[str] | None, now: float, offset: float, limit: float, asc: bool
) -> list[Job]:
    """GetJobs: a page of the queue's jobs in the wanted states."""
    return page(select_jobs(broker, queue, wanted, now), offset, limit, asc)


def page(jobs: list[Job], offset: float, limit: float, asc: bool) -> list[Job]:
    """Order by creation time then id (reversed for ``asc=False``), then ``slice(offset, offset+limit)``
    as the reference pages (so a negative bound counts from the end, as JS slice does)."""
    start, end = js_slice_bounds(offset, offset + limit, len(jobs))
    if end <= start:
        return []
    if end < len(jobs):
        pick = heapq.nsmallest if asc else heapq.nlargest
        return pick(end, jobs, key=_created_order)[start:]
    return sorted(jobs, key=_created_order, reverse=not asc)[start:end]


def counts_per_priority(broker: Wiring, queue: str) -> dict[str, int]:
    """Queued jobs (waiting, prioritized, delayed) per priority.

    Keyed and ordered as the reference's JS object is: integer keys ascending, then the others (negative
    or fractional priorities) in the order they first appear.
    """
    q = broker.queues.get(queue)
    if q is None:
        return {}
    counts: dict[float, int] = {}
    jobs = sorted(map(broker.jobs.__getitem__, q.queued_ids()), key=lambda job: job.seq)
    for job in jobs:
        counts[job.priority] = counts.get(job.priority, 0) + 1
    index_keys = sorted(p for p in counts if is_array_index(p))
    other_keys = [p for p in counts if not is_array_index(p)]
    return {js_number_key(p): counts[p] for p in index_keys + other_keys}


def is_array_index(value: float) -> bool:
    # Priorities are finite, so int() is safe once the range holds.
    return 0 <= value < 4294967295 and value == int(value)


def js_number_key(value: float) -> str:
    """A number as JS prints it (``String(n)``): the key a JS object gives it."""
    if math.isnan(value):
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    digits_tuple, exponent = Decimal(repr(abs(value))).as_tuple()[1:]
    digits = "".join(map(str, digits_tuple)).rstrip("0") or "0"
    # n: where the decimal point goes relative to the shortest digit string, as ECMAScript defines it.
    n = len("".join(map(str, digits_tuple))) + int(exponent)
    k = len(digits)
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + digits
    e = n - 1
    mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
    return f"{sign}{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"


def is_listed(broker: Wiring, name: str, q: QueueState) -> bool:
    """A queue is listed while it holds jobs in any state, DLQ entries, or non-default controls (its
    groups' controls and windows included)."""
    return bool(
        q.n_queued or q.n_active or q.n_completed or q.completed or q.n_waiting_children
        or broker.dlq.count(name) or q.settings() or q.groups.lane_count
    )


def list_queues(broker: Wiring) -> list[str]:
    return [name for name, q in broker.queues.items() if is_listed(broker, name, q)]

