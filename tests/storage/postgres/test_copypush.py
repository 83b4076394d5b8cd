"""Plain pushes by binary COPY (``copypush``): the rows it writes are the INSERT's, in the push's order, the
wake-up still reaches another broker, and a collision falls back to the INSERT's answer."""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from bunqueue._core.jobfactory import JobFactory
from bunqueue._core.jobs import Job
from bunqueue.broker import states
from bunqueue.broker.clock import now_ms
from bunqueue.storage.postgres import copypush, statements
from bunqueue.storage.postgres.hotpath import HotPath, PushLost
from bunqueue.storage.postgres.jobfamily import PostgresJobs, admitted
from bunqueue.storage.postgres.jobrows import stored_columns, stored_job
from bunqueue.storage.schema import pack
from tests.storage.postgres.test_hotpath import NS, TTL, _build, _open

# The columns a push writes, compared between the two ways in (id, seq and lifo_rank differ by design).
PUSHED = (
    "queue", "state", "priority", "lifo", "run_at", "created_at", "max_attempts", "group_id", "unique_key",
    "custom_id", "parent_id", "remove_on_complete", "attempts", "pending_deps",
)


class _Counted(HotPath):
    """A hot path that counts the COPY flushes it tried and those that went in."""

    tried = 0
    copies = 0

    async def _copy_pushes(self, batches: Sequence[Sequence[Job]], data: bytes) -> Any:
        self.tried += 1
        answers = await super()._copy_pushes(batches, data)  # type: ignore[arg-type]
        self.copies += 1
        return answers


@pytest.fixture
def factory() -> JobFactory:
    return JobFactory()


@pytest.fixture
async def hot(postgres_url: str) -> AsyncIterator[_Counted]:
    opened = await _open(postgres_url, "b-copy")
    path = _Counted(opened.pool, opened.session, opened.wakeups, 5000)
    yield path
    await path.close()


def _jobs(factory: JobFactory, queue: str, count: int, now: float) -> list[Job]:
    return [
        factory.build({"name": f"j{i}", "data": {"n": i, "s": "a\\b"}, "priority": i % 3, "lifo": i % 7 == 0,
                       "attempts": 1 + i % 4, "removeOnComplete": i % 2 == 0, "timestamp": now - i}, queue, now, True)
        for i in range(count)
    ]


def _comparable(job: Job) -> bytes:
    """The job's record without what differs by design (its id, queue and seq), packed: NaN times compare."""
    record = list(job.to_record())
    del record[-3], record[1:3]
    return pack(record)


async def _rows(hot: HotPath, queue: str) -> list[Any]:
    return await hot.pool.fetch(
        f"SELECT id, seq, {', '.join(PUSHED)}, {stored_columns('j')} FROM bunqueue_jobs j"
        " WHERE namespace = $1 AND queue = $2 ORDER BY seq", NS, queue,
    )


async def test_a_large_plain_flush_is_copied_with_the_rows_an_insert_writes(
    hot: _Counted, factory: JobFactory
) -> None:
    now = now_ms()
    count = copypush.COPY_MIN_JOBS + 36
    copied_ids = await hot.push_many(_jobs(factory, "c\\q\x00", count, now))
    assert hot.copies == 1
    inserted_ids: list[str] = []
    for at in range(0, count, 10):
        inserted_ids += await hot.push_many(_jobs(factory, "i\\q\x00", count, now)[at:at + 10])
    assert hot.copies == 1
    copied, inserted = await _rows(hot, "c\\q\x00"), await _rows(hot, "i\\q\x00")
    # Every id answered went in, in the push's order (seq), READY, with the INSERT's columns and record.
    assert [row["id"] for row in copied] == copied_ids and len(set(copied_ids)) == count
    assert [row["id"] for row in inserted] == inserted_ids
    for a, b in zip(copied, inserted):
        assert a["state"] == states.READY
        assert [a[name] for name in PUSHED[1:]] == [b[name] for name in PUSHED[1:]]
        assert _comparable(stored_job(a)) == _comparable(stored_job(b))
        assert stored_job(a).queue == "c\\q\x00" and stored_job(a).id == a["id"]
    # Claimed in the memory engine's order, the same for both.
    got_copied, _ = await hot.claim("c\\q\x00", count, "w", TTL)
    got_inserted, _ = await hot.claim("i\\q\x00", count, "w", TTL)
    assert [copied_ids.index(job.id) for job in got_copied] == [inserted_ids.index(job.id) for job in got_inserted]


async def test_a_flush_with_a_job_the_insert_must_judge_is_not_copied(hot: _Counted, factory: JobFactory) -> None:
    now = now_ms()
    count = copypush.COPY_MIN_JOBS
    first = await hot.push(_build(factory, "mixed"))
    # A batch names its own ids by customId (jobId is PUSH's).
    for opts in ({"customId": "own"}, {"uniqueKey": "k"}, {"delay": 60_000}, {"dependsOn": [first]}):
        jobs = _jobs(factory, "mixed", count - 1, now) + [admitted(_build(factory, "mixed", **opts), now)]
        assert len(await hot.push_many(jobs)) == count
    assert hot.tried == 0
    # Below the threshold, a plain flush is one INSERT too.
    await hot.push_many(_jobs(factory, "small", count - 1, now))
    assert hot.tried == 0


