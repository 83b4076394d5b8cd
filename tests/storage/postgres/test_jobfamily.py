"""The job family through the real command runner, once on the memory engine and once on ``PostgresJobs``
over a real PostgreSQL: the same frames get the same replies, field by field (ids, tokens and times named
by their order of appearance), refusals included; a long-poll is woken by a push."""
from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import msgpack

from bunqueue import errors
from bunqueue._core.packer import ReplyPacker
from bunqueue._testbase.twins import Names
from bunqueue.broker.components import eventnames
from bunqueue.broker.facade import Broker
from bunqueue.broker.session import Session
from bunqueue.config import Settings
from bunqueue.monitoring.counters import Counters
from bunqueue.server.runner import CommandRunner
from bunqueue.storage import MemoryStore
from bunqueue.storage.postgres.hotpath import HotPath
from bunqueue.storage.postgres.jobevents import JobEvents
from bunqueue.storage.postgres.jobfamily import PostgresJobs
from bunqueue.storage.postgres.migrations import migrate
from bunqueue.storage.postgres.pool import PostgresConfig, connect

Reply = dict[str, Any]
# Far longer than any test waits: a long-poll answered in time was woken, not polled.
POLL_MS = 30_000


class BrokerOverPostgresJobs(Broker):
    """The memory engine for everything but the job family, which ``jobs`` answers."""

    awaits_jobs = True

    def __init__(self, jobs: PostgresJobs) -> None:
        super().__init__()
        self.push_async = jobs.push_async
        self.push_many_async = jobs.push_many_async
        self.pull_async = jobs.pull_async
        self.ack_async = jobs.ack_async
        self.fail_async = jobs.fail_async
        self.ack_batch_async = jobs.ack_batch_async


class Connection:
    """A client as the runner sees one: replies that come later are queued for ``reply``."""

    def __init__(self, runner: CommandRunner) -> None:
        self.runner = runner
        self.session: Session = runner.new_session()
        self.limiter = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.closed = False
        self.later: asyncio.Queue[Reply] = asyncio.Queue()

    def deliver(self, replies: list[Reply]) -> None:
        for reply in replies:
            self.later.put_nowait(reply)

    def task_done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)

    def send(self, request: Reply) -> Reply | None:
        return self.runner.run(dict(request), self)

    async def reply(self, sent: Reply | None, timeout: float = 5.0) -> Reply:
        """The wire form of a reply: the one ``send`` returned, else the next delivered."""
        reply = sent if sent is not None else await asyncio.wait_for(self.later.get(), timeout)
        decoded: Reply = msgpack.unpackb(ReplyPacker().pack(reply), raw=False)
        return decoded

    async def call(self, request: Reply) -> Reply:
        return await self.reply(self.send(request))


Scenario = Callable[[CommandRunner], Awaitable[list[Reply]]]


async def _memory_replies(scenario: Scenario) -> list[Reply]:
    broker = Broker()
    return await scenario(CommandRunner(broker, MemoryStore(), frozenset()))


@asynccontextmanager
async def _hot_path(url: str, namespace: str) -> AsyncIterator[HotPath]:
    """A hot path over a migrated database, closed after use."""
    config = PostgresConfig.from_settings(Settings(
        postgres_url=url, broker_id="b1", postgres_namespace=namespace, postgres_pool_size=4,
        postgres_poll_interval_ms=POLL_MS,
    ))
    conn = await connect(config)
    try:
        await migrate(conn)
    finally:
        await conn.close()
    hot = await HotPath.open(config)
    try:
        yield hot
    finally:
        await hot.close()


async def _postgres_replies(url: str, scenario: Scenario) -> list[Reply]:
    async with _hot_path(url, "ns-jobs") as hot:
        broker = BrokerOverPostgresJobs(PostgresJobs(hot))
        return await scenario(CommandRunner(broker, MemoryStore(), frozenset()))


async def _both(url: str, scenario: Scenario) -> tuple[list[Reply], list[Reply]]:
    memory = await _memory_replies(scenario)
    postgres = await _postgres_replies(url, scenario)
    return Names()(memory), Names()(postgres)


def _assert_same(memory: list[Reply], postgres: list[Reply]) -> None:
    assert len(memory) == len(postgres)
    for i, (m, p) in enumerate(zip(memory, postgres)):
        assert p == m, f"reply {i}: memory {m!r}, postgres {p!r}"


