"""RowBuffer: a batch's SQL parameters in one buffer, job records written from the typed fields.

A record must be the bytes ``msgpack.packb(job.to_record())`` gives, so files written before and after read
back alike, and every row must decode to the parameters it was given (a model test against a list).
"""
from __future__ import annotations

import math
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bunqueue._core.jobfactory import JobFactory
from bunqueue._core.jobs import NO_DATA, Job
from bunqueue._core.rows import RowBuffer
from bunqueue.storage import schema

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=50),
    st.binary(max_size=50),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=8), st.dictionaries(st.text(max_size=10), inner, max_size=8)),
    max_leaves=30,
)
IDS = st.text(min_size=1, max_size=40)
OPTIONS = st.fixed_dictionaries(
    {"name": st.text(min_size=1, max_size=20)},
    optional={
        "data": VALUES,
        "priority": st.integers(0, 100),
        "delay": st.integers(0, 10**9),
        "maxAttempts": st.integers(1, 10),
        "backoff": st.one_of(st.integers(0, 10**6), st.just({"type": "fixed", "delay": 5})),
        "ttl": st.integers(0, 10**6),
        "timeout": st.integers(0, 10**6),
        "dependsOn": st.lists(IDS, max_size=4),
        "tags": st.lists(st.text(max_size=10), max_size=4),
        "groupId": st.text(min_size=1, max_size=10),
        "customId": IDS,
        "uniqueKey": IDS,
        "durable": st.booleans(),
        "lifo": st.booleans(),
        "removeOnComplete": st.booleans(),
        "repeat": st.just({"every": 1000}),
    },
)


def _job(opts: dict[str, Any], timeline: list[Any], started: float, progress: Any) -> Job:
    job = JobFactory().build(opts, "q", 1.7e12, True)
    job.timeline = timeline
    job.started_at = started
    job.progress = progress
    return job


@settings(max_examples=300, deadline=None)
@given(
    opts=OPTIONS,
    timeline=st.lists(st.fixed_dictionaries({"state": st.text(max_size=10), "timestamp": st.floats()}), max_size=3),
    started=st.one_of(st.just(math.nan), st.floats(allow_nan=False)),
    progress=VALUES,
)
def test_records_are_the_bytes_of_the_record_tuple(
    opts: dict[str, Any], timeline: list[Any], started: float, progress: Any
) -> None:
    job = _job(opts, timeline, started, progress)
    record = RowBuffer().record(job)
    assert record == msgpack.packb(job.to_record(), use_bin_type=True)
    back = Job.from_record(schema.unpack(record))
    # The last field is a set: rebuilt from the list, it may iterate in another order.
    assert schema.pack(back.to_record()[:-1]) == schema.pack(job.to_record()[:-1])
    assert back.pending_deps == job.pending_deps


def test_a_job_without_data_and_one_with_pending_dependencies() -> None:
    job = JobFactory().build({"name": "n", "dependsOn": ["a", "b"]}, "q", 1.0, True)
    assert job.data is NO_DATA and job.pending_deps == {"a", "b"}
    record = RowBuffer().record(job)
    assert record == msgpack.packb(job.to_record(), use_bin_type=True)
    back = Job.from_record(schema.unpack(record))
    assert back.data is NO_DATA and back.pending_deps == {"a", "b"}


def test_job_rows_carry_id_queue_state_and_record() -> None:
    factory = JobFactory()
    jobs = {}
    for i in range(300):
        job = factory.build({"name": "n", "data": {"i": i, "blob": "x" * (i * 50)}}, f"q{i % 3}", 1.0, True)
        job.state = i % 7
        jobs[job.id] = job
    rows = RowBuffer()
    rows.add_jobs(4, jobs)
    assert len(rows) == len(jobs)
    decoded = rows.decoded()
    for (statement, params), job in zip(decoded, jobs.values()):
        assert statement == 4
        assert params == (job.id, job.queue, job.state, msgpack.packb(job.to_record(), use_bin_type=True))


def _pulled(state: int, started: float) -> Job:
    job = JobFactory().build({"name": "n"}, "q", 1.0, True)
    job.state = state
    job.started_at = started
    return job


def test_pull_rows_and_keyed_rows() -> None:
    rows = RowBuffer()
    a, b = _pulled(3, 1796315349442.0), _pulled(5, 7.0)
    rows.add_pulls(1, {a.id: a, b.id: b})
    rows.add(2, ("q", None, -7, 2**62))
    rows.add_packed(3, ("q", "g"), {"limit": 2, "paused": True})
    rows.add_packed(3, (), [1.5, b"\x00"])
    assert rows.decoded() == [
        (1, (3, 1796315349442, a.id)),
        (1, (5, 7, b.id)),
        (2, ("q", None, -7, 2**62)),
        (3, ("q", "g", msgpack.packb({"limit": 2, "paused": True}))),
        (3, (msgpack.packb([1.5, b"\x00"], use_bin_type=True),)),
    ]


@pytest.mark.parametrize("key", [b"bytes", 1.5, True, ("tuple",)])
def test_keys_are_texts_integers_or_null(key: Any) -> None:
    with pytest.raises(TypeError, match="key parameter"):
        RowBuffer().add(0, (key,))


def test_an_unpackable_value_raises() -> None:
    with pytest.raises(TypeError):
        RowBuffer().add_packed(0, ("k",), object())


def test_only_jobs_make_job_rows() -> None:
    with pytest.raises(TypeError):
        RowBuffer().add_jobs(0, {"a": {"id": "a"}})
    with pytest.raises(TypeError):
        RowBuffer().add_pulls(0, {"a": 3})


KEYS = st.one_of(st.none(), st.text(max_size=30), st.integers(-(2**63), 2**63 - 1))
OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 20), st.lists(KEYS, max_size=4)),
        st.tuples(st.just("packed"), st.integers(0, 20), st.lists(KEYS, max_size=3), VALUES),
        st.tuples(
            st.just("pulls"), st.integers(0, 20),
            st.lists(st.tuples(st.integers(0, 9), st.integers(0, 2**53)), max_size=5),
        ),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(OPERATIONS)
def test_rows_match_a_list_model(operations: list[tuple[Any, ...]]) -> None:
    rows = RowBuffer()
    model: list[tuple[int, tuple[Any, ...]]] = []
    for op in operations:
        if op[0] == "add":
            rows.add(op[1], tuple(op[2]))
            model.append((op[1], tuple(op[2])))
        elif op[0] == "packed":
            rows.add_packed(op[1], tuple(op[2]), op[3])
            model.append((op[1], (*op[2], msgpack.packb(op[3], use_bin_type=True))))
        else:
            pulled = [_pulled(*pull) for pull in op[2]]
            rows.add_pulls(op[1], {job.id: job for job in pulled})
            model.extend((op[1], (state, started, job.id)) for job, (state, started) in zip(pulled, op[2]))
    assert len(rows) == len(model)
    assert rows.decoded() == model
