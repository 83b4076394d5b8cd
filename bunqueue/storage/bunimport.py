"""Switching from the Bun server: its SQLite data file recognised and converted into this server's rows.

Recognition reads the file through a read-only connection, so a file that is not converted is left exactly
as it was found. Conversion writes a new file beside the original through this server's own schema and
batch writer, and only once it is complete puts it in the original's place; the original is first copied
beside itself (``<file>.bun-<version>.bak``).
"""
from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bunqueue.broker import states
from bunqueue.storage import bunrows, schema
from bunqueue.storage.batchwriter import BatchWriter
from bunqueue.storage.schema import StorageError
from bunqueue.storage.sqlite import STATEMENTS, Batch

log = logging.getLogger("bunqueue.storage")

SQLITE_MAGIC = b"SQLite format 3\x00"
# The original's release line: its files record a schema version, not the release that wrote them.
BUN_VERSION = "2.x"
# Tables every file of the original's 2.x line has.
BUN_TABLES = frozenset({"migrations", "jobs", "job_results", "dlq", "cron_jobs", "queue_state"})
BUN_JOB_COLUMNS = frozenset({"id", "queue", "data", "state", "priority", "created_at", "run_at"})
# Rows per write transaction: a progress step, and a bound on the memory one batch holds.
CHUNK = 5_000
SIDE_FILES = ("-wal", "-shm")

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class BunFile:
    """A data file the Bun original wrote."""

    path: Path
    schema_version: int
    version: str = BUN_VERSION

    @property
    def backup(self) -> Path:
        return self.path.with_name(f"{self.path.name}.bun-{self.version}.bak")


@dataclass
class Summary:
    """What a conversion carried over, by kind."""

    source: str
    target: str
    schema_version: int
    backup: str | None = None
    jobs: dict[str, int] = field(default_factory=dict)
    results: int = 0
    dlq: int = 0
    crons: int = 0
    queues: int = 0
    groups: int = 0
    unique_keys: int = 0
    custom_ids: int = 0

    def rows(self) -> list[tuple[str, int]]:
        """(what, how many) in reading order, for the summary table."""
        out = [(f"jobs {name}", n) for name, n in self.jobs.items()]
        out.append(("jobs total", sum(self.jobs.values())))
        out += [
            ("results", self.results), ("dlq entries", self.dlq), ("crons", self.crons),
            ("queue settings", self.queues), ("group settings", self.groups),
            ("unique keys", self.unique_keys), ("custom ids", self.custom_ids),
        ]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source, "target": self.target, "schemaVersion": self.schema_version,
            "backup": self.backup, "jobs": dict(self.jobs), "results": self.results, "dlq": self.dlq,
            "crons": self.crons, "queues": self.queues, "groups": self.groups,
            "uniqueKeys": self.unique_keys, "customIds": self.custom_ids,
        }


