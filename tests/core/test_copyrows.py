"""CopyRows: the binary COPY stream of plain pushes, each row the values the INSERT would store.

The model is what the rows were before the stream was written in C: per job the tuple of
``copypush.COPY_COLUMNS`` with texts through ``pgtext.to_text`` and the record of ``RowBuffer.record``;
the stream is parsed back by PostgreSQL's binary COPY rules and compared field by field.
"""
from __future__ import annotations

import math
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bunqueue._core.copyrows import CopyRows
from bunqueue._core.jobfactory import JobFactory
from bunqueue._core.jobs import Job
from bunqueue._core.rows import RowBuffer
from bunqueue.broker.states import READY
from bunqueue.storage.postgres.copypush import COPY_COLUMNS
from bunqueue.storage.postgres.pgtext import to_text

NOW = 1.7e12
HEADER = b"PGCOPY\n\xff\r\n\x00" + b"\x00" * 8
# How each column's bytes read back, in COPY_COLUMNS order.
TEXT, INT2, FLOAT8, BOOL, INT8, INT4, BYTEA = range(7)
KINDS = (TEXT, INT2, TEXT, TEXT, FLOAT8, BOOL, INT8, INT8, INT4, TEXT, TEXT, BOOL, BYTEA)
TEXTS = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)


def _field(kind: int, raw: bytes) -> Any:
    if kind == TEXT:
        return raw.decode()
    if kind == BYTEA:
        return raw
    fmt = {INT2: ">h", FLOAT8: ">d", BOOL: ">?", INT8: ">q", INT4: ">i"}[kind]
    assert len(raw) == struct.calcsize(fmt)
    return struct.unpack(fmt, raw)[0]


def parse(stream: bytes) -> list[tuple[Any, ...]]:
    """The rows of a binary COPY stream; fails on anything PostgreSQL would refuse to read."""
    assert stream[:len(HEADER)] == HEADER
    at, rows = len(HEADER), []
    while True:
        (count,) = struct.unpack_from(">h", stream, at)
        at += 2
        if count == -1:
            assert at == len(stream), "bytes after the trailer"
            return rows
        assert count == len(COPY_COLUMNS) == len(KINDS)
        row = []
        for kind in KINDS:
            (size,) = struct.unpack_from(">i", stream, at)
            at += 4
            if size == -1:
                row.append(None)
                continue
            assert size >= 0 and at + size <= len(stream)
            row.append(_field(kind, stream[at:at + size]))
            at += size
        rows.append(tuple(row))


def model(namespace: str, job: Job) -> tuple[Any, ...]:
    group = job.group_id
    return (
        to_text(namespace), READY, to_text(job.id), to_text(job.queue), job.priority, bool(job.lifo),
        int(job.run_at), int(job.created_at), job.max_attempts, None if group is None else to_text(group), None,
        bool(job.remove_on_complete), RowBuffer().record(job),
    )


def _job(factory: JobFactory, queue: str, opts: dict[str, Any]) -> Job:
    return factory.build({"name": "job", **opts}, queue, NOW, True)


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    # NaN priorities compare by kind, everything else by value.
    return all((isinstance(x, float) and math.isnan(x) and math.isnan(y)) or x == y for x, y in zip(a, b, strict=True))


JOBS = st.lists(
    st.tuples(
        TEXTS.filter(bool),
        st.fixed_dictionaries({}, optional={
            "data": st.dictionaries(TEXTS, st.one_of(st.integers(-(2**63), 2**63 - 1), TEXTS), max_size=3),
            "lifo": st.booleans(),
            "maxAttempts": st.integers(1, 1000),
            "removeOnComplete": st.booleans(),
            "groupId": TEXTS.filter(bool),
            "tags": st.lists(TEXTS, max_size=3),
        }),
        st.floats(allow_nan=True, allow_infinity=True),
        st.floats(min_value=-1e15, max_value=NOW),
    ),
    max_size=20,
)


@settings(max_examples=200, deadline=None)
@given(TEXTS, JOBS)
def test_every_plain_job_reads_back_as_the_columns_the_insert_stores(namespace: str, specs: list[Any]) -> None:
    factory = JobFactory()
    rows, jobs = CopyRows(namespace), []
    for queue, opts, priority, run_at in specs:
        job = _job(factory, queue, opts)
        job.priority, job.run_at = priority, run_at
        assert rows.add_plain(job, READY, NOW)
        jobs.append(job)
    assert len(rows) == len(jobs)
    parsed = parse(rows.finish())
    assert len(parsed) == len(jobs)
    for got, job in zip(parsed, jobs):
        assert _same(got, model(namespace, job))


