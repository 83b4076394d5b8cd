"""The dead-letter queue: terminally failed jobs with their failure history, per queue, oldest first.

Every entry has one maintenance time: when it expires (``maxAge``) or, with auto-retry on, when its next
automatic retry is due, whichever comes first. One timer heap over all entries yields the earliest, so a
single loop timer (armed through the broker's ``Alarms``) serves the whole DLQ: nothing scans it periodically.

Policies are per queue (``QueueState.dlq_config``, so they persist with the queue's other controls) and,
as in the reference, apply to an entry when it is filed: changing ``maxAge`` or ``autoRetryInterval``
later leaves existing entries' times alone, while ``autoRetry`` and ``maxAutoRetries`` are read when a
retry comes due.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from bunqueue._core.jobs import Job, wire_number
from bunqueue._core.timers import TimerHeap
from bunqueue.broker.components.queues import QueueState
from bunqueue.broker.timers.deadlines import DLQ, Alarms
from bunqueue.options import js_slice_bounds

Entry = dict[str, Any]

DEFAULT_CONFIG: dict[str, Any] = {
    "autoRetry": False,
    "autoRetryInterval": 3_600_000,
    "maxAutoRetries": 3,
    "maxAge": 604_800_000,
    "maxEntries": 10_000,
}
REASONS = (
    "explicit_fail", "max_attempts_exceeded", "timeout", "stalled", "ttl_expired", "worker_lost", "unknown",
)
# An automatic retry that cannot run now (its unique key is held by another live job) is tried again
# after this long, as often as the reference's DLQ maintenance runs.
BLOCKED_RETRY_DELAY = 60_000.0
# The fields of an entry that an automatic retry carries over to the job's next DLQ entry.
GENERATION_KEYS = ("enteredAt", "retryCount", "lastRetryAt", "nextRetryAt", "expiresAt")


class DeadLetters:
    def __init__(self, queues: Mapping[str, QueueState] | None = None, alarms: Alarms | None = None) -> None:
        self.by_queue: dict[str, OrderedDict[str, Entry]] = {}
        # Where each policy lives: the broker's queues.
        self.queues: Mapping[str, QueueState] = queues if queues is not None else {}
        # Job id -> the entry's next maintenance time.
        self.due = TimerHeap()
        self.queue_of: dict[str, str] = {}
        # Jobs an automatic retry put back in their queue: the DLQ generation they return to if they fail
        # again (first entry time, expiry, retry count), so maxAutoRetries and maxAge bound the chain.
        self.generations: dict[str, dict[str, Any]] = {}
        # Told of every maintenance time scheduled; the server arms its timer for the earliest.
        self.alarms = alarms if alarms is not None else Alarms()

    # -- policy ------------------------------------------------------------------------------------

    def config(self, queue: str) -> dict[str, Any]:
        q = self.queues.get(queue)
        if q is None or q.dlq_config is None:
            return DEFAULT_CONFIG
        return q.dlq_config

    def reschedule_queue(self, queue: str) -> None:
        """Recompute every entry's maintenance time after the queue's policy changed."""
        config = self.config(queue)
        for entry in self.entries(queue):
            self.schedule(entry, config)

    def overflow(self, queue: str) -> list[str]:
        """Ids of the oldest entries beyond the queue's maxEntries, removed from the DLQ."""
        entries = self.by_queue.get(queue)
        limit = self.config(queue)["maxEntries"]
        evicted: list[str] = []
        while entries and len(entries) > limit:
            evicted.append(self._pop_oldest(entries))
        return evicted

    # -- entries -----------------------------------------------------------------------------------

    def add(
        self, job: Job, reason: str, error: Any, attempts: list[dict[str, Any]], now: float
    ) -> tuple[Entry, list[str]]:
        """File a job: the new entry, and the ids of the oldest entries it pushed out (maxEntries)."""
        queue = job.queue
        config = self.config(queue)
        entries = self.by_queue.get(queue)
        if entries is None:
            entries = self.by_queue[queue] = OrderedDict()
        evicted: list[str] = []
        while len(entries) >= config["maxEntries"]:
            evicted.append(self._pop_oldest(entries))
        generation = self.generations.pop(job.id, None)
        entry = entries[job.id] = filed_entry(
            job, reason, error, attempts, generation if generation is not None else first_generation(config, now)
        )
        self.queue_of[job.id] = queue
        self.schedule(entry, config)
        return entry, evicted

    def restore(self, queue: str, entry: Entry) -> None:
        """An entry read back from storage (oldest first)."""
        entries = self.by_queue.get(queue)
        if entries is None:
            entries = self.by_queue[queue] = OrderedDict()
        job_id = entry["job"].id
        entries[job_id] = entry
        self.queue_of[job_id] = queue
        self.schedule(entry, self.config(queue))

    def remove(self, queue: str, job_id: str) -> Entry | None:
        entries = self.by_queue.get(queue)
        if entries is None:
            return None
        entry = entries.pop(job_id, None)
        if entry is not None:
            self._forget(job_id)
            if not entries:
                del self.by_queue[queue]
        return entry

    def clear(self, queue: str) -> list[Entry]:
        """Every entry of the queue, removed."""
        entries = self.by_queue.pop(queue, None)
        if not entries:
            return []
        for job_id in entries:
            self._forget(job_id)
        return list(entries.values())

    def get(self, job_id: str) -> Entry | None:
        queue = self.queue_of.get(job_id)
        return None if queue is None else self.by_queue[queue].get(job_id)

    def entries(self, queue: str) -> list[Entry]:
        entries = self.by_queue.get(queue)
        return list(entries.values()) if entries else []

    def count(self, queue: str) -> int:
        entries = self.by_queue.get(queue)
        return len(entries) if entries else 0

    def _pop_oldest(self, entries: OrderedDict[str, Entry]) -> str:
        job_id, _ = entries.popitem(last=False)
        self._forget(job_id)
        return job_id

    def _forget(self, job_id: str) -> None:
        self.due.remove(job_id)
        del self.queue_of[job_id]

    # -- maintenance -------------------------------------------------------------------------------

    def schedule(self, entry: Entry, config: dict[str, Any]) -> None:
        """Arm the entry's next maintenance time: its expiry or its next automatic retry."""
        when = maintenance_time(entry, config)
        job_id = entry["job"].id
        if when is None:
            self.due.remove(job_id)
            return
        self.due.push(job_id, when)
        self.alarms.arm(DLQ, when)

    def postpone(self, entry: Entry, when: float) -> None:
        self.due.push(entry["job"].id, when)
        self.alarms.arm(DLQ, when)

    def pop_due(self, now: float) -> list[Entry]:
        """Entries whose maintenance time has come (each is rescheduled or removed by the caller)."""
        out = []
        for job_id in self.due.pop_due(now):
            entry = self.get(job_id)
            if entry is not None:
                out.append(entry)
        return out

    def next_due(self) -> float | None:
        return self.due.peek_time()

    def keep_generation(self, entry: Entry, now: float) -> None:
        """Before an automatic retry: the job's next entry continues this one, one retry further on."""
        self.generations[entry["job"].id] = next_generation(entry, self.config(entry["job"].queue), now)

    # -- views -------------------------------------------------------------------------------------

    def select(self, queue: str, spec: dict[str, Any], now: float) -> list[Entry]:
        """Entries matching a Dlq filter, oldest first."""
        return select_entries(self.entries(queue), self.config(queue), spec, now)

    def stats(self, queue: str, now: float) -> dict[str, Any]:
        return entry_stats(queue, self.entries(queue), self.config(queue), now)


