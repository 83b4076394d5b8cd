"""The PostgreSQL hot path on a real server: claim order, exactly-once claims under concurrency (one broker
and two), lease tokens, lease expiry, idempotent pushes and wake-ups across brokers."""
from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from bunqueue import errors
from bunqueue._core.jobfactory import JobFactory
from bunqueue._core.jobs import Job
from bunqueue._core.readyqueue import ReadyQueue
from bunqueue.broker import states
from bunqueue.broker.timers.cronregistry import SPAWNED_KEY_PREFIX
from bunqueue.config import Settings
from bunqueue.errors import CommandError
from bunqueue.storage.postgres.hotpath import LATE, HotPath
from bunqueue.storage.postgres.migrations import migrate
from bunqueue.storage.postgres.pool import PostgresConfig, connect
from bunqueue.storage.schema import unpack

NS = "ns-hot"
TTL = 30_000


def _config(url: str, broker_id: str, poll_ms: int = 5000) -> PostgresConfig:
    return PostgresConfig.from_settings(Settings(
        postgres_url=url, broker_id=broker_id, postgres_namespace=NS, postgres_pool_size=6,
        postgres_poll_interval_ms=poll_ms,
    ))


async def _open(url: str, broker_id: str, poll_ms: int = 5000) -> HotPath:
    config = _config(url, broker_id, poll_ms)
    conn = await connect(config)
    try:
        await migrate(conn)
    finally:
        await conn.close()
    return await HotPath.open(config)


@pytest.fixture
async def hot(postgres_url: str) -> AsyncIterator[HotPath]:
    path = await _open(postgres_url, "b1")
    yield path
    await path.close()


@pytest.fixture
def factory() -> JobFactory:
    return JobFactory()


def _build(factory: JobFactory, queue: str = "q", batch: bool = True, **opts: Any) -> Job:
    return factory.build({"name": "j", "data": {}, **opts}, queue, time.time() * 1000, batch)


async def _row(hot: HotPath, job_id: str) -> asyncpg.Record:
    return await hot.pool.fetchrow(
        "SELECT state, attempts, lease_token, lease_session, lease_broker, worker_id, lease_expires_at - started_at"
        " AS ttl, stall_count, run_at, started_at FROM bunqueue_jobs WHERE namespace = $1 AND id = $2", NS, job_id,
    )


async def test_claims_follow_the_memory_engines_order(hot: HotPath, factory: JobFactory) -> None:
    rng = random.Random(7)
    now = time.time() * 1000
    jobs = [
        _build(factory, priority=rng.choice([0, 0, 1, 5]), lifo=rng.random() < 0.3,
               timestamp=now - rng.randrange(0, 5) * 1000)
        for _ in range(200)
    ]
    await hot.push_many(jobs)
    memory = ReadyQueue()
    for job in jobs:
        memory.push(job.id, job.priority, job.lifo, job.run_at, job.seq)
    expected = memory.pop_many(len(jobs))
    claimed: list[str] = []
    for count in (1, 7, 50, 200):
        taken, tokens = await hot.claim("q", count, "w", TTL)
        assert len(tokens) == len(taken)
        claimed += [job.id for job in taken]
    assert claimed == expected
    # A delayed job is not claimable before its time.
    await hot.push(_build(factory, delay=60_000))
    assert await hot.claim("q", 5, "w", TTL) == ([], [])


async def test_a_claim_leases_each_job_under_the_brokers_session(hot: HotPath, factory: JobFactory) -> None:
    job = _build(factory, batch=False, jobId="custom-1", priority=3)
    assert await hot.push(job) == "custom-1"
    (claimed,), (token,) = await hot.claim("q", 1, "worker-7", 4000)
    assert (claimed.id, claimed.state, claimed.attempts, claimed.priority, claimed.name) == (
        "custom-1", states.ACTIVE, 0, 3, "j")
    row = await _row(hot, "custom-1")
    assert (row["state"], row["attempts"], row["lease_token"], row["lease_session"], row["lease_broker"],
            row["worker_id"], row["ttl"]) == (states.ACTIVE, 1, token, hot.session.token, "b1", "worker-7", 4000)