async def test_a_copied_flush_wakes_a_puller_of_another_broker_before_its_poll(
    hot: _Counted, postgres_url: str, factory: JobFactory
) -> None:
    other = await _open(postgres_url, "b-copy-2", poll_ms=5000)
    try:
        loop = asyncio.get_running_loop()
        waiting = loop.create_task(other.claim_wait("woken", 1, "w", TTL, timeout_ms=20_000))
        await asyncio.sleep(0.3)
        assert not waiting.done()
        pushed_at = loop.time()
        ids = await hot.push_many(_jobs(factory, "woken", copypush.COPY_MIN_JOBS, now_ms()))
        (job,), _ = await asyncio.wait_for(waiting, 10)
        assert hot.copies == 1 and job.id in ids and other.wakeups.received >= 1
        # Well before the 5 s poll: the notification, not the poll, woke it.
        assert loop.time() - pushed_at < 2.5
    finally:
        await other.close()


async def test_a_generated_id_already_stored_is_answered_as_the_insert_answers_it(
    hot: _Counted, factory: JobFactory
) -> None:
    assert await hot.push(_build(factory, "taken-q", customId="taken")) == "taken"
    jobs = _jobs(factory, "taken-q", copypush.COPY_MIN_JOBS, now_ms())
    record = list(jobs[3].to_record())
    record[1] = "taken"
    jobs[3] = Job.from_record(tuple(record))
    with pytest.raises(PushLost):
        await hot.push_many(jobs)
    # The COPY put nothing in; the INSERT put in every job but the one whose id was taken, as without COPY.
    assert (hot.tried, hot.copies) == (1, 0)
    count = await hot.pool.fetchval("SELECT count(*) FROM bunqueue_jobs WHERE namespace = $1 AND queue = 'taken-q'", NS)
    assert count == copypush.COPY_MIN_JOBS


async def test_a_wake_up_that_fails_after_the_commit_does_not_fail_the_push(
    hot: _Counted, factory: JobFactory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The jobs are in once the COPY committed: a push refused then would be pushed twice by a client's retry.
    monkeypatch.setattr(statements, "NOTIFY_QUEUES", "SELECT no_such_function($1, $2)")
    ids = await hot.push_many(_jobs(factory, "unannounced", copypush.COPY_MIN_JOBS, now_ms()))
    assert hot.copies == 1 and len(ids) == copypush.COPY_MIN_JOBS
    assert hot._announcer is not None
    await asyncio.wait_for(asyncio.shield(hot._announcer), 10)
    assert "wake-ups were not sent to the other brokers (1 queue)" in caplog.text
    stored = await hot.pool.fetchval(
        "SELECT count(*) FROM bunqueue_jobs WHERE namespace = $1 AND queue = 'unannounced'", NS)
    assert stored == copypush.COPY_MIN_JOBS
    # A puller of this broker was woken locally and finds them at once.
    jobs, _ = await hot.claim("unannounced", copypush.COPY_MIN_JOBS, "w", TTL)
    assert sorted(job.id for job in jobs) == sorted(ids)


async def test_requests_written_on_arrival_and_at_the_flush_go_in_one_copy_in_their_order(
    hot: _Counted, factory: JobFactory
) -> None:
    now = now_ms()
    sizes = (copypush.COPY_MIN_JOBS + 4, copypush.COPY_MIN_JOBS - 1, copypush.COPY_MIN_JOBS)
    batches = [_jobs(factory, "parts", size, now) for size in sizes]
    # Submitted together, they make one flush: two PUSHBs prepared on arrival around one that was not.
    answers = await asyncio.gather(*(hot.push_many(jobs) for jobs in batches))
    assert hot.copies == 1
    assert [len(ids) for ids in answers] == list(sizes)
    rows = await _rows(hot, "parts")
    assert [row["id"] for row in rows] == [job_id for ids in answers for job_id in ids]
    stored = [stored_job(row) for row in rows]
    assert [(job.id, job.name, job.data, job.priority, job.lifo) for job in stored] == [
        (job.id, job.name, job.data, job.priority, job.lifo) for jobs in batches for job in jobs]


@pytest.mark.parametrize("delayed", [False, True], ids=["copied", "inserted"])
async def test_a_batchs_jobs_each_keep_the_first_timeline_entry_of_the_state_they_entered(
    hot: _Counted, delayed: bool
) -> None:
    family = PostgresJobs(hot)
    kinds = [{}, {"priority": 5}] + ([{"delay": 60_000}] if delayed else [])
    items = [{"name": f"j{i}", **kinds[i % len(kinds)]} for i in range(copypush.COPY_MIN_JOBS + 6)]
    before = now_ms()
    ids = await family.push_many_async("timelines", items)
    assert hot.copies == (0 if delayed else 1)
    stored = {row["id"]: stored_job(row) for row in await _rows(hot, "timelines")}
    names = [states.WAITING, states.PRIORITIZED, states.DELAYED_NAME]
    for i, job_id in enumerate(ids):
        timeline = stored[job_id].timeline
        assert [entry["state"] for entry in timeline] == [names[i % len(kinds)]]
        assert before <= timeline[0]["timestamp"] <= now_ms()
