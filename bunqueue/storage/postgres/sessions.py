"""Broker sessions: the row that says a broker is alive, and the fencing token its leases carry.

A broker registers one row per (namespace, broker id) and renews it every ``heartbeat_ms``. Each
registration draws a new ``session`` number from a sequence, larger than every one before it: the fencing
token. A lease records the session that granted it, and a lease write checks that session still holds its
row, so a broker that lost its session cannot act on leases another broker has since taken over.

Expiry is judged by the database's clock, so brokers with skewed clocks agree on it. A broker also keeps a
local deadline (the lease from its last confirmed renewal, counted from when the renewal was sent): when it
cannot reach the database it stops claiming at that deadline, before any other broker may consider the
session gone.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import asyncpg

from bunqueue.storage.postgres.outages import OutageLog

log = logging.getLogger("bunqueue.postgres")

# The database's clock in epoch milliseconds, as every time column holds.
NOW_MS = "(floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint"

_REGISTER = f"""
INSERT INTO bunqueue_broker_sessions AS s (namespace, broker_id, session, started_at, heartbeat_at, expires_at)
VALUES ($1, $2, nextval('bunqueue_session_seq'), {NOW_MS}, {NOW_MS}, {NOW_MS} + $3)
ON CONFLICT (namespace, broker_id) DO UPDATE
    SET session = excluded.session, started_at = excluded.started_at,
        heartbeat_at = excluded.heartbeat_at, expires_at = excluded.expires_at
    WHERE s.expires_at <= {NOW_MS}
