"""Several brokers on one PostgreSQL, as the issue's bar sets them: three brokers working 20,000 jobs with one
killed at 40%, two brokers under load while PostgreSQL goes away for 3 s, twice, and a broker whose session
lapsed while PostgreSQL was away."""
from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest

from benchmarks.brokers import run_brokers
from bunqueue._testbase.postgres import PostgresServer
from bunqueue._testbase.server import ServerProcess
from bunqueue.broker import states
from bunqueue.client import Connection, connect

LOCK_TTL_MS = 5_000
STATEMENT_TIMEOUT_MS = 2_000
# What a command may take while the database is away: its statement limit, and the client's slack.
COMMAND_LIMIT_S = STATEMENT_TIMEOUT_MS / 1000 + 3


@contextlib.contextmanager
def brokers_on(url: str, count: int, **env: str) -> Iterator[list[ServerProcess]]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("BUNQUEUE_", "DATA_PATH"))}
    servers = []
    try:
        for _ in range(count):
            servers.append(ServerProcess(env={
                **base, "RATE_LIMIT_MAX_REQUESTS": "1000000000", "BUNQUEUE_POSTGRES_URL": url, **env,
            }).start())
        yield servers
    finally:
        for server in servers:
            server.stop()


class LeaseWatch:
    """From the kill on, how long the jobs the killed broker had leased stay leased by it (read from the
    database: ``lease_broker`` names the broker that granted a lease)."""

    HELD = "SELECT count(*) FROM bunqueue_jobs WHERE state = $1 AND lease_broker = $2"

    def __init__(self, url: str, broker_id: str) -> None:
        self.url = url
        self.broker_id = broker_id
        self.killed = asyncio.Event()
        self.held = 0
        self.back_after_s: float | None = None

    async def kill(self, server: ServerProcess) -> None:
        """Kill the broker at a moment it holds leases: its workers ACK and claim in step (group commits),
        so there are instants when none of its jobs is leased, and a kill there would prove nothing. The
        broker is frozen, its leases counted, and let go again until it holds some."""
        assert server.proc is not None
        pid = server.proc.pid
        conn = await asyncpg.connect(self.url)
        try:
            for _ in range(200):
                os.kill(pid, signal.SIGSTOP)
                self.held = await conn.fetchval(self.HELD, states.ACTIVE, self.broker_id)
                if self.held:
                    break
                os.kill(pid, signal.SIGCONT)
                await asyncio.sleep(0.003)
        finally:
            await conn.close()
        server.proc.kill()
        self.killed_at = time.monotonic()
        self.killed.set()

    async def watch(self) -> None:
        await self.killed.wait()
        conn = await asyncpg.connect(self.url)
        try:
            while await conn.fetchval(self.HELD, states.ACTIVE, self.broker_id):
                await asyncio.sleep(0.05)
            self.back_after_s = time.monotonic() - self.killed_at
        finally:
            await conn.close()


async def test_three_brokers_work_every_job_once_when_one_is_killed(postgres_url: str) -> None:
    watch = LeaseWatch(postgres_url, "doomed")
    with brokers_on(postgres_url, 1, BUNQUEUE_BROKER_ID="doomed") as doomed, brokers_on(postgres_url, 2) as others:
        watching = asyncio.create_task(watch.watch())
        result = await run_brokers(
            [s.addr for s in doomed + others], lambda: watch.kill(doomed[0]), 20_000, LOCK_TTL_MS
        )
        await asyncio.wait_for(watching, LOCK_TTL_MS / 1000 + 10)
    assert result["problems"] == [] and result["verified"], result
    # The killed broker's leases came back to work within lockTtl + 3 s of the kill, all at once.
    assert watch.held > 0 and watch.back_after_s is not None
    assert watch.back_after_s <= LOCK_TTL_MS / 1000 + 3, (watch.held, watch.back_after_s)
    # Every long-poll on one broker was woken by a push on another, none by its own timeout.
    assert result["wake_misses"] == 0, result