def maintenance_time(entry: Entry, config: dict[str, Any]) -> float | None:
    """When an entry next needs the DLQ's maintenance: its expiry or its next automatic retry, if any."""
    when: float | None = entry["expiresAt"]
    retry_at = entry["nextRetryAt"]
    retrying = retry_at is not None and config["autoRetry"] and entry["retryCount"] < config["maxAutoRetries"]
    if retrying and (when is None or retry_at < when):
        when = retry_at
    return when


def next_generation(entry: Entry, config: dict[str, Any], now: float) -> dict[str, Any]:
    """The lifetime fields of the entry a job automatically retried from ``entry`` files if it fails again."""
    count = entry["retryCount"] + 1
    return {
        "enteredAt": entry["enteredAt"],
        "retryCount": count,
        "lastRetryAt": now,
        # Each automatic retry waits twice as long as the one before.
        "nextRetryAt": (
            now + config["autoRetryInterval"] * 2.0 ** (count - 1) if count < config["maxAutoRetries"] else None
        ),
        "expiresAt": entry["expiresAt"],
    }


def first_generation(config: dict[str, Any], now: float) -> dict[str, Any]:
    """The lifetime fields of a job's first DLQ entry, by the queue's policy when it is filed."""
    max_age = config["maxAge"]
    return {
        "enteredAt": now,
        "retryCount": 0,
        "lastRetryAt": None,
        "nextRetryAt": now + config["autoRetryInterval"] if config["autoRetry"] else None,
        "expiresAt": None if max_age is None else now + max_age,
    }


