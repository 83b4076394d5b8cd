"""Broker sessions on a real PostgreSQL: renewal, expiry seen by another broker, loss learned on the next
heartbeat, and fencing tokens that only grow."""
from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from bunqueue.config import Settings
from bunqueue.storage.postgres.migrations import migrate
from bunqueue.storage.postgres.pool import PostgresConfig, create_pool
from bunqueue.storage.postgres.sessions import (
    BrokerIdInUse,
    BrokerSession,
    list_sessions,
    remove_expired,
    session_lease_ms,
)

NS = "ns-a"


def _config(url: str, **settings: Any) -> PostgresConfig:
    return PostgresConfig.from_settings(Settings(postgres_url=url, broker_id="b1", **settings))


@pytest.fixture
async def pool(postgres_url: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(_config(postgres_url))
    async with pool.acquire() as conn:
        await migrate(conn)
    yield pool
    await pool.close()


async def test_every_pool_connection_carries_the_brokers_timeouts_and_name(postgres_url: str) -> None:
    config = _config(
        postgres_url, postgres_pool_size=3, postgres_statement_timeout_ms=2500, postgres_lock_timeout_ms=700,
        postgres_idle_transaction_timeout_ms=4000,
    )
    pool = await create_pool(config)
    try:
        # Every connection is open from the start.
        assert (pool.get_size(), pool.get_idle_size()) == (3, 3)
        conns = [await pool.acquire() for _ in range(3)]
        for conn in conns:
            shown = [await conn.fetchval(f"SHOW {name}") for name in (
                "statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout", "application_name",
            )]
            assert shown == ["2500ms", "700ms", "4s", "bunqueue:b1"]
        # The pool holds pool_size connections and no more.
        with pytest.raises(TimeoutError):
            await pool.acquire(timeout=0.2)
        for conn in conns:
            await pool.release(conn)
        # A statement past its timeout fails instead of hanging the broker.
        with pytest.raises(asyncpg.QueryCanceledError):
            await pool.execute("SELECT pg_sleep(5)")
    finally:
        await pool.close()


def test_the_originals_floors_and_defaults_apply() -> None:
    config = PostgresConfig.from_settings(Settings(
        postgres_url="postgres://h/db", postgres_namespace="  ", postgres_pool_size=1,
        postgres_lease_duration_ms=10, postgres_poll_interval_ms=1,
    ))
    assert (config.namespace, config.pool_size, config.lease_duration_ms, config.poll_interval_ms) == (
        "default", 2, 1000, 25,
    )
    host, pid, tail = config.broker_id.split(":")
    assert pid == str(os.getpid()) and len(tail) == 12


def test_a_session_lasts_at_least_three_renewals_as_the_originals_stale_time() -> None:
    # The floor's 1 s lease is renewed once a second: the session lives 3 s past a renewal, not 1 s.
    assert [session_lease_ms(ms) for ms in (1000, 2999, 3000, 30000)] == [3000, 3000, 3000, 30000]


async def _expires_at(pool: asyncpg.Pool, broker_id: str) -> int:
    return int(await pool.fetchval(
        "SELECT expires_at FROM bunqueue_broker_sessions WHERE namespace = $1 AND broker_id = $2", NS, broker_id
    ))


async def test_the_heartbeat_renews_the_session(pool: asyncpg.Pool) -> None:
    session = BrokerSession(pool, NS, "b1", lease_ms=2000, heartbeat_ms=100)
    await session.register()
    first = await _expires_at(pool, "b1")
    session.start()
    await asyncio.sleep(0.35)
    renewed = await _expires_at(pool, "b1")
    assert renewed >= first + 200
    assert session.valid and not session.lost.is_set()
    [row] = await list_sessions(pool, NS)
    assert (row.broker_id, row.session, row.expired) == ("b1", session.token, False)
    await session.close()
    assert await list_sessions(pool, NS) == []
    assert not session.valid


async def test_a_session_not_renewed_past_its_lease_is_expired_for_another_broker(pool: asyncpg.Pool) -> None:
    quiet = BrokerSession(pool, NS, "quiet", lease_ms=300)
    await quiet.register()  # never started: no heartbeat
    live = BrokerSession(pool, NS, "live", lease_ms=5000)
    await live.register()
    assert {row.broker_id: row.expired for row in await list_sessions(pool, NS)} == {"quiet": False, "live": False}
    await asyncio.sleep(0.45)
    assert {row.broker_id: row.expired for row in await list_sessions(pool, NS)} == {"quiet": True, "live": False}
    # Its own view agrees without asking the database: the local deadline has passed.
    assert not quiet.valid and live.valid
    assert await remove_expired(pool, NS) == ["quiet"]
    assert [row.broker_id for row in await list_sessions(pool, NS)] == ["live"]
    await live.close()


async def test_a_deleted_session_is_learned_on_the_next_heartbeat(pool: asyncpg.Pool) -> None:
    reasons: list[str] = []
    session = BrokerSession(pool, NS, "b1", lease_ms=5000, heartbeat_ms=50, on_lost=reasons.append)
    await session.register()
    session.start()
    await pool.execute("DELETE FROM bunqueue_broker_sessions WHERE broker_id = 'b1'")
    await asyncio.wait_for(session.lost.wait(), timeout=2)
    assert not session.valid
    assert reasons == ["the session expired or was taken over"]
    assert await session.heartbeat() is False
    await session.close()


async def test_an_expired_session_cannot_be_renewed_late(pool: asyncpg.Pool) -> None:
    session = BrokerSession(pool, NS, "b1", lease_ms=200)
    await session.register()
    await asyncio.sleep(0.3)
    # Nobody removed the row, but its lease passed: a late heartbeat must not revive it.
    assert await session.heartbeat() is False
    assert session.lost.is_set() and not session.valid


async def test_a_lost_session_is_followed_by_a_new_one_with_a_larger_token(pool: asyncpg.Pool) -> None:
    lost = BrokerSession(pool, NS, "b1", lease_ms=300, heartbeat_ms=50)
    token = await lost.register()  # never started: the lease lapses
    await asyncio.sleep(0.4)
    assert await lost.heartbeat() is False
    successor = await asyncio.wait_for(lost.successor(), timeout=3)
    assert successor.token is not None and successor.token > token
    # It renews itself, and the row is its own.
    await asyncio.sleep(0.5)
    assert successor.valid and not successor.lost.is_set()
    [row] = await list_sessions(pool, NS)
    assert (row.broker_id, row.session, row.expired) == ("b1", successor.token, False)
    await successor.close()


async def test_a_live_broker_id_is_refused_and_an_expired_one_taken_over_with_a_larger_token(
    pool: asyncpg.Pool,
) -> None:
    first = BrokerSession(pool, NS, "same", lease_ms=300)
    token = await first.register()
    with pytest.raises(BrokerIdInUse, match='PostgreSQL brokerId "same" is already active'):
        await BrokerSession(pool, NS, "same", lease_ms=300).register()
    # The same id in another namespace is another broker.
    other_ns = BrokerSession(pool, "ns-b", "same", lease_ms=300)
    assert await other_ns.register() > token
    await asyncio.sleep(0.4)
    second = BrokerSession(pool, NS, "same", lease_ms=5000)
    newer = await second.register()
    assert newer > token
    # The old holder learns it lost the row on its next heartbeat, and its close leaves the new row alone.
    assert await first.heartbeat() is False
    await first.close()
    [row] = await list_sessions(pool, NS)
    assert (row.session, row.expired) == (newer, False)
    await second.close()


async def test_an_unreachable_database_ends_the_session_at_its_local_deadline(postgres_url: str) -> None:
    pool = await create_pool(_config(postgres_url))
    async with pool.acquire() as conn:
        await migrate(conn)
    reasons: list[str] = []
    session = BrokerSession(pool, NS, "b1", lease_ms=400, heartbeat_ms=50, on_lost=reasons.append)
    await session.register()
    session.start()
    await pool.close()  # every heartbeat from now on fails
    await asyncio.wait_for(session.lost.wait(), timeout=3)
    assert not session.valid
    assert reasons and reasons[0].startswith("no heartbeat confirmed within the lease")
    await session.close()


async def test_a_renewal_stuck_in_the_database_ends_the_session_at_its_local_deadline(
    pool: asyncpg.Pool, postgres_url: str
) -> None:
    reasons: list[str] = []
    session = BrokerSession(pool, NS, "b1", lease_ms=1000, heartbeat_ms=100, on_lost=reasons.append)
    await session.register()
    blocker = await asyncpg.connect(postgres_url)
    try:
        async with blocker.transaction():
            # Holding the row's lock makes every renewal wait (the lock timeout is 5 s, past the lease).
            await blocker.execute("SELECT 1 FROM bunqueue_broker_sessions WHERE broker_id = 'b1' FOR UPDATE")
            session.start()
            await asyncio.wait_for(session.lost.wait(), timeout=3)
            assert not session.valid
            assert reasons and reasons[0].startswith("no heartbeat confirmed within the lease")
    finally:
        await blocker.close()
    await session.close()
