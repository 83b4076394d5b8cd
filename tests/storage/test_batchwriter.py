"""BatchWriter: a RowBuffer written in one transaction through the SQLite C API, all or nothing."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import msgpack
import pytest

from bunqueue._core.jobfactory import JobFactory
from bunqueue._core.rows import RowBuffer
from bunqueue.storage import batchwriter, schema
from bunqueue.storage.batchwriter import BatchWriter
from bunqueue.storage.sqlite import (
    DELETE_JOB,
    MARK_PULLED,
    STATEMENTS,
    UPSERT_JOB,
    UPSERT_QUEUE_SETTINGS,
    UPSERT_RESULT,
)


@pytest.fixture
def path(tmp_path: Path) -> str:
    file = str(tmp_path / "data.db")
    conn = schema.connect(file, "NORMAL")
    schema.migrate(conn)
    conn.close()
    return file


@pytest.fixture
def writer(path: str):
    writer = BatchWriter(path, schema.pragmas("NORMAL"), tuple(STATEMENTS))
    yield writer
    writer.close()


def _jobs(n: int) -> dict:
    factory = JobFactory()
    jobs = {}
    for i in range(n):
        job = factory.build({"name": "n", "data": {"i": i}}, "q", 1.0, True)
        jobs[job.id] = job
    return jobs


def _rows(path: str, sql: str) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_it_uses_the_sqlite_library_of_pythons_sqlite3_module() -> None:
    # One copy of SQLite in the process: the module found its functions in the library _sqlite3 loaded.
    assert batchwriter.LIBRARY == "python"


def test_rows_are_written_and_read_back(path: str, writer: BatchWriter) -> None:
    jobs = _jobs(500)
    rows = RowBuffer()
    rows.add_jobs(UPSERT_JOB, jobs)
    rows.add_packed(UPSERT_RESULT, (next(iter(jobs)),), {"answer": 42})
    rows.add_packed(UPSERT_QUEUE_SETTINGS, ("q",), {"paused": True})
    writer.write(rows)
    stored = dict((i, (q, s, r)) for i, q, s, r in _rows(path, "SELECT id, queue, state, record FROM jobs"))
    assert len(stored) == 500
    for job in jobs.values():
        assert stored[job.id] == ("q", 0, msgpack.packb(job.to_record(), use_bin_type=True))
    assert _rows(path, "SELECT job_id, result FROM results") == [(next(iter(jobs)), msgpack.packb({"answer": 42}))]
    assert _rows(path, "SELECT name, settings FROM queues") == [("q", msgpack.packb({"paused": True}))]


def test_later_batches_update_and_delete(path: str, writer: BatchWriter) -> None:
    jobs = _jobs(3)
    first, second, third = jobs
    rows = RowBuffer()
    rows.add_jobs(UPSERT_JOB, jobs)
    writer.write(rows)
    rows = RowBuffer()
    pulled = jobs[first]
    pulled.state, pulled.started_at = 3, 1796315349442.0
    rows.add_pulls(MARK_PULLED, {first: pulled})
    rows.add(DELETE_JOB, (second,))
    writer.write(rows)
    assert sorted(_rows(path, "SELECT id, state, started_at FROM jobs")) == sorted(
        [(first, 3, 1796315349442), (third, 0, None)]
    )
    # A record written after the pull holds its start: the column is cleared.
    rows = RowBuffer()
    rows.add_jobs(UPSERT_JOB, {first: pulled})
    writer.write(rows)
    assert _rows(path, f"SELECT state, started_at FROM jobs WHERE id = '{first}'") == [(3, None)]


def test_a_failing_row_leaves_nothing_of_its_batch(path: str, writer: BatchWriter) -> None:
    rows = RowBuffer()
    rows.add_jobs(UPSERT_JOB, _jobs(10))
    # jobs.queue is NOT NULL.
    rows.add(UPSERT_JOB, ("id", None, 0, "record"))
    with pytest.raises(sqlite3.OperationalError, match="NOT NULL constraint failed: jobs.queue"):
        writer.write(rows)
    assert _rows(path, "SELECT COUNT(*) FROM jobs") == [(0,)]
    # The connection is usable after the rollback.
    rows = RowBuffer()
    rows.add_jobs(UPSERT_JOB, _jobs(2))
    writer.write(rows)
    assert _rows(path, "SELECT COUNT(*) FROM jobs") == [(2,)]


@pytest.mark.parametrize("statement", [-1, len(STATEMENTS)])
def test_a_row_for_an_unknown_statement_fails_the_batch(path: str, writer: BatchWriter, statement: int) -> None:
    rows = RowBuffer()
    rows.add_jobs(UPSERT_JOB, _jobs(1))
    rows.add(statement, ("x",))
    with pytest.raises(sqlite3.OperationalError):
        writer.write(rows)
    assert _rows(path, "SELECT COUNT(*) FROM jobs") == [(0,)]


def test_a_row_with_too_many_parameters_fails_the_batch(path: str, writer: BatchWriter) -> None:
    rows = RowBuffer()
    rows.add(DELETE_JOB, ("a", "b"))
    with pytest.raises(sqlite3.OperationalError, match="column index out of range"):
        writer.write(rows)


def test_a_locked_file_fails_the_batch_and_a_later_one_succeeds(path: str) -> None:
    writer = BatchWriter(path, ("PRAGMA journal_mode=WAL", "PRAGMA busy_timeout=0"), tuple(STATEMENTS))
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        rows = RowBuffer()
        rows.add_jobs(UPSERT_JOB, _jobs(1))
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            writer.write(rows)
        holder.execute("ROLLBACK")
        writer.write(rows)
        assert _rows(path, "SELECT COUNT(*) FROM jobs") == [(1,)]
    finally:
        holder.close()
        writer.close()


def test_bad_sql_and_bad_paths_raise(path: str, tmp_path: Path) -> None:
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        BatchWriter(path, (), ("DELETE FROM nowhere WHERE id = ?",))
    with pytest.raises(sqlite3.OperationalError):
        BatchWriter(str(tmp_path / "missing" / "x.db"), (), ())
    writer = BatchWriter(path, (), ())
    with pytest.raises(sqlite3.OperationalError, match="syntax error"):
        writer.execute("NOT SQL")
    writer.close()
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        writer.write(RowBuffer())
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        writer.execute("PRAGMA user_version")
