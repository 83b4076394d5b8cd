"""Job-level ``repeat``: the rules a repeating job must meet, and its successor after each ACK.

The compiled push path checks the option's shape (exactly one of ``every`` or ``pattern``, finite
numbers); here the pattern and time zone are checked and the relations a repeating job cannot have are
refused. After every successful ACK of a repeating job whose ``count`` is below its ``limit``, a
successor with ``count + 1`` is pushed for the next run; the old id is remembered (the newest 10,000) so
that an ``Update`` of it reaches the successor.
"""
from __future__ import annotations

import logging
import math
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from bunqueue import errors
from bunqueue._core.jobs import Job
from bunqueue.broker.components.recurrence import Schedule, shared
from bunqueue.errors import CommandError

log = logging.getLogger("bunqueue.repeat")

CHAIN_CAP = 10_000
# Carried by successors; startDate and endDate are checked by the push path with the other numbers.
TIMESTAMP_FIELDS = ("prevMillis", "offset")


def check(job: Job, raw: dict[str, Any], now: float) -> None:
    """Complete and check ``job.repeat`` (already shaped by the push path) against the raw option."""
    repeat = job.repeat
    for field in TIMESTAMP_FIELDS:
        value = raw.get(field)
        if value is None:
            continue
        if type(value) not in (int, float) or not math.isfinite(value):
            raise CommandError(errors.repeat_timestamp(field))
        repeat[field] = value
    repeat.setdefault("count", 0)
    if type(raw.get("jobId")) is str:
        repeat["jobId"] = raw["jobId"]
    pattern = repeat.get("pattern")
    if pattern is not None:
        try:
            Schedule(pattern, repeat.get("tz")).check_future(now)
        except CommandError as exc:
            reason = exc.message.removeprefix(errors.invalid_cron(""))
            raise CommandError(errors.invalid_repeat_pattern(reason)) from None
    if job.custom_id is not None:
        raise CommandError(errors.REPEAT_WITH_JOB_ID)
    if job.parent_id or job.depends_on or job.children_ids:
        raise CommandError(errors.REPEAT_WITH_RELATIONS)


def next_run(repeat: dict[str, Any], now: float) -> float | None:
    """The successor's run time, or None once the window (endDate, no occurrence left) is over."""
    start = repeat.get("startDate")
    end = repeat.get("endDate")
    offset = repeat.get("offset") or 0
    previous = repeat.get("prevMillis")
    pattern = repeat.get("pattern")
    if pattern is not None:
        schedule = shared(pattern, repeat.get("tz"))
        since = max(now - offset, -math.inf if start is None else start - offset - 1,
                    -math.inf if previous is None else previous - offset)
        base = schedule.next_after(since)
        following = None if base is None else base + offset
        if base is not None and following is not None and following <= now:
            base = schedule.next_after(base)
            following = None if base is None else base + offset
    else:
        every = repeat["every"]
        earliest = max(now + 1, -math.inf if start is None else start)
        if previous is not None:
            following = previous + every
        elif start is not None and start > now:
            following = start + offset
        else:
            following = now + every + offset
        if following < earliest:
            following += math.ceil((earliest - following) / every) * every
    if following is None or not math.isfinite(following) or following <= 0:
        return None
    if (start is not None and following < start) or (end is not None and following > end):
        return None
    return following


class RepeatChain:
    """Old repeating job id -> the id of its successor (the newest ``CHAIN_CAP`` links)."""

    def __init__(self, push: Callable[[str, dict[str, Any]], str]) -> None:
        # PUSH's own path (all its checks) for the successor.
        self.push = push
        self.links: OrderedDict[str, str] = OrderedDict()

    def completed(self, job: Job, now: float) -> None:
        """A repeating job was ACKed: push its successor, if its limit and window allow one."""
        repeat = job.repeat
        limit = repeat.get("limit")
        count = repeat.get("count", 0)
        if limit is not None and count >= limit:
            return
        following = next_run(repeat, now)
        if following is None:
            return
        try:
            successor = self.push(job.queue, successor_options(job, following, now))
        except CommandError as exc:
            log.warning("the successor of repeating job %s could not be pushed: %s", job.id, exc.message)
            return
        links = self.links
        links[job.id] = successor
        if len(links) > CHAIN_CAP:
            links.popitem(last=False)

    def successor(self, job_id: str) -> str | None:
        return self.links.get(job_id)


def successor_options(job: Job, following: float, now: float) -> dict[str, Any]:
    """PUSH options of the next generation: the job's own options, count + 1, run at ``following``."""
    repeat = {key: value for key, value in job.repeat.items() if key != "count"}
    repeat["count"] = job.repeat.get("count", 0) + 1
    repeat["prevMillis"] = following
    opts: dict[str, Any] = {
        "name": job.name,
        "data": job.data,
        "priority": job.priority,
        "delay": max(0.0, following - now),
        "timestamp": now,
        "maxAttempts": job.max_attempts,
        "backoff": job.backoff_config if job.backoff_config is not None else job.backoff,
        "lifo": job.lifo,
        "removeOnComplete": job.remove_on_complete,
        "removeOnFail": job.remove_on_fail,
        "durable": job.durable,
        "stackTraceLimit": job.stack_trace_limit,
        "failParentOnFailure": job.fail_parent_on_failure,
        "removeDependencyOnFailure": job.remove_dependency_on_failure,
        "continueParentOnFailure": job.continue_parent_on_failure,
        "ignoreDependencyOnFailure": job.ignore_dependency_on_failure,
        "repeat": repeat,
    }
    optional = {
        "ttl": job.ttl,
        "timeout": job.timeout,
        "uniqueKey": job.unique_key,
        "groupId": job.group_id,
        "stallTimeout": job.stall_timeout,
        "keepLogs": job.keep_logs,
        "sizeLimit": job.size_limit,
        "debounceId": job.debounce_id,
        "debounceTtl": job.debounce_ttl,
    }
    opts.update((key, value) for key, value in optional.items() if value is not None)
    if job.tags:
        opts["tags"] = list(job.tags)
    if job.unique_key is not None:
        dedup: dict[str, Any] = {"extend": job.deduplication_extend, "replace": job.deduplication_replace}
        if job.deduplication_ttl is not None:
            dedup["ttl"] = job.deduplication_ttl
        opts["dedup"] = dedup
    return opts