async def test_ten_thousand_jobs_fifty_claimers_each_claimed_once(hot: HotPath, factory: JobFactory) -> None:
    pushed: list[str] = []
    for start in range(0, 10_000, 100):
        batch = [_build(factory, data={"i": i}) for i in range(start, start + 100)]
        pushed += await hot.push_many(batch)
    assert len(set(pushed)) == 10_000
    seen: list[str] = []

    async def claimer(n: int) -> None:
        while True:
            taken, tokens = await hot.claim("q", 1 + n % 5, f"w{n}", TTL)
            if not taken:
                return
            seen.extend(job.id for job in taken)
            for job, token in zip(taken, tokens):
                await hot.ack(job.id, token, {"n": n}, True)

    await asyncio.gather(*(claimer(n) for n in range(50)))
    assert len(seen) == 10_000 and set(seen) == set(pushed)
    counts = await hot.pool.fetch(
        "SELECT state, count(*) AS n FROM bunqueue_jobs WHERE namespace = $1 GROUP BY state", NS)
    assert {row["state"]: row["n"] for row in counts} == {states.COMPLETED: 10_000}
    result = await hot.pool.fetchval(
        "SELECT result FROM bunqueue_results WHERE namespace = $1 AND job_id = $2", NS, pushed[0])
    assert "n" in unpack(result)


async def test_two_brokers_claiming_one_queue_never_claim_a_job_twice(postgres_url: str, factory: JobFactory) -> None:
    b1 = await _open(postgres_url, "b1")
    b2 = await _open(postgres_url, "b2")
    try:
        pushed = set()
        for _ in range(20):
            pushed.update(await b1.push_many([_build(factory) for _ in range(100)]))
        by_broker: dict[str, list[str]] = {"b1": [], "b2": []}

        async def claimer(broker: HotPath) -> None:
            while True:
                taken, _tokens = await broker.claim("q", 3, "w", TTL)
                if not taken:
                    return
                by_broker[broker.session.broker_id].extend(job.id for job in taken)

        await asyncio.gather(*(claimer(b) for b in (b1, b2) for _ in range(10)))
        both = by_broker["b1"] + by_broker["b2"]
        assert len(both) == len(set(both)) == 2000 and set(both) == pushed
        assert by_broker["b1"] and by_broker["b2"]
        leased = await b1.pool.fetch(
            "SELECT lease_broker, count(*) AS n FROM bunqueue_jobs WHERE namespace = $1 GROUP BY lease_broker", NS)
        assert {row["lease_broker"]: row["n"] for row in leased} == {
            "b1": len(by_broker["b1"]), "b2": len(by_broker["b2"])}
    finally:
        await b1.close()
        await b2.close()


async def test_an_ack_or_fail_with_a_stale_or_wrong_token_is_refused(hot: HotPath, factory: JobFactory) -> None:
    job_id = await hot.push(_build(factory))
    (_job,), (token,) = await hot.claim("q", 1, "w", TTL)
    for bad, text in (
        ("not-the-token", errors.invalid_lock_token(job_id)),
        (None, errors.lock_token_required(job_id)),
    ):
        with pytest.raises(CommandError) as refused:
            await hot.ack(job_id, bad)
        assert str(refused.value) == text
        with pytest.raises(CommandError) as refused:
            await hot.fail(job_id, bad)
        assert str(refused.value) == text
    with pytest.raises(CommandError) as refused:
        await hot.ack("no-such-job", token)
    assert str(refused.value) == errors.not_processing("no-such-job")
    # Acks of one job in one batch, the wrong token first: the right token completes it, and the wrong one
    # is judged after it, as a late ack.
    outcomes = await asyncio.gather(hot.ack(job_id, "wrong"), hot.ack(job_id, token), return_exceptions=True)
    assert outcomes[1] == "q" and str(outcomes[0]) == errors.not_processing(job_id)
    assert (await _row(hot, job_id))["state"] == states.COMPLETED
    # The token is spent: a second ack finds the job no longer running.
    with pytest.raises(CommandError) as refused:
        await hot.ack(job_id, token)
    assert str(refused.value) == errors.not_processing(job_id)