def test_texts_with_nul_and_backslash_are_stored_escaped() -> None:
    rows = CopyRows("n\x00s\\")
    job = _job(JobFactory(), "q\\\x00", {"groupId": "\x00g\\"})
    assert rows.add_plain(job, READY, NOW)
    (row,) = parse(rows.finish())
    assert (row[0], row[3], row[9]) == ("n\\0s\\\\", "q\\\\\\0", "\\0g\\\\")


@pytest.mark.parametrize("field,value", [
    ("custom_id", "own"), ("unique_key", "k"), ("pending_deps", ["x"]), ("parent_id", "p"), ("run_at", NOW + 1),
])
def test_a_job_the_insert_must_judge_writes_nothing(field: str, value: Any) -> None:
    factory = JobFactory()
    plain, judged = _job(factory, "q", {}), _job(factory, "q", {})
    setattr(judged, field, value)
    rows = CopyRows("ns")
    assert rows.add_plain(plain, READY, NOW)
    assert not rows.add_plain(judged, READY, NOW)
    assert len(rows) == 1
    only = CopyRows("ns")
    only.add_plain(plain, READY, NOW)
    assert rows.finish() == only.finish()


@pytest.mark.parametrize("field,value", [
    ("run_at", -1e19), ("run_at", math.nan), ("created_at", 1e19), ("created_at", math.inf),
    ("max_attempts", 2**31), ("max_attempts", -(2**31) - 1), ("group_id", 7),
])
def test_a_value_past_its_column_writes_nothing(field: str, value: Any) -> None:
    job = _job(JobFactory(), "q", {})
    setattr(job, field, value)
    rows = CopyRows("ns")
    assert not rows.add_plain(job, READY, NOW)
    assert parse(rows.finish()) == []


def test_bounds_that_fit_are_written() -> None:
    job = _job(JobFactory(), "q", {})
    job.max_attempts, job.created_at = -(2**31), -9.2e18
    rows = CopyRows("ns")
    assert rows.add_plain(job, READY, NOW)
    (row,) = parse(rows.finish())
    assert (row[7], row[8]) == (int(-9.2e18), -(2**31))


def test_a_text_without_utf8_form_writes_nothing() -> None:
    factory = JobFactory()
    rows = CopyRows("ns")
    assert rows.add_plain(_job(factory, "q", {}), READY, NOW)
    assert not rows.add_plain(_job(factory, "q\ud800", {}), READY, NOW)
    assert len(parse(rows.finish())) == 1


def test_the_stream_ends_once() -> None:
    rows = CopyRows("ns")
    rows.add_plain(_job(JobFactory(), "q", {}), READY, NOW)
    stream = rows.finish()
    assert rows.finish() == stream and stream.endswith(b"\xff\xff")
    with pytest.raises(ValueError, match="finished"):
        rows.add_plain(_job(JobFactory(), "q", {}), READY, NOW)


@settings(max_examples=100, deadline=None)
@given(TEXTS, st.lists(JOBS, max_size=4))
def test_parts_written_apart_make_the_stream_written_at_once(namespace: str, parts: list[list[Any]]) -> None:
    factory = JobFactory()
    whole, joined = CopyRows(namespace), CopyRows(namespace)
    for specs in parts:
        part = CopyRows(namespace)
        for queue, opts, priority, run_at in specs:
            job = _job(factory, queue, opts)
            job.priority, job.run_at = priority, run_at
            assert whole.add_plain(job, READY, NOW) and part.add_plain(job, READY, NOW)
        joined.add_rows(part.rows(), len(part))
    assert len(joined) == len(whole)
    assert joined.finish() == whole.finish()


def test_a_finished_stream_gives_no_part_and_takes_none() -> None:
    rows = CopyRows("ns")
    rows.add_plain(_job(JobFactory(), "q", {}), READY, NOW)
    part = rows.rows()
    rows.finish()
    with pytest.raises(ValueError, match="finished"):
        rows.rows()
    with pytest.raises(ValueError, match="finished"):
        rows.add_rows(part, 1)