async def _push_pull_ack_fail(runner: CommandRunner) -> list[Reply]:
    c = Connection(runner)
    out = [
        await c.call({"cmd": "PUSH", "queue": "q", "name": "a", "data": {"n": 1}, "reqId": "r1"}),
        await c.call({"cmd": "PUSHB", "queue": "q", "jobs": [
            {"name": "b", "data": {"n": 2}, "priority": 5}, {"name": "c", "data": {"n": 3}},
        ], "reqId": 2}),
    ]
    first = await c.call({"cmd": "PULL", "queue": "q", "owner": "w1", "reqId": "p1"})
    batch = await c.call({"cmd": "PULLB", "queue": "q", "count": 5, "owner": "w1", "lockTtl": 20_000})
    out += [first, batch]
    out.append(await c.call({"cmd": "ACK", "id": first["job"]["id"], "token": first["token"], "result": {"r": 1}}))
    # The same (id, token) again: the attempt is over.
    out.append(await c.call({"cmd": "ACK", "id": first["job"]["id"], "token": first["token"]}))
    # The priority-5 job came first; the batch holds the other two, in push order.
    a_id, c_id = (job["id"] for job in batch["jobs"])
    a_token, c_token = batch["tokens"]
    out.append(await c.call({"cmd": "FAIL", "id": a_id, "token": "not-the-lease", "error": "x"}))
    out.append(await c.call({"cmd": "ACK", "id": a_id}))
    out.append(await c.call({"cmd": "FAIL", "id": a_id, "token": a_token, "error": "boom", "unrecoverable": True}))
    out.append(await c.call({"cmd": "ACKB", "ids": [c_id, c_id], "tokens": [c_token, c_token]}))
    out.append(await c.call({"cmd": "ACKB", "ids": [c_id], "tokens": [c_token], "results": [7]}))
    out.append(await c.call({"cmd": "PULL", "queue": "q", "owner": "w2"}))
    out.append(await c.call({"cmd": "PUSHB", "queue": "q", "jobs": [{"name": "ok"}, 5]}))
    out.append(await c.call({"cmd": "PUSH", "queue": "q", "name": "big", "data": {}, "priority": "high"}))
    return out


async def test_push_pull_ack_fail_answer_as_in_memory(postgres_url: str) -> None:
    memory, postgres = await _both(postgres_url, _push_pull_ack_fail)
    _assert_same(memory, postgres)
    # What was compared is what the scenario meant to provoke.
    assert memory[0] == {"ok": True, "id": "<id0>", "reqId": "r1"}
    assert memory[2]["job"]["id"] == "<id1>" and memory[2]["token"] == "<token0>" and memory[2]["reqId"] == "p1"
    assert [job["id"] for job in memory[3]["jobs"]] == ["<id0>", "<id2>"]
    assert memory[5] == {"ok": False, "error": errors.not_processing("<id1>")}
    assert memory[6] == {"ok": False, "error": errors.invalid_lock_token("<id0>")}
    assert memory[7] == {"ok": False, "error": errors.lock_token_required("<id0>")}
    assert memory[8] == {"ok": True}
    assert memory[9] == {"ok": False, "error": errors.not_processing("<id2>")}
    assert memory[10] == {"ok": True}
    assert memory[11] == {"ok": True, "job": None, "token": None}
    assert not memory[12]["ok"] and not memory[13]["ok"]


async def _without_owner_and_removal(runner: CommandRunner) -> list[Reply]:
    c = Connection(runner)
    out = [await c.call({"cmd": "PUSHB", "queue": "q2", "jobs": [
        {"name": "a", "maxAttempts": 1}, {"name": "b", "removeOnComplete": True}, {"name": "c", "backoff": 0},
    ]})]
    pulled = await c.call({"cmd": "PULLB", "queue": "q2", "count": 3})
    out.append(pulled)
    a_id, b_id, c_id = (job["id"] for job in pulled["jobs"])
    out.append(await c.call({"cmd": "ACK", "id": b_id, "result": 1}))
    out.append(await c.call({"cmd": "FAIL", "id": a_id, "error": "e", "stack": ["at x"]}))
    out.append(await c.call({"cmd": "ACK", "id": a_id}))
    out.append(await c.call({"cmd": "FAIL", "id": c_id, "token": "any", "error": "retry"}))
    again = await c.call({"cmd": "PULL", "queue": "q2", "owner": "w"})
    out.append(again)
    out.append(await c.call({"cmd": "ACK", "id": c_id, "removeOnComplete": True}))
    out.append(await c.call({"cmd": "ACK", "id": c_id, "token": again["token"], "removeOnComplete": True}))
    out.append(await c.call({"cmd": "PULL", "queue": "q2"}))
    return out


