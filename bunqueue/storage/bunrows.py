"""Rows of the Bun original's SQLite file (bunqueue 2.x) read as this server's objects.

The original's encodings: payloads, lists and option maps are MessagePack blobs (msgpackr, whose JS
``undefined`` is ext type 0), flags are 0/1 integers, times are epoch milliseconds, a job's state is its
public name, and the options without a column of their own sit in one ``extended_options`` map. Failed
jobs live only in the DLQ, each entry holding the whole job in its wire form.
"""
from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgpack

from bunqueue._core.jobs import DEFAULT_STACK_TRACE_LIMIT, Job
from bunqueue.broker import states
from bunqueue.server.codec import UNDEFINED, ext_hook, without_undefined
from bunqueue.storage.schema import StorageError

#: The original's state names -> this server's homes ("waiting" and "prioritized" are views of READY).
HOMES = {
    "waiting": states.READY,
    "prioritized": states.READY,
    "delayed": states.DELAYED,
    "active": states.ACTIVE,
    "completed": states.COMPLETED,
    "failed": states.FAILED,
    "waiting-children": states.WAITING_CHILDREN,
}
# A job pushed without a name, in the original's files of before the name column (schema 31).
DEFAULT_JOB_NAME = "default"
# DLQ entry fields kept beside the job (the job itself becomes a job row).
ENTRY_FIELDS = ("enteredAt", "reason", "error", "attempts", "retryCount", "lastRetryAt", "nextRetryAt", "expiresAt")
# Queue-state columns of the stall policy -> their SetStallConfig names.
STALL_COLUMNS = (
    ("stall_enabled", "enabled"), ("stall_interval", "stallInterval"), ("max_stalls", "maxStalls"),
    ("stall_grace_period", "gracePeriod"),
)


@dataclass
class Imported:
    """Everything read from one file, as this server keeps it."""

    jobs: list[Job] = field(default_factory=list)
    results: dict[str, Any] = field(default_factory=dict)
    dlq: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    queues: dict[str, dict[str, Any]] = field(default_factory=dict)
    groups: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    crons: dict[str, dict[str, Any]] = field(default_factory=dict)


def payload(blob: bytes | None, what: str) -> Any:
    """A user value as stored (``undefined`` kept as such)."""
    if blob is None:
        return None
    try:
        return msgpack.unpackb(blob, raw=False, strict_map_key=False, ext_hook=ext_hook)
    except Exception as exc:
        raise StorageError(f"{what} cannot be decoded ({exc})") from None


def options(blob: bytes | None, what: str) -> Any:
    """An option value: ``undefined`` inside it means absent."""
    value = payload(blob, what)
    if value is UNDEFINED:
        return None
    return without_undefined(value) if isinstance(value, dict) else value


def read(conn: sqlite3.Connection) -> Imported:
    conn.row_factory = sqlite3.Row
    out = Imported()
    wires: list[tuple[dict[str, Any], int]] = []
    for row in conn.execute("SELECT * FROM jobs ORDER BY created_at, rowid"):
        home = HOMES.get(row["state"])
        if home is None:
            raise StorageError(f"job {row['id']} has a state this server does not know: {row['state']!r}")
        wires.append((job_wire(row), home))
    in_jobs = {wire["id"] for wire, _ in wires}
    entries = _dlq_entries(conn)
    for job_id, (_, entry) in entries.items():
        if job_id not in in_jobs:
            wires.append((entry["job"], states.FAILED))
    # Admission order is creation order, as the original's UUIDv7 ids and push order give it.
    wires.sort(key=lambda item: item[0]["createdAt"])
    jobs = {wire["id"]: Job.from_wire(wire, seq, home) for seq, (wire, home) in enumerate(wires, 1)}
    out.jobs = list(jobs.values())
    for job_id, (queue, entry) in entries.items():
        out.dlq[job_id] = (queue, {**entry, "job": jobs[job_id]})
    for row in conn.execute("SELECT job_id, result FROM job_results"):
        if row["job_id"] in jobs:
            out.results[row["job_id"]] = payload(row["result"], f"the result of job {row['job_id']}")
    for row in conn.execute("SELECT * FROM queue_state"):
        settings = queue_settings(row)
        if settings:
            out.queues[row["name"]] = settings
    if _has_table(conn, "group_state"):
        for row in conn.execute("SELECT * FROM group_state"):
            out.groups[(row["queue"], row["group_id"])] = group_controls(row)
    for row in conn.execute("SELECT * FROM cron_jobs ORDER BY rowid"):
        out.crons[row["name"]] = cron_record(row)
    return out


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone()
    return found is not None


