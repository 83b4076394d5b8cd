"""The SQLite file: schema, migrations, pragmas and the one-time read at start-up."""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Any

import msgpack

from bunqueue._core.jobs import Job

SCHEMA_VERSION = 5

# Each entry upgrades the file from the version before it; entry N brings it to version N.
MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        # The record is the job's full state (Job.to_record, MessagePack). `state` may be newer than the
        # record's own: a pull writes only the state column, which recovery trusts. No secondary index:
        # every write would pay for it, and only start-up scans by state.
        (
            "CREATE TABLE IF NOT EXISTS jobs (id TEXT PRIMARY KEY, queue TEXT NOT NULL,"
            " state INTEGER NOT NULL, record BLOB NOT NULL)"
        ),
        "CREATE TABLE IF NOT EXISTS results (job_id TEXT PRIMARY KEY, result BLOB NOT NULL)",
        "CREATE TABLE IF NOT EXISTS dlq (job_id TEXT PRIMARY KEY, queue TEXT NOT NULL, entry BLOB NOT NULL)",
        "CREATE TABLE IF NOT EXISTS queues (name TEXT PRIMARY KEY, settings BLOB NOT NULL)",
    ),
    2: (
        # Stored group controls (SetGroupConcurrency, SetGroupRateLimit, PauseGroup); runtime windows are
        # not kept.
        (
            "CREATE TABLE IF NOT EXISTS group_controls (queue TEXT NOT NULL, group_id TEXT NOT NULL,"
            " controls BLOB NOT NULL, PRIMARY KEY (queue, group_id))"
        ),
    ),
    # Cron schedules: the definition with its execution count and next run (Cron.record, MessagePack).
    3: ("CREATE TABLE IF NOT EXISTS crons (name TEXT PRIMARY KEY, record BLOB NOT NULL)",),
    # Webhook registrations (AddWebhook): url, events, queue, secret, createdAt, enabled (MessagePack).
    4: ("CREATE TABLE IF NOT EXISTS webhooks (id TEXT PRIMARY KEY, record BLOB NOT NULL)",),
    # The start (epoch ms) of a pull written after the record, which the record does not hold yet: a pull
    # writes the state and this column only, a record write clears it. NULL when the record is current.
    5: ("ALTER TABLE jobs ADD COLUMN started_at INTEGER",),
}

SYNC_LEVELS = ("OFF", "NORMAL", "FULL", "EXTRA")


class StorageError(Exception):
    """The data file cannot be used (unknown newer schema, corrupt record)."""


def pragmas(synchronous: str) -> tuple[str, ...]:
    """What every connection to the file runs first."""
    return (
        "PRAGMA journal_mode=WAL",
        f"PRAGMA synchronous={synchronous}",
        "PRAGMA busy_timeout=5000",
        "PRAGMA cache_size=-64000",
        "PRAGMA temp_store=MEMORY",
    )


def connect(path: str, synchronous: str) -> sqlite3.Connection:
    # Autocommit mode: transactions are opened explicitly, so a commit is exactly where we say.
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    for pragma in pragmas(synchronous):
        conn.execute(pragma)
    return conn


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the file to SCHEMA_VERSION; refuse one written by a newer version."""
    conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    version = int(row[0]) if row else 0
    if version > SCHEMA_VERSION:
        raise StorageError(
            f"the data file has schema version {version}, newer than this server supports"
            f" ({SCHEMA_VERSION}); upgrade bunqueue or use another data path"
        )
    for target in range(version + 1, SCHEMA_VERSION + 1):
        conn.execute("BEGIN IMMEDIATE")
        for statement in MIGRATIONS[target]:
            conn.execute(statement)
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('schema_version', ?)"
            " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (str(target),),
        )
        conn.execute("COMMIT")
    return SCHEMA_VERSION


def unpack(blob: bytes) -> Any:
    return msgpack.unpackb(blob, raw=False, strict_map_key=False, use_list=True)


def pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


@dataclass
class Snapshot:
    """Everything the file holds, as read once at start-up."""

    jobs: list[Job] = field(default_factory=list)
    # Job id -> start of the pull its record predates (see MIGRATIONS[5]).
    pulls: dict[str, float] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)
    dlq: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    queues: dict[str, dict[str, Any]] = field(default_factory=dict)
    completed_counts: dict[str, int] = field(default_factory=dict)
    groups: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    crons: list[dict[str, Any]] = field(default_factory=list)
    webhooks: list[dict[str, Any]] = field(default_factory=list)
    # Completed rows not brought into memory (past ``keep_completed``): (id, queue, completedAt).
    completed_on_disk: list[tuple[str, str, float]] = field(default_factory=list)


def read_snapshot(conn: sqlite3.Connection, completed_state: int, keep_completed: int) -> Snapshot:
    """Live jobs, the newest ``keep_completed`` completed ones (with results), DLQ and queue settings."""
    snap = Snapshot()
    for queue, count in conn.execute(
        "SELECT queue, COUNT(*) FROM jobs WHERE state = ? GROUP BY queue", (completed_state,)
    ):
        snap.completed_counts[queue] = count
    for state, started, blob in conn.execute(
        "SELECT state, started_at, record FROM jobs WHERE state != ?", (completed_state,)
    ):
        snap.jobs.append(_job(state, blob))
        if started is not None:
            snap.pulls[snap.jobs[-1].id] = float(started)
    every_completed = sorted(
        (_job(state, blob) for state, blob in conn.execute(
            "SELECT state, record FROM jobs WHERE state = ?", (completed_state,)
        )),
        key=lambda job: (job.completed_at, job.seq),
        reverse=True,
    )
    completed = every_completed[:keep_completed]
    snap.jobs.extend(completed)
    snap.completed_on_disk = [(job.id, job.queue, job.completed_at) for job in every_completed[keep_completed:]]
    kept = {job.id for job in completed}
    for job_id, blob in conn.execute("SELECT job_id, result FROM results"):
        if job_id in kept:
            snap.results[job_id] = unpack(blob)
    for queue, blob in conn.execute("SELECT queue, entry FROM dlq"):
        snap.dlq.append((queue, unpack(blob)))
    for name, blob in conn.execute("SELECT name, settings FROM queues"):
        snap.queues[name] = unpack(blob)
    for queue, group_id, blob in conn.execute("SELECT queue, group_id, controls FROM group_controls"):
        snap.groups.append((queue, group_id, unpack(blob)))
    # rowid order is creation order: CronList lists crons as they were first created.
    for (blob,) in conn.execute("SELECT record FROM crons ORDER BY rowid"):
        snap.crons.append(unpack(blob))
    for (blob,) in conn.execute("SELECT record FROM webhooks ORDER BY rowid"):
        snap.webhooks.append(unpack(blob))
    return snap


def _job(state: int, blob: bytes) -> Job:
    try:
        job = Job.from_record(unpack(blob))
    except (ValueError, TypeError) as exc:
        raise StorageError(f"a job record in the data file cannot be read: {exc}") from exc
    job.state = state
    return job


def read_job(conn: sqlite3.Connection, job_id: str) -> tuple[Job, Any, bool] | None:
    """One job and its result (present, value) straight from the file, for jobs no longer in memory."""
    row = conn.execute(
        "SELECT j.state, j.record, r.result FROM jobs j LEFT JOIN results r ON r.job_id = j.id"
        " WHERE j.id = ?",
        (job_id,),
    ).fetchone()
    if row is None:
        return None
    job = Job.from_record(unpack(row[1]))
    job.state = row[0]
    if row[2] is None:
        return job, None, False
    return job, unpack(row[2]), True