async def test_a_pull_without_owner_and_removal_answer_as_in_memory(postgres_url: str) -> None:
    memory, postgres = await _both(postgres_url, _without_owner_and_removal)
    _assert_same(memory, postgres)
    assert "tokens" not in memory[1] or not memory[1]["tokens"]
    assert memory[2] == memory[3] == {"ok": True}
    assert memory[4] == {"ok": False, "error": errors.not_processing("<id0>")}
    assert memory[5] == {"ok": True}
    retried = memory[6]["job"]
    assert (retried["id"], retried["attempts"]) == ("<id2>", 1)
    assert [entry["state"] for entry in retried["timeline"]] == ["waiting", "active", "failed", "waiting", "active"]
    assert memory[7] == {"ok": False, "error": errors.lock_token_required("<id2>")}
    assert memory[8] == {"ok": True}
    assert memory[9]["job"] is None


async def _long_poll(runner: CommandRunner) -> list[Reply]:
    worker, producer = Connection(runner), Connection(runner)
    empty = await worker.call({"cmd": "PULLB", "queue": "lp", "count": 2, "owner": "w"})
    assert worker.send({"cmd": "PULL", "queue": "lp", "owner": "w", "timeout": 10_000, "reqId": 9}) is None
    await asyncio.sleep(0.3)  # the pull is waiting before the push lands
    assert worker.later.empty()
    started = time.monotonic()
    pushed = await producer.call({"cmd": "PUSH", "queue": "lp", "name": "wake", "data": None})
    woken = await worker.reply(None)
    # Answered by the wake-up, not by the poll interval or the timeout.
    assert time.monotonic() - started < 3.0
    expired = await worker.call({"cmd": "PULL", "queue": "lp", "owner": "w", "timeout": 200})
    return [empty, pushed, woken, expired]


async def test_a_long_poll_is_woken_by_a_push_as_in_memory(postgres_url: str) -> None:
    memory, postgres = await _both(postgres_url, _long_poll)
    _assert_same(memory, postgres)
    assert memory[0] == {"ok": True, "jobs": [], "tokens": []}
    assert memory[2]["reqId"] == 9 and memory[2]["job"]["id"] == "<id0>" and memory[2]["token"] == "<token0>"
    assert memory[3] == {"ok": True, "job": None, "token": None}


async def test_an_ack_that_finishes_a_flow_answers_after_the_flow_is_told(postgres_url: str) -> None:
    """As in memory, flow:completed is told before the reply to the ACK that finished the flow: a client that
    acts on the reply (a Drain, a push) is told of its own effects after it. The look-up of finished flows
    is a round trip of its own; the ACK waits for it."""
    async with _hot_path(postgres_url, "ns-flows") as hot:
        broker = Broker()
        jobs = PostgresJobs(hot, job_events=JobEvents(Counters(), broker.events.emit, broker.events.emit_many,
                                                      hub=broker.events))
        told: list[str] = []
        watched = {eventnames.JOB_DEPENDENCIES_RESOLVED, eventnames.FLOW_COMPLETED}
        broker.events.notices.append(lambda name, data: told.append(name) if name in watched else None)
        for _ in range(3):
            told.clear()
            kid = await jobs.push_async("kids", {"name": "kid", "data": {}})
            await jobs.push_async("parents", {"name": "parent", "data": {}, "dependsOn": [kid],
                                              "childrenIds": [kid]})
            (pulled,), tokens = await jobs.pull_async("kids", 1, Session(), "w", 30_000, 0)
            assert tokens is not None
            assert await jobs.ack_async(pulled.id, tokens[0], None, False, False) == {"ok": True}
            assert told == [eventnames.JOB_DEPENDENCIES_RESOLVED, eventnames.FLOW_COMPLETED]