def _column(row: sqlite3.Row, name: str, default: Any = None) -> Any:
    """A column that older files of the original may lack."""
    return row[name] if name in row.keys() else default


def job_wire(row: sqlite3.Row) -> dict[str, Any]:
    """A job row as the job's wire form (what the original rebuilds from it)."""
    what = f"job {row['id']}"
    data = payload(row["data"], f"the data of {what}")
    name = _column(row, "name")
    if name is None:
        # Before the name column, the name travelled inside the data: {name, ...data}.
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            data = dict(data)
            name = data.pop("name")
        else:
            name = DEFAULT_JOB_NAME
    extended = options(_column(row, "extended_options"), f"the options of {what}") or {}
    wire: dict[str, Any] = {"id": row["id"], "queue": row["queue"], "name": name}
    if data is not UNDEFINED:
        wire["data"] = data
    wire.update(
        createdAt=row["created_at"], runAt=row["run_at"], startedAt=row["started_at"],
        completedAt=row["completed_at"], attempts=row["attempts"], maxAttempts=row["max_attempts"],
        backoff=row["backoff"], backoffConfig=extended.get("backoffConfig"), ttl=row["ttl"],
        timeout=row["timeout"], uniqueKey=row["unique_key"], customId=row["custom_id"],
        dependsOn=options(row["depends_on"], f"the dependencies of {what}") or [],
        parentId=row["parent_id"],
        childrenIds=options(row["children_ids"], f"the children of {what}") or [],
        tags=options(row["tags"], f"the tags of {what}") or [],
        lifo=row["lifo"] == 1, groupId=row["group_id"], progress=row["progress"] or 0,
        progressMessage=row["progress_msg"], removeOnComplete=row["remove_on_complete"] == 1,
        removeOnFail=row["remove_on_fail"] == 1, priority=row["priority"],
        lastHeartbeat=row["last_heartbeat"] if row["last_heartbeat"] is not None else row["created_at"],
        stallTimeout=row["stall_timeout"], stallCount=_column(row, "stall_count", 0) or 0,
        timeline=options(_column(row, "timeline"), f"the timeline of {what}") or [],
        stacktrace=options(_column(row, "stacktrace"), f"the stack trace of {what}"),
        repeat=extended.get("repeat"),
        stackTraceLimit=extended.get("stackTraceLimit", DEFAULT_STACK_TRACE_LIMIT),
        keepLogs=extended.get("keepLogs"), sizeLimit=extended.get("sizeLimit"),
        deduplicationTtl=extended.get("deduplicationTtl"),
        deduplicationExtend=bool(extended.get("deduplicationExtend")),
        deduplicationReplace=bool(extended.get("deduplicationReplace")),
        debounceId=extended.get("debounceId"), debounceTtl=extended.get("debounceTtl"),
        durable=bool(extended.get("durable")),
    )
    for column, key in (
        ("fail_parent_on_failure", "failParentOnFailure"),
        ("remove_dependency_on_failure", "removeDependencyOnFailure"),
        ("continue_parent_on_failure", "continueParentOnFailure"),
        ("ignore_dependency_on_failure", "ignoreDependencyOnFailure"),
    ):
        wire[key] = _column(row, column) == 1
    return wire