async def test_a_failed_attempt_is_retried_until_attempts_run_out(hot: HotPath, factory: JobFactory) -> None:
    # No backoff: the retry is ready at once.
    job_id = await hot.push(_build(factory, maxAttempts=2, backoff=0))
    final_id = await hot.push(_build(factory, maxAttempts=5))
    (first, second), (t1, t2) = await hot.claim("q", 2, "w", TTL)
    assert [first.id, second.id] == [job_id, final_id]
    assert (await hot.fail(job_id, t1))[0] == states.READY
    assert (await hot.fail(final_id, t2, final=True))[0] == states.FAILED
    (again,), (t3,) = await hot.claim("q", 5, "w", TTL)
    assert (again.id, again.attempts) == (job_id, 1)
    assert (await hot.fail(job_id, t3))[0] == states.FAILED
    assert [(await _row(hot, i))["state"] for i in (job_id, final_id)] == [states.FAILED, states.FAILED]


async def test_expired_leases_return_their_jobs_to_ready_in_one_sweep(hot: HotPath, factory: JobFactory) -> None:
    ids = await hot.push_many([_build(factory) for _ in range(5)])
    short, short_tokens = await hot.claim("q", 3, "w", 50)
    long, _ = await hot.claim("q", 2, "w", TTL)
    await asyncio.sleep(0.15)
    returned = await hot.expire_leases()
    assert sorted(returned) == sorted((job.id, "q") for job in short)
    assert await hot.expire_leases() == []
    # A FAIL of a lapsed attempt changes nothing: its job already waits again, the attempt charged.
    assert await hot.fail(short[0].id, short_tokens[0]) is LATE
    assert [(await _row(hot, job.id))["stall_count"] for job in short] == [1, 1, 1]
    again, _ = await hot.claim("q", 10, "w", TTL)
    assert [job.id for job in again] == [job.id for job in short]
    assert [job.attempts for job in again] == [1, 1, 1]
    assert {job.id for job in long} | {job.id for job in again} == set(ids)


async def test_a_lapsed_lease_of_a_cron_job_deletes_it(hot: HotPath, factory: JobFactory) -> None:
    job_id = await hot.push(_build(factory, uniqueKey=f"{SPAWNED_KEY_PREFIX}nightly"))
    await hot.claim("q", 1, "w", 50)
    await asyncio.sleep(0.15)
    assert await hot.expire_leases() == [(job_id, "q")]
    assert await _row(hot, job_id) is None


async def test_a_late_ack_completes_a_job_that_waits_after_its_lease_lapsed(hot: HotPath, factory: JobFactory) -> None:
    job_id = await hot.push(_build(factory))
    _, (token,) = await hot.claim("q", 1, "w", 50)
    await asyncio.sleep(0.15)
    assert await hot.expire_leases() == [(job_id, "q")]
    await hot.ack(job_id, token, "late", True)
    row = await _row(hot, job_id)
    assert (row["state"], row["attempts"]) == (states.COMPLETED, 1)
    with pytest.raises(CommandError) as refused:
        await hot.ack(job_id, token)
    assert str(refused.value) == errors.not_processing(job_id)


async def test_a_failure_with_attempts_left_waits_its_backoff(hot: HotPath, factory: JobFactory) -> None:
    job_id = await hot.push(_build(factory, backoff=2000))
    _, (token,) = await hot.claim("q", 1, "w", TTL)
    before = time.time() * 1000
    assert (await hot.fail(job_id, token, error="boom"))[0] == states.DELAYED
    row = await _row(hot, job_id)
    # Exponential: 2000 * 2^1 with +-50 % jitter.
    assert before + 2000 - 50 <= row["run_at"] <= time.time() * 1000 + 6000
    assert (row["lease_token"], row["started_at"]) == (None, None)
    assert await hot.promote_due() == []
    assert (await hot.claim("q", 1, "w", TTL))[0] == []


