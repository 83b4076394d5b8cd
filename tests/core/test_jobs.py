"""The job record: its wire form, its storage row and the way back from both, and its timeline."""
from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bunqueue._core.admission import admit_ready
from bunqueue._core.jobfactory import JobFactory
from bunqueue._core.jobs import NO_DATA, TIMELINE_CAP, Job, wire_number
from bunqueue._core.readyqueue import ReadyQueue
from bunqueue.broker import states

NOW = 1_800_000_000_000.0


def build(opts: dict[str, Any], batch: bool = False) -> Job:
    return JobFactory().build(opts, "q", NOW, batch)


def test_defaults_and_key_order() -> None:
    job = build({"name": "n", "data": {"a": 1}})
    wire = job.to_dict()
    assert list(wire)[:5] == ["id", "queue", "name", "data", "createdAt"]
    assert list(wire)[-1] == "timeline"
    assert wire["maxAttempts"] == 3 and wire["backoff"] == 1000 and wire["stackTraceLimit"] == 10
    assert wire["createdAt"] == NOW and isinstance(wire["createdAt"], float)
    assert job.run_at == NOW and job.priority == 0 and job.lifo is False
    assert job.pending_deps is None and job.custom_id is None


def test_absent_data_is_left_out() -> None:
    assert "data" not in build({"name": "n"}).to_dict()
    assert build({"name": "n", "data": None}).to_dict()["data"] is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1.0, 1), (7, 7), (-2147483648.0, -2147483648), (4294967295.0, 4294967295),
     (4294967296.0, 4294967296.0), (1.5, 1.5), (1.7e12, 1.7e12)],
)
def test_wire_number(value: float, expected: Any) -> None:
    out = wire_number(value)
    assert out == expected and type(out) is type(expected)


# -- model tests -------------------------------------------------------------------------------------

VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.floats(allow_nan=False), st.text()),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=8,
)
OPTIONS = st.fixed_dictionaries({"name": st.text(min_size=1, max_size=10)}, optional={
    "data": VALUES, "priority": st.integers(0, 1000), "delay": st.integers(0, 10**6),
    "maxAttempts": st.integers(1, 10), "backoff": st.integers(0, 10**5), "lifo": st.booleans(),
    "timeout": st.integers(0, 10**6), "tags": st.lists(st.text(min_size=1, max_size=5), max_size=3),
    "removeOnComplete": st.booleans(), "uniqueKey": st.text(min_size=1, max_size=8),
    "groupId": st.text(min_size=1, max_size=8), "stallTimeout": st.integers(1, 10**6),
})


@settings(max_examples=200, deadline=None)
@given(opts=OPTIONS, state=st.integers(0, 7), notes=st.integers(0, 30))
def test_the_storage_row_and_the_wire_form_give_the_same_job_back(opts: dict[str, Any], state: int,
                                                                   notes: int) -> None:
    job = build(opts)
    job.state = state
    job.timeline = [{"state": "waiting", "timestamp": NOW}]
    for n in range(notes):
        job.note({"state": "waiting", "timestamp": NOW + n})
    again = Job.from_record(job.to_record())
    assert again.to_dict() == job.to_dict()
    assert (again.seq, again.state, again.pending_deps) == (job.seq, job.state, job.pending_deps)
    wired = Job.from_wire(job.to_dict(), job.seq, state)
    assert wired.to_dict() == job.to_dict()
    assert (wired.data is NO_DATA) == ("data" not in opts)


@settings(max_examples=200, deadline=None)
@given(notes=st.lists(st.tuples(st.integers(0, 1), st.integers()), max_size=3 * TIMELINE_CAP))
def test_timelines_shared_at_admission_grow_apart_like_bounded_lists(notes: list[tuple[int, int]]) -> None:
    """Two jobs admitted together share their first timeline; each then keeps its own newest
    ``TIMELINE_CAP`` entries, as a plain list cut to that length would."""
    jobs = [build({"name": "a"}), build({"name": "b"})]
    waiting = {"state": "waiting", "timestamp": NOW}
    admit_ready(jobs, 0, {}, ReadyQueue(), NOW, states.READY, waiting, {"state": "prioritized"}, None, [])
    assert jobs[0].timeline is jobs[1].timeline
    models: list[list[Any]] = [[waiting], [waiting]]
    for which, value in notes:
        entry = {"n": value}
        jobs[which].note(entry)
        models[which] = (models[which] + [entry])[-TIMELINE_CAP:]
        assert [job.timeline for job in jobs] == models