class Load:
    """Pushes with custom ids (retried until acknowledged) and workers, over two brokers, and what they saw."""

    def __init__(self) -> None:
        self.pushed: set[str] = set()
        self.acked: dict[str, int] = {}
        self.slowest = 0.0
        self.stop = asyncio.Event()
        self.refusals: list[str] = []
        # Replies that said the database was away: the outage was seen, and answered.
        self.unavailable = 0

    async def call(self, conn: Connection, frame: dict[str, Any]) -> dict[str, Any]:
        started = time.monotonic()
        reply = await asyncio.wait_for(conn.request(frame), COMMAND_LIMIT_S)
        self.slowest = max(self.slowest, time.monotonic() - started)
        if not reply.get("ok") and reply.get("error", "").startswith("Storage unavailable"):
            self.unavailable += 1
        return reply

    async def states(self, conn: Connection, ids: list[str]) -> dict[str, str]:
        return {job_id: (await self.call(conn, {"cmd": "GetState", "id": job_id}))["state"] for job_id in ids}

    async def pusher(self, conn: Connection, prefix: str) -> None:
        batch = 0
        while not self.stop.is_set():
            ids = [f"{prefix}-{batch}-{i}" for i in range(20)]
            frame = {"cmd": "PUSHB", "queue": "outage", "jobs": [{"jobId": job_id, "data": 1} for job_id in ids]}
            reply = await self.call(conn, frame)
            while not reply.get("ok"):
                await asyncio.sleep(0.05)
                reply = await self.call(conn, frame)
            # A retried batch answers the ids of the jobs its first try admitted (custom ids are idempotent).
            self.pushed.update(reply["ids"])
            batch += 1
            await asyncio.sleep(0.1)

    async def worker(self, conn: Connection) -> None:
        pull = {"cmd": "PULL", "queue": "outage", "owner": "w", "lockTtl": LOCK_TTL_MS, "timeout": 200}
        while not self.stop.is_set():
            reply = await self.call(conn, pull)
            job = reply.get("job") if reply.get("ok") else None
            if job is None:
                await asyncio.sleep(0.02)
                continue
            ack = {"cmd": "ACK", "id": job["id"], "token": reply["token"]}
            while True:
                answer = await self.call(conn, ack)
                if answer.get("ok"):
                    self.acked[job["id"]] = self.acked.get(job["id"], 0) + 1
                    break
                if not answer["error"].startswith("Storage unavailable"):
                    # The lease lapsed during the outage: the job is someone else's now.
                    self.refusals.append(answer["error"])
                    break
                await asyncio.sleep(0.05)


async def test_postgres_away_twice_under_load_loses_and_doubles_nothing(
    postgres: PostgresServer, postgres_url: str
) -> None:
    load = Load()
    with brokers_on(postgres_url, 2, BUNQUEUE_POSTGRES_STATEMENT_TIMEOUT_MS=str(STATEMENT_TIMEOUT_MS)) as servers:
        conns = [await connect(*server.addr) for server in servers for _ in range(3)]
        tasks = [asyncio.create_task(load.pusher(conns[0], "a")), asyncio.create_task(load.pusher(conns[3], "b"))]
        tasks += [asyncio.create_task(load.worker(conn)) for conn in (conns[1], conns[2], conns[4], conns[5])]
        health = []
        for _ in range(2):
            await asyncio.sleep(1.5)
            postgres.halt()
            await asyncio.sleep(1)
            health.append(await asyncio.to_thread(_health, servers[1]))
            await asyncio.sleep(2)
            postgres.resume()
        await asyncio.sleep(1.5)
        health.append(await asyncio.to_thread(_health, servers[1]))
        load.stop.set()
        await asyncio.gather(*tasks)
        assert all(server.proc is not None and server.proc.poll() is None for server in servers)
        # Whatever is left is worked, then every acknowledged push must be completed, once.
        left = list(load.pushed - set(load.acked))
        load.stop.clear()
        drain = [asyncio.create_task(load.worker(conn)) for conn in (conns[1], conns[4])]
        deadline = time.monotonic() + LOCK_TTL_MS / 1000 + 15
        while time.monotonic() < deadline and set((await load.states(conns[2], left)).values()) != {"completed"}:
            await asyncio.sleep(0.5)
        load.stop.set()
        await asyncio.gather(*drain)
        states = await load.states(conns[2], list(load.pushed))
        for conn in conns:
            await conn.close()
    assert load.pushed and load.acked and load.unavailable
    assert [job_id for job_id, state in states.items() if state != "completed"] == []
    assert [job_id for job_id, count in load.acked.items() if count > 1] == []
    assert load.slowest < COMMAND_LIMIT_S
    # The health probe says so while the database is away, and recovers with it.
    assert health == [503, 503, 200]


