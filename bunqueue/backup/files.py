"""Database files for backups and restores: a consistent snapshot of a live file, an integrity check, and
the swap of a restored file into place.

The snapshot is SQLite's online backup (``sqlite3.Connection.backup``) on a connection of its own: the whole
copy is one step, so it reads one transaction's view of the file while the server's writer goes on
committing to the WAL beside it. The live file is never copied byte for byte.
"""
from __future__ import annotations

import contextlib
import os
import sqlite3
import time
import uuid

SIDECARS = ("-wal", "-shm", "-journal")
BUSY_TIMEOUT_MS = 30_000


def sibling(path: str, purpose: str) -> str:
    """A fresh temporary name beside ``path`` (same file system: the restore's rename is atomic)."""
    return f"{path}.{purpose}-{int(time.time() * 1000)}-{uuid.uuid4()}.tmp"


def remove_artifacts(path: str) -> None:
    for name in (path, *(path + suffix for suffix in SIDECARS)):
        with contextlib.suppress(FileNotFoundError):
            os.remove(name)


def verify_integrity(path: str) -> None:
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            status = conn.execute("PRAGMA integrity_check").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise ValueError("Database integrity check failed: corrupt or invalid database") from exc
    if status != "ok":
        raise ValueError(f"Database integrity check failed: {status or 'unknown error'}")


def snapshot(database_path: str) -> str:
    """A standalone, checked copy of the database as of one moment; the caller removes it."""
    if not os.path.exists(database_path):
        raise FileNotFoundError(f"Database file not found: {database_path}")
    target = sibling(database_path, "backup-snapshot")
    try:
        source = sqlite3.connect(database_path)
        dest = sqlite3.connect(target)
        try:
            source.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            source.backup(dest)
        finally:
            dest.close()
            source.close()
        verify_integrity(target)
    except BaseException:
        remove_artifacts(target)
        raise
    return target


def install(candidate: str, database_path: str) -> None:
    """Put a checked candidate in place of the database; sidecars of the old file are moved aside first
    (and put back if the swap fails), so the new file is never read with the old file's WAL."""
    tag = f"{int(time.time() * 1000)}-{uuid.uuid4()}"
    moved: list[tuple[str, str]] = []
    try:
        for suffix in SIDECARS:
            live = database_path + suffix
            if os.path.exists(live):
                aside = f"{live}.restore-quarantine-{tag}"
                os.rename(live, aside)
                moved.append((live, aside))
        os.rename(candidate, database_path)
    except OSError:
        for live, aside in reversed(moved):
            os.rename(aside, live)
        raise
    for _, aside in moved:
        with contextlib.suppress(OSError):
            os.remove(aside)