def detect(path: str | Path) -> BunFile | None:
    """The original's file at ``path``, or None when the file is absent, empty or already ours.

    Raises StorageError for a file that is neither (not SQLite, unreadable, unknown tables).
    """
    path = Path(path)
    try:
        with path.open("rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StorageError(f"{path} cannot be read: {exc.strerror}") from None
    if not head:
        return None
    if head != SQLITE_MAGIC:
        raise StorageError(f"{path} is not a SQLite database; the file was left unchanged")
    try:
        with _read_only(path) as conn:
            tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not tables or "meta" in tables and _columns(conn, "jobs") & {"record"}:
                return None
            if BUN_TABLES <= tables and BUN_JOB_COLUMNS <= _columns(conn, "jobs"):
                version = conn.execute("SELECT MAX(version) FROM migrations").fetchone()[0]
                return BunFile(path, int(version or 0))
    except sqlite3.Error as exc:
        raise StorageError(f"{path} cannot be read as a SQLite database ({exc}); the file was left unchanged") from None
    known = ", ".join(sorted(tables)[:8])
    raise StorageError(
        f"{path} holds tables this server does not know ({known}): it is neither a bunqueue data file nor one"
        f" written by the Bun server {BUN_VERSION}; the file was left unchanged"
    )


def convert_in_place(found: BunFile, progress: Progress | None = None) -> Summary:
    """Replace the original's file by its conversion, keeping the original as ``found.backup``."""
    path = found.path
    backup = found.backup
    if backup.exists():
        raise StorageError(f"{path} needs converting but {backup} already exists; move it away and start again")
    _copy_with_side_files(path, backup)
    staging = path.with_name(f"{path.name}.converting")
    try:
        summary = _convert(found, staging, progress)
    except BaseException:
        _remove_with_side_files(backup)
        raise
    # The original's WAL must not be replayed into the new file.
    for suffix in SIDE_FILES:
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    os.replace(staging, path)
    summary.target = str(path)
    summary.backup = str(backup)
    return summary


def convert_to(found: BunFile, target: str | Path, progress: Progress | None = None) -> Summary:
    """Write the conversion of the original's file to ``target`` (absent or empty); the source stays."""
    target = Path(target)
    if target.exists() and target.stat().st_size > 0:
        raise StorageError(f"{target} already exists; the conversion writes a new file")
    staging = target.with_name(f"{target.name}.converting")
    summary = _convert(found, staging, progress)
    os.replace(staging, target)
    summary.target = str(target)
    return summary


def _convert(found: BunFile, staging: Path, progress: Progress | None) -> Summary:
    _remove_with_side_files(staging)
    try:
        with _read_only(found.path) as conn:
            imported = bunrows.read(conn)
        _write(staging, imported, progress)
    except sqlite3.Error as exc:
        _remove_with_side_files(staging)
        raise StorageError(f"{found.path} cannot be converted ({exc}); the file was left unchanged") from None
    except BaseException:
        _remove_with_side_files(staging)
        raise
    return _summary(found, imported)


def _write(path: Path, imported: bunrows.Imported, progress: Progress | None) -> None:
    """The imported rows, written by this server's own schema and batch writer."""
    conn = schema.connect(str(path), "NORMAL")
    try:
        schema.migrate(conn)
    finally:
        conn.close()
    writer = BatchWriter(str(path), schema.pragmas("NORMAL"), tuple(STATEMENTS))
    try:
        total = len(imported.jobs)
        for start in range(0, total, CHUNK):
            batch = Batch()
            batch.jobs = {job.id: job for job in imported.jobs[start : start + CHUNK]}
            writer.write(batch.rows())
            if progress is not None:
                progress(min(start + CHUNK, total), total)
        batch = Batch()
        batch.results = imported.results
        batch.dlq = imported.dlq
        batch.queues = dict(imported.queues)
        batch.groups = dict(imported.groups)
        batch.crons = dict(imported.crons)
        writer.write(batch.rows())
        if progress is not None:
            progress(total, total)
        writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        writer.close()


def _summary(found: BunFile, imported: bunrows.Imported) -> Summary:
    summary = Summary(str(found.path), "", found.schema_version)
    counts: dict[str, int] = {}
    now = time.time() * 1000
    for job in imported.jobs:
        name = states.state_name(job.state, job.priority, job.run_at, now)
        counts[name] = counts.get(name, 0) + 1
    summary.jobs = counts
    summary.results = len(imported.results)
    summary.dlq = len(imported.dlq)
    summary.crons = len(imported.crons)
    summary.queues = len(imported.queues)
    summary.groups = len(imported.groups)
    summary.unique_keys, summary.custom_ids = bunrows.live_keys(imported.jobs)
    return summary


class _read_only:
    """A connection that cannot change the file: no journal replay, no WAL checkpoint on close. The WAL
    index files SQLite creates beside a WAL-mode file to read it go again when it closes."""

    def __init__(self, path: Path) -> None:
        self.created = [side for suffix in SIDE_FILES if not (side := Path(f"{path}{suffix}")).exists()]
        uri = f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro"
        self.conn = sqlite3.connect(uri, uri=True)

    def __enter__(self) -> sqlite3.Connection:
        return self.conn

    def __exit__(self, *exc: object) -> None:
        self.conn.close()
        for side in self.created:
            side.unlink(missing_ok=True)


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def _copy_with_side_files(source: Path, target: Path) -> None:
    shutil.copy2(source, target)
    for suffix in SIDE_FILES:
        side = Path(f"{source}{suffix}")
        if side.exists():
            shutil.copy2(side, f"{target}{suffix}")


def _remove_with_side_files(path: Path) -> None:
    for suffix in ("", *SIDE_FILES):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def open_for_start(path: str) -> Summary | None:
    """Before the store touches ``path``: convert the original's file in place (logged), or nothing."""
    found = detect(path)
    if found is None:
        return None
    log.info(
        "%s was written by the Bun server %s (schema %d): converting it; the original is kept as %s",
        path, found.version, found.schema_version, found.backup,
    )
    summary = convert_in_place(found)
    log.info(
        "converted %s: %s", path, ", ".join(f"{n} {what}" for what, n in summary.rows() if n),
    )
    return summary