SESSION_LEASE_MS = 3_000


async def test_a_broker_whose_session_lapsed_while_postgres_was_away_hands_out_jobs_again(
    postgres: PostgresServer, postgres_url: str
) -> None:
    lease = {"BUNQUEUE_POSTGRES_LEASE_DURATION_MS": str(SESSION_LEASE_MS), "BUNQUEUE_BROKER_ID": "lapsing"}
    session_of = "SELECT session FROM bunqueue_broker_sessions WHERE broker_id = 'lapsing'"
    with brokers_on(postgres_url, 1, **lease) as [server]:
        conn = await connect(*server.addr)
        first = await _fetchval(postgres_url, session_of)
        postgres.halt()
        try:
            await asyncio.sleep(SESSION_LEASE_MS / 1000 + 1.5)
        finally:
            postgres.resume()
        push = {"cmd": "PUSH", "queue": "lapsed", "data": {}}
        pushed = await conn.request(push)
        deadline = time.monotonic() + 15
        while not pushed.get("ok") and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            pushed = await conn.request(push)
        job = None
        while job is None and time.monotonic() < deadline:
            job = (await conn.request({"cmd": "PULL", "queue": "lapsed", "timeout": 500})).get("job")
        await conn.close()
        assert server.proc is not None and server.proc.poll() is None
        # It claimed under a new session: a larger fencing token than the one that lapsed.
        latest = await _fetchval(postgres_url, session_of)
    assert pushed.get("ok") and job is not None and job["id"] == pushed["id"], (pushed, job)
    assert latest > first, (first, latest)


async def test_a_broker_at_the_lease_floor_keeps_its_session_and_claims(postgres_url: str) -> None:
    # The floor's 1 s lease, renewed once a second, must not lapse between two renewals on time.
    session_of = "SELECT session FROM bunqueue_broker_sessions WHERE broker_id = 'floor'"
    floor = {"BUNQUEUE_POSTGRES_LEASE_DURATION_MS": "1000", "BUNQUEUE_BROKER_ID": "floor"}
    with brokers_on(postgres_url, 1, **floor) as [server]:
        conn = await connect(*server.addr)
        first = await _fetchval(postgres_url, session_of)
        pulled = []
        for _ in range(14):
            pushed = await conn.request({"cmd": "PUSH", "queue": "floor", "data": {}})
            reply = await conn.request({"cmd": "PULL", "queue": "floor", "timeout": 0})
            pulled.append((reply.get("job") or {}).get("id") == pushed["id"])
            await asyncio.sleep(0.25)
        latest = await _fetchval(postgres_url, session_of)
        await conn.close()
    assert all(pulled), pulled
    assert latest == first, (first, latest)


async def _fetchval(url: str, query: str) -> Any:
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetchval(query)
    finally:
        await conn.close()


def _health(server: ServerProcess) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}/health", timeout=COMMAND_LIMIT_S) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


pytestmark = pytest.mark.usefixtures("postgres")