async def test_a_due_delayed_job_is_claimed_before_the_promotion_runs(hot: HotPath, factory: JobFactory) -> None:
    job_id = await hot.push(_build(factory, delay=100, priority=1))
    ready_id = await hot.push(_build(factory))
    assert (await _row(hot, job_id))["state"] == states.DELAYED
    await asyncio.sleep(0.15)
    # Due, still DELAYED (no promotion ran), and claimed first by its priority, as the memory pull promotes it.
    claimed, _ = await hot.claim("q", 5, "w", TTL)
    assert [job.id for job in claimed] == [job_id, ready_id]


async def test_a_retried_batch_inserts_nothing_new_and_answers_the_same_ids(
    hot: HotPath, factory: JobFactory
) -> None:
    def batch() -> list[Job]:
        return [_build(factory, customId=f"c{i}") for i in range(50)] + [_build(factory, uniqueKey="k")]

    first = await hot.push_many(batch())
    again = await hot.push_many(batch())
    assert again == first and first[:50] == [f"c{i}" for i in range(50)]
    assert await hot.pool.fetchval("SELECT count(*) FROM bunqueue_jobs WHERE namespace = $1", NS) == 51
    # Within one batch too: the second job with a live key answers the first one's id.
    dup = await hot.push_many([_build(factory, uniqueKey="k2"), _build(factory, uniqueKey="k2")])
    assert dup[0] == dup[1]
    # A finished job gives its custom id up to a new push.
    (job,), (token,) = await hot.claim("q", 1, "w", TTL)
    assert job.id == "c0"
    await hot.ack("c0", token)
    assert await hot.push(_build(factory, customId="c0")) == "c0"
    assert (await _row(hot, "c0"))["state"] == states.READY


class _HolderFinishesFirst(HotPath):
    """A hot path whose first look-up of holders comes after another broker deleted them (the window between
    a push's insert and its look-up, made certain)."""

    finished = False

    async def _holders(self, conn: asyncpg.Connection, columns: Any, left_out: list[int]) -> dict[int, str]:
        if not self.finished:
            self.finished = True
            await self.pool.execute("DELETE FROM bunqueue_jobs WHERE namespace = $1 AND id = 'held'", NS)
        return await super()._holders(conn, columns, left_out)


async def test_a_push_whose_holder_finished_before_the_look_up_is_pushed_again(
    postgres_url: str, factory: JobFactory
) -> None:
    opened = await _open(postgres_url, "b-again")
    hot = _HolderFinishesFirst(opened.pool, opened.session, opened.wakeups, 5000)
    try:
        assert await hot.push(_build(factory, customId="held")) == "held"
        ids = await hot.push_many([_build(factory, customId="held", data=2), _build(factory)])
        assert ids[0] == "held" and hot.finished
        record = await hot.pool.fetchval("SELECT record FROM bunqueue_jobs WHERE namespace = $1 AND id = 'held'", NS)
        assert Job.from_record(unpack(record)).data == 2
    finally:
        await hot.close()


async def test_a_push_wakes_a_puller_of_another_broker_before_its_poll(postgres_url: str, factory: JobFactory) -> None:
    b1 = await _open(postgres_url, "b1")
    b2 = await _open(postgres_url, "b2", poll_ms=5000)
    try:
        loop = asyncio.get_running_loop()
        waiting = loop.create_task(b2.claim_wait("q", 1, "w", TTL, timeout_ms=20_000))
        await asyncio.sleep(0.3)
        assert not waiting.done()
        pushed_at = loop.time()
        job_id = await b1.push(_build(factory))
        (job,), _ = await asyncio.wait_for(waiting, 10)
        woke_after = loop.time() - pushed_at
        assert job.id == job_id and b2.wakeups.received >= 1
        # Well before the 5 s poll: the notification, not the poll, woke it.
        assert woke_after < 2.5
    finally:
        await b1.close()
        await b2.close()


