"""Batch admission: building a PUSHB's jobs, finding those that need checks, and queueing the plain ones,
with a model test against job-by-job admission."""
from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bunqueue._core.admission import admit_ready, build_batch, needing_checks
from bunqueue._core.jobfactory import JobFactory
from bunqueue._core.jobs import Job
from bunqueue._core.readyqueue import ReadyQueue
from bunqueue.errors import CommandError

NOW = 1_800_000_000_000.0
READY = 7
WAITING = {"state": "waiting", "timestamp": NOW}
PRIORITIZED = {"state": "prioritized", "timestamp": NOW}


def build(maps: list[Any], check_size: bool = False) -> list[Job]:
    return build_batch(JobFactory(), maps, "q", NOW, check_size)


def test_build_batch_builds_in_order_with_batch_rules() -> None:
    jobs = build([{"name": "a"}, {"name": "b", "customId": "c1", "priority": 2}])
    assert [job.name for job in jobs] == ["a", "b"]
    assert jobs[0].seq < jobs[1].seq
    # In a batch the custom id is `customId` (PUSH reads `jobId`).
    assert jobs[1].custom_id == "c1" and jobs[1].id == "c1" and jobs[1].priority == 2


@pytest.mark.parametrize(
    ("maps", "error"),
    [
        ([{"name": "a"}, "x"], "jobs[1]: job must be an object"),
        ([{"name": "a"}, {"name": "b", "priority": "high"}], "jobs[1]: priority must be a number"),
        ([{"name": ""}], "jobs[0]: Job name must be a non-empty string of at most 256 characters"),
    ],
)
def test_build_batch_names_the_first_bad_position(maps: list[Any], error: str) -> None:
    with pytest.raises(CommandError) as caught:
        build(maps)
    assert caught.value.message == error


def test_build_batch_checks_data_size_only_when_asked() -> None:
    big = {"name": "a", "data": "x" * (10 * 1024 * 1024 + 1)}
    assert len(build([big])) == 1
    with pytest.raises(CommandError) as caught:
        build([{"name": "ok"}, big], check_size=True)
    assert caught.value.message == "jobs[1]: Job data too large (max 10MB)"


def test_needing_checks_lists_jobs_with_broker_checks() -> None:
    jobs = build([
        {"name": "plain"}, {"name": "c", "customId": "x"}, {"name": "u", "uniqueKey": "k"},
        {"name": "d", "dependsOn": ["x"]}, {"name": "r", "repeat": {"every": 1000}}, {"name": "g", "groupId": "g"},
        {"name": "p", "priority": 3, "delay": 10, "lifo": True}, {"name": "child", "parentId": "parent"},
    ])
    assert needing_checks(jobs) == [1, 2, 3, 4, 5, 7]


def admit(jobs: list[Job], start: int = 0) -> tuple[tuple[int, int], dict[str, Job], ReadyQueue, list[str]]:
    index: dict[str, Job] = {}
    ready = ReadyQueue()
    added: list[Job] = []
    ids: list[str] = []
    result = admit_ready(jobs, start, index, ready, NOW, READY, WAITING, PRIORITIZED, added.append, ids)
    assert added == jobs[start:result[0]]
    return result, index, ready, ids


def test_admit_ready_stops_at_the_first_job_that_is_not_plain() -> None:
    jobs = build([{"name": "a"}, {"name": "b", "priority": 1}, {"name": "late", "delay": 5}, {"name": "c"}])
    (stop, prioritized), index, ready, ids = admit(jobs)
    assert (stop, prioritized) == (2, 1)
    assert ids == [jobs[0].id, jobs[1].id] and list(index) == ids
    assert ready.pop_many(5) == [jobs[1].id, jobs[0].id]
    assert [job.state for job in jobs[:2]] == [READY, READY]
    assert jobs[0].timeline == [WAITING] and jobs[1].timeline == [PRIORITIZED]
    assert jobs[0].timeline[0] is WAITING and jobs[1].timeline[0] is PRIORITIZED
    assert jobs[2].state == 0 and jobs[2].timeline is None
    (stop, prioritized), _, _, ids = admit(jobs, 3)
    assert (stop, prioritized) == (4, 0) and ids == [jobs[3].id]