RETURNING session
"""

# Renews only a session that still holds its row and has not lapsed: a late heartbeat does not revive it.
_HEARTBEAT = f"""
UPDATE bunqueue_broker_sessions SET heartbeat_at = {NOW_MS}, expires_at = {NOW_MS} + $4
WHERE namespace = $1 AND broker_id = $2 AND session = $3 AND expires_at > {NOW_MS}
RETURNING expires_at
"""

_UNREGISTER = "DELETE FROM bunqueue_broker_sessions WHERE namespace = $1 AND broker_id = $2 AND session = $3"


# The original's cadence: three renewals per lease, at most one a second unless asked otherwise.
MIN_HEARTBEAT_MS = 1000


def default_heartbeat_ms(lease_ms: int) -> int:
    return max(MIN_HEARTBEAT_MS, lease_ms // 3)


def session_lease_ms(lease_ms: int) -> int:
    """How long a broker's session lives past its last renewal: the lease asked for, but at least three
    renewals (the original's stale time), so that a lease below three seconds does not lapse between two
    renewals on time."""
    return max(lease_ms, 3 * default_heartbeat_ms(lease_ms))


class BrokerIdInUse(Exception):
    def __init__(self, broker_id: str) -> None:
        super().__init__(f'PostgreSQL brokerId "{broker_id}" is already active')


@dataclass(frozen=True)
class SessionRow:
    broker_id: str
    session: int
    heartbeat_at: int
    expires_at: int
    expired: bool


async def list_sessions(conn: asyncpg.Connection | asyncpg.Pool, namespace: str) -> list[SessionRow]:
    """Every session row of the namespace, each marked expired or not by the database's clock."""
    rows = await conn.fetch(
        f"SELECT broker_id, session, heartbeat_at, expires_at, expires_at <= {NOW_MS} AS expired"
        " FROM bunqueue_broker_sessions WHERE namespace = $1 ORDER BY broker_id",
        namespace,
    )
    return [SessionRow(**dict(row)) for row in rows]


async def remove_expired(conn: asyncpg.Connection | asyncpg.Pool, namespace: str) -> list[str]:
    """Delete the namespace's lapsed sessions; the broker ids whose leases may now be taken back."""
    rows = await conn.fetch(
        f"DELETE FROM bunqueue_broker_sessions WHERE namespace = $1 AND expires_at <= {NOW_MS} RETURNING broker_id",
        namespace,
    )
    return sorted(row["broker_id"] for row in rows)


class BrokerSession:
    """This broker's session: register, renew every ``heartbeat_ms``, and say when it is lost.

    ``valid`` is what the claim path asks before every claim. Once the session is lost (the row lapsed, was
    deleted or was taken by a newer registration, or no renewal was confirmed before the local deadline)
    ``lost`` is set and ``on_lost`` called once; the session never comes back: the broker registers anew
    (``successor``).
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        namespace: str,
        broker_id: str,
        lease_ms: int,
        heartbeat_ms: int | None = None,
        on_lost: Callable[[str], None] | None = None,
    ) -> None:
        self.pool = pool
        self.namespace = namespace
        self.broker_id = broker_id
        self.lease_ms = lease_ms
        self.heartbeat_ms = heartbeat_ms if heartbeat_ms is not None else default_heartbeat_ms(lease_ms)
        self.on_lost = on_lost
        self.token: int | None = None
        self.lost = asyncio.Event()
        self.lost_reason: str | None = None
        self._deadline = 0.0  # time.monotonic() past which the session may have lapsed
        self._task: asyncio.Task[None] | None = None

    @property
    def valid(self) -> bool:
        return self.token is not None and not self.lost.is_set() and time.monotonic() < self._deadline

    async def register(self) -> int:
        """Take the broker id's row (refused while another live session holds it); the fencing token."""
        sent = time.monotonic()
        token = await self.pool.fetchval(_REGISTER, self.namespace, self.broker_id, self.lease_ms)
        if token is None:
            raise BrokerIdInUse(self.broker_id)
        self.token = int(token)
        self._deadline = sent + self.lease_ms / 1000
        return self.token

    def start(self) -> None:
        """Renew in the background until ``close`` or the session is lost."""
        assert self.token is not None, "register() first"
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._renew_forever())

    async def heartbeat(self) -> bool:
        """Renew once; False (and the session marked lost) when the database no longer has it."""
        if self.lost.is_set():
            return False
        sent = time.monotonic()
        renewed = await self.pool.fetchval(_HEARTBEAT, self.namespace, self.broker_id, self.token, self.lease_ms)
        if renewed is None:
            self._lose("the session expired or was taken over")
            return False
        self._deadline = sent + self.lease_ms / 1000
        return True

    async def _renew_forever(self) -> None:
        outage = OutageLog("session heartbeat")
        while not self.lost.is_set():
            await asyncio.sleep(self.heartbeat_ms / 1000)
            try:
                # A database that stops answering must not hold the renewal past the deadline it guards.
                await asyncio.wait_for(self.heartbeat(), timeout=max(0.001, self._deadline - time.monotonic()))
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
                # Unconfirmed: keep trying until the local deadline says the lease may be gone.
                outage.failed(exc)
                if time.monotonic() >= self._deadline:
                    self._lose(f"no heartbeat confirmed within the lease ({exc})")
            else:
                outage.ran()

    def _lose(self, reason: str) -> None:
        if self.lost.is_set():
            return
        self.lost_reason = reason
        self.lost.set()
        log.error("broker %s lost its PostgreSQL session: %s", self.broker_id, reason)
        if self.on_lost is not None:
            self.on_lost(reason)

    async def successor(self) -> BrokerSession:
        """A new session for this broker (a larger fencing token), registered once the database takes it:
        tried every ``heartbeat_ms`` while the database is away or the old row has not lapsed yet."""
        while True:
            session = BrokerSession(
                self.pool, self.namespace, self.broker_id, self.lease_ms, self.heartbeat_ms, self.on_lost
            )
            try:
                await session.register()
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError, BrokerIdInUse) as exc:
                log.warning("broker %s cannot register a new PostgreSQL session yet: %s", self.broker_id, exc)
                await asyncio.sleep(self.heartbeat_ms / 1000)
                continue
            session.start()
            log.warning("broker %s registered a new PostgreSQL session", self.broker_id)
            return session

    async def close(self) -> None:
        """Stop renewing and give the row up (if still ours), so the broker id is free at once."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        if self.token is not None and not self.lost.is_set():
            await self.pool.execute(_UNREGISTER, self.namespace, self.broker_id, self.token)
        self.lost_reason = self.lost_reason or "closed"
        self.lost.set()