def filed_entry(
    job: Job, reason: str, error: Any, attempts: list[dict[str, Any]], generation: dict[str, Any]
) -> Entry:
    """A DLQ entry for ``job``, its failure history ``attempts`` and lifetime ``generation``."""
    return {
        "job": job,
        "enteredAt": generation["enteredAt"],
        "reason": reason,
        "error": error,
        "attempts": attempts,
        "retryCount": generation["retryCount"],
        "lastRetryAt": generation["lastRetryAt"],
        "nextRetryAt": generation["nextRetryAt"],
        "expiresAt": generation["expiresAt"],
    }


def select_entries(entries: list[Entry], config: dict[str, Any], spec: dict[str, Any], now: float) -> list[Entry]:
    """The entries (oldest first) matching a Dlq filter. Zero or empty criteria select everything."""
    reason = spec.get("reason")
    older = spec.get("olderThan")
    newer = spec.get("newerThan")
    out = []
    for entry in entries:
        if reason and entry["reason"] != reason:
            continue
        if older and entry["enteredAt"] > older:
            continue
        if newer and entry["enteredAt"] < newer:
            continue
        if spec.get("retriable") and not can_auto_retry(entry, config, now):
            continue
        if spec.get("expired") and not is_expired(entry, now):
            continue
        out.append(entry)
    # Slices as JS does: a zero limit or offset is no limit or offset, a negative one counts from the end.
    offset = spec.get("offset")
    if offset:
        out = out[slice(*js_slice_bounds(offset, len(out), len(out)))]
    limit = spec.get("limit")
    if limit:
        out = out[slice(*js_slice_bounds(0, limit, len(out)))]
    return out


def entry_stats(queue: str, entries: list[Entry], config: dict[str, Any], now: float) -> dict[str, Any]:
    """GetDlqStats of one queue's entries."""
    by_reason = dict.fromkeys(REASONS, 0)
    pending = expired = 0
    oldest: float | None = None
    newest: float | None = None
    for entry in entries:
        by_reason[entry["reason"]] = by_reason.get(entry["reason"], 0) + 1
        retry_at = entry["nextRetryAt"]
        if retry_at and retry_at <= now and entry["retryCount"] < config["maxAutoRetries"]:
            pending += 1
        expires_at = entry["expiresAt"]
        if expires_at and expires_at <= now:
            expired += 1
        entered = entry["enteredAt"]
        if oldest is None or entered < oldest:
            oldest = entered
        if newest is None or entered > newest:
            newest = entered
    return {
        "total": len(entries),
        "byReason": by_reason,
        "byQueue": {queue: len(entries)},
        "pendingRetry": pending,
        "expired": expired,
        "oldestEntry": oldest,
        "newestEntry": newest,
    }


def can_auto_retry(entry: Entry, config: dict[str, Any], now: float) -> bool:
    if not config["autoRetry"] or entry["retryCount"] >= config["maxAutoRetries"]:
        return False
    retry_at = entry["nextRetryAt"]
    return retry_at is not None and now >= retry_at


def is_expired(entry: Entry, now: float) -> bool:
    expires_at = entry["expiresAt"]
    return expires_at is not None and now >= expires_at


def merge_config(current: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """SetDlqConfig: the sanitized changes over the current policy, as the reference merges them.

    Numbers are floored (maxEntries is at least 1, the rest at least 0); only maxAge may be null (never
    expire); a field of the wrong kind leaves the current value.
    """
    out = dict(current)
    if type(changes.get("autoRetry")) is bool:
        out["autoRetry"] = changes["autoRetry"]
    for key in ("autoRetryInterval", "maxAutoRetries", "maxAge", "maxEntries"):
        value = _floored(changes.get(key))
        if value is not None:
            out[key] = wire_number(max(1.0 if key == "maxEntries" else 0.0, value))
    if "maxAge" in changes and changes["maxAge"] is None:
        out["maxAge"] = None
    return out


def _floored(value: Any) -> float | None:
    """A finite number rounded down, else None."""
    if type(value) not in (int, float) or not math.isfinite(value):
        return None
    return float(math.floor(value))