def test_admitted_jobs_share_a_timeline_until_one_of_them_changes_state() -> None:
    jobs = build([{"name": "a"}, {"name": "b"}, {"name": "c", "priority": 1}, {"name": "d", "priority": 2}])
    admit(jobs)
    assert jobs[0].timeline is jobs[1].timeline and jobs[2].timeline is jobs[3].timeline
    active = {"state": "active", "timestamp": NOW + 1}
    jobs[0].note(active)
    assert jobs[0].timeline == [WAITING, active] and jobs[1].timeline == [WAITING]
    jobs[0].note(active)
    assert jobs[0].timeline == [WAITING, active, active] and jobs[1].timeline == [WAITING]
    jobs[3].note(active)
    assert jobs[3].timeline == [PRIORITIZED, active] and jobs[2].timeline == [PRIORITIZED]


def test_admit_ready_without_a_store_hook_admits_the_same() -> None:
    jobs = build([{"name": "a"}, {"name": "b", "priority": 1}])
    ids: list[str] = []
    index: dict[str, Job] = {}
    assert admit_ready(jobs, 0, index, ReadyQueue(), NOW, READY, WAITING, PRIORITIZED, None, ids) == (2, 1)
    assert ids == [job.id for job in jobs] == list(index)


def test_admit_ready_refuses_what_is_not_a_job() -> None:
    with pytest.raises(TypeError):
        admit_ready(["x"], 0, {}, ReadyQueue(), NOW, READY, WAITING, PRIORITIZED, lambda job: None, [])


JOB_MAPS = st.lists(
    st.fixed_dictionaries(
        {"name": st.just("j")},
        optional={
            "priority": st.integers(0, 3),
            "lifo": st.booleans(),
            "delay": st.sampled_from([0, 0, 5]),
            "customId": st.sampled_from(["a", "b"]),
            "groupId": st.just("g"),
            "timestamp": st.sampled_from([NOW - 10, NOW + 10]),
        },
    ),
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(maps=JOB_MAPS)
def test_admit_ready_matches_job_by_job_admission(maps: list[dict[str, Any]]) -> None:
    """Admitting runs with admit_ready, and each job it stops at one by one, queues what pushing every
    plain job into a ReadyQueue in order does."""
    jobs = build(maps)
    index: dict[str, Job] = {}
    ready = ReadyQueue()
    ids: list[str] = []
    model = ReadyQueue()
    plain = []
    start = 0
    while start < len(jobs):
        stop, _ = admit_ready(jobs, start, index, ready, NOW, READY, WAITING, PRIORITIZED, lambda job: None, ids)
        start = stop + 1
    for job in jobs:
        if job.custom_id is None and job.group_id is None and job.run_at <= NOW:
            plain.append(job.id)
            model.push(job.id, job.priority, job.lifo, job.run_at, job.seq)
    assert ids == plain and list(index) == plain
    assert ready.pop_many(len(jobs)) == model.pop_many(len(jobs))
    for job in jobs:
        admitted = job.id in index
        assert job.state == (READY if admitted else 0)
        assert job.timeline == ([PRIORITIZED if job.priority > 0 else WAITING] if admitted else None)
    # Each admitted job's next state is its own, whichever jobs share its first entry's list.
    for job in jobs:
        if job.id in index:
            job.note({"state": "active", "timestamp": NOW, "job": job.id})
    for job in jobs:
        if job.id in index:
            first = PRIORITIZED if job.priority > 0 else WAITING
            assert job.timeline == [first, {"state": "active", "timestamp": NOW, "job": job.id}]