async def test_a_broker_whose_session_is_gone_claims_nothing(hot: HotPath, factory: JobFactory) -> None:
    await hot.push(_build(factory))
    await hot.pool.execute("DELETE FROM bunqueue_broker_sessions WHERE namespace = $1", NS)
    assert await hot.claim("q", 1, "w", TTL) == ([], [])
    assert (await hot.pool.fetchval("SELECT state FROM bunqueue_jobs WHERE namespace = $1", NS)) == states.READY


async def test_pulls_served_by_one_claim_take_the_best_jobs_in_arrival_order(
    hot: HotPath, factory: JobFactory
) -> None:
    ids = await hot.push_many([_build(factory, priority=p) for p in range(30)])
    best_first = ids[::-1]
    # Submitted together, so one flush (one statement) serves them all.
    pulls = await asyncio.gather(*(hot.claim("q", n, f"w{n}", 1000 * n) for n in (1, 3, 2, 4)))
    assert [[job.id for job in jobs] for jobs, _ in pulls] == [
        best_first[0:1], best_first[1:4], best_first[4:6], best_first[6:10]]
    for n, (jobs, tokens) in zip((1, 3, 2, 4), pulls):
        for job, token in zip(jobs, tokens):
            row = await _row(hot, job.id)
            assert (row["worker_id"], row["ttl"], row["lease_token"]) == (f"w{n}", 1000 * n, token)


async def test_an_end_notifies_only_queues_where_it_frees_a_slot_a_held_pull_may_take(
    hot: HotPath, factory: JobFactory, postgres_url: str
) -> None:
    listener = await connect(_config(postgres_url, "listener"))
    heard: list[str] = []
    await listener.add_listener("bunqueue", lambda _conn, _pid, _channel, payload: heard.append(payload))
    await hot.pool.execute(
        "INSERT INTO bunqueue_queues (namespace, queue, concurrency) VALUES ($1, 'limited', 1)", NS)
    try:
        async def ended(queue: str, end: str, groups: tuple[str | None, ...] = (None, None)) -> list[Any]:
            """Push a job in each of ``groups`` (None: ungrouped), run the first, end it (ack, fail or lapse):
            the queues notified by the end."""
            await hot.push_many([_build(factory, queue, groupId=group) for group in groups])
            (job,), (token,) = await hot.claim(queue, 1, "w", 200 if end == "lapse" else TTL)
            await asyncio.sleep(0.2)
            heard.clear()
            if end == "ack":
                await hot.ack(job.id, token)
            elif end == "fail":
                await hot.fail(job.id, token, error="boom")
            else:
                await asyncio.sleep(0.3)
                assert await hot.expire_leases() == [(job.id, queue)]
            await asyncio.sleep(0.2)
            return [json.loads(payload) for payload in heard]

        # No limit and no group: an ack notifies no one (a fail's retry waits its backoff).
        assert await ended("free", "ack") == []
        assert await ended("free-fail", "fail") == []
        assert await ended("limited", "ack") == [[NS, "limited"]]
        assert await ended("limited", "fail") == [[NS, "limited"]]
        # A group with a ready job gets a slot back; one whose jobs all run has nothing for a pull to take.
        assert await ended("grouped", "ack", ("G", "G")) == [[NS, "grouped"]]
        assert await ended("grouped-fail", "fail", ("G", "G")) == [[NS, "grouped-fail"]]
        assert await ended("one-each", "ack", ("A", "B")) == []
        # A lapsed lease returns its job to ready: that notifies the queue in any case.
        assert await ended("lapsed", "lapse", ("A", "B")) == [[NS, "lapsed"]]
    finally:
        await listener.close()