def _dlq_entries(conn: sqlite3.Connection) -> dict[str, tuple[str, dict[str, Any]]]:
    """The newest DLQ entry of each job, oldest first: (queue, entry with the job's wire form)."""
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for row in conn.execute("SELECT job_id, queue, entry FROM dlq ORDER BY entered_at, id"):
        what = f"the DLQ entry of job {row['job_id']}"
        entry = payload(row["entry"], what)
        job = entry.get("job") if isinstance(entry, dict) else None
        if not isinstance(job, dict) or job.get("id") != row["job_id"]:
            raise StorageError(f"{what} holds no job")
        kept = {key: without_undefined_value(entry.get(key)) for key in ENTRY_FIELDS}
        kept["enteredAt"] = kept["enteredAt"] or 0
        kept["retryCount"] = kept["retryCount"] or 0
        kept["attempts"] = kept["attempts"] or []
        kept["job"] = _dlq_job(job)
        out.pop(row["job_id"], None)
        out[row["job_id"]] = (row["queue"], kept)
    return out


def without_undefined_value(value: Any) -> Any:
    return None if value is UNDEFINED else value


def _dlq_job(job: dict[str, Any]) -> dict[str, Any]:
    """A DLQ entry's job with its options cleaned; files of before the name field carry the name in data."""
    data = job.get("data", UNDEFINED)
    wire = {key: value for key, value in without_undefined(job).items() if key != "data"}
    if "name" not in wire:
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            data = dict(data)
            wire["name"] = data.pop("name")
        else:
            wire["name"] = DEFAULT_JOB_NAME
    if data is not UNDEFINED:
        wire["data"] = data
    return wire


def queue_settings(row: sqlite3.Row) -> dict[str, Any]:
    """A queue_state row as this server's stored queue controls (see QueueState.settings)."""
    out: dict[str, Any] = {}
    if row["paused"]:
        out["paused"] = True
    dlq_config = options(_column(row, "dlq_config"), f"the DLQ config of queue {row['name']}")
    if isinstance(dlq_config, dict):
        out["dlqConfig"] = dlq_config
    if row["rate_limit"] is not None:
        out["rateLimit"] = row["rate_limit"]
        out["rateLimitDuration"] = _column(row, "rate_limit_duration")
        out["rateLimitExpiresAt"] = _column(row, "rate_limit_expires_at")
    if row["concurrency_limit"] is not None:
        out["concurrencyLimit"] = row["concurrency_limit"]
    stall = {key: _column(row, column) for column, key in STALL_COLUMNS if _column(row, column) is not None}
    if stall:
        if "enabled" in stall:
            stall["enabled"] = stall["enabled"] == 1
        out["stallConfig"] = stall
    return out


def group_controls(row: sqlite3.Row) -> dict[str, Any]:
    """A group_state row as this server's stored group controls (see groupcontrols.controls_record)."""
    return {
        "concurrency": row["concurrency_limit"] or 0,
        "rateMax": row["rate_limit"] or 0,
        "rateDuration": row["rate_duration"] or 0,
        "paused": _column(row, "paused") == 1,
    }


def cron_record(row: sqlite3.Row) -> dict[str, Any]:
    """A cron_jobs row as this server's stored cron (see Cron.record)."""
    what = f"cron {row['name']}"
    record: dict[str, Any] = {
        "name": row["name"], "jobName": _column(row, "job_name") or DEFAULT_JOB_NAME, "queue": row["queue"],
        "schedule": row["schedule"], "repeatEvery": row["repeat_every"], "nextRun": row["next_run"],
        "executions": row["executions"], "maxLimit": row["max_limit"], "timezone": row["timezone"],
        "priority": row["priority"],
    }
    data = payload(row["data"], f"the data of {what}")
    if data is not UNDEFINED:
        record["data"] = data
    record.update(
        uniqueKey=_column(row, "unique_key"), dedup=options(_column(row, "dedup"), f"the dedup of {what}"),
        skipMissedOnRestart=_column(row, "skip_missed_on_restart", 1) == 1,
        skipIfNoWorker=_column(row, "skip_if_no_worker", 0) == 1,
        preventOverlap=_column(row, "prevent_overlap", 1) == 1,
        jobOptions=options(_column(row, "job_options"), f"the job options of {what}"),
    )
    return record


def live_keys(jobs: Iterable[Job]) -> tuple[int, int]:
    """How many live jobs hold a unique key, and how many carry a custom id."""
    live = [job for job in jobs if job.state in states.LIVE]
    return sum(job.unique_key is not None for job in live), sum(job.custom_id is not None for job in jobs)
