"""What the crash load runs against, and what a kill is there.

``SqliteTarget``: one server on a SQLite file, killed with SIGKILL and started again; acknowledged buffered
(non-durable) pushes may be lost within ``BUFFER_LOSS_WINDOW_MS`` of a kill; ``PRAGMA integrity_check``.
The power-loss test gives the servers it kills an environment of their own and a step after each kill.

``PostgresTarget``: two brokers in one namespace of a PostgreSQL server with synchronous commits. Kills
alternate: a broker is SIGKILLed and started again (its leases come back when their lockTtl lapses, taken
back by the other broker), or PostgreSQL is stopped with ``-m immediate`` while the load runs, kept down
for a moment and started again (crash recovery), the brokers staying up and answering. A reply comes after
its commit, so no acknowledged push may be lost at all. The store's consistency is checked with SQL.
"""
from __future__ import annotations

import asyncio
import os
import random
import signal
import sqlite3
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

import asyncpg

from bunqueue._testbase.postgres import PostgresServer
from bunqueue._testbase.server import ServerProcess
from bunqueue.broker import states
from bunqueue.client import connect

QUEUE = "crash"
# Buffered (non-durable) pushes acknowledged at most this long before a kill may be lost (SQLite).
BUFFER_LOSS_WINDOW_MS = 250.0
# PostgreSQL mode: the statement limit while the database is away, the client's slack over it, and the
# consumers' lockTtl (what a killed broker's leases take to come back).
STATEMENT_TIMEOUT_MS = 2_000
REPLY_LIMIT_S = STATEMENT_TIMEOUT_MS / 1000 + 3
PG_LOCK_TTL_MS = 3_000
# A PostgreSQL broker spends more per push than a SQLite server: producers pace themselves so that the
# consumers' ACKs and FAILs, not only pushes, are in flight when the kills come.
PUSH_PAUSE_S = 0.02
# The brokers' session lease: an outage longer than this loses a broker's session (claims stop), and the
# broker must register a new one by itself once the database is back.
SESSION_LEASE_MS = 3_000
# How long PostgreSQL stays down after a kill, the load running: short, and (every other PostgreSQL kill)
# past the session lease and the consumers' lockTtl; and how long a broker may take to hand out jobs again
# once it is back.
SHORT_OUTAGE_S = (0.2, 1.0)
LONG_OUTAGE_S = (SESSION_LEASE_MS / 1000 + 0.5, SESSION_LEASE_MS / 1000 + 1.5)
RECONNECT_LIMIT_S = 30.0
# Where a broker's serving again is probed: a job pushed and pulled there.
PROBE_QUEUE = "crash-probe"


def now_ms() -> float:
    return time.time() * 1000.0


class Target(Protocol):
    buffer_loss_window_ms: float | None
    lock_ttl_ms: int
    reply_limit_s: float | None
    # What a producer waits between two pushes (0: a bare yield to the other clients).
    push_pause_s: float
    postgres_kills: int
    slowest_reconnect_s: float
    last_kill: str

    @property
    def addrs(self) -> list[tuple[str, int]]: ...

    async def start(self, to_be_killed: bool) -> None:
        """Before the first round (``to_be_killed``) or, when there is none, before the drain."""

    async def kill(self, round_no: int) -> None: ...

    async def outage(self, rng: random.Random) -> None:
        """While the load still runs after the kill."""

    async def recover(self, to_be_killed: bool) -> None:
        """After the load stopped: whatever was killed serves again (``to_be_killed``: another round follows,
        else the drain)."""

    async def integrity(self) -> str:
        """``ok``, or what is wrong in the store."""

    async def store_mb(self) -> float:
        """What the run left in the store, in MB."""

    async def stop(self) -> None: ...


class SqliteTarget:
    buffer_loss_window_ms: float | None = BUFFER_LOSS_WINDOW_MS
    lock_ttl_ms = 60_000
    reply_limit_s: float | None = None
    push_pause_s = 0.0
    postgres_kills = 0
    slowest_reconnect_s = 0.0
    last_kill = "server"

    def __init__(self, workdir: Path, killed_env: Mapping[str, str] | None = None,
                 after_kill: Callable[[], None] | None = None) -> None:
        """``killed_env`` is added to the environment of the servers to be killed; ``after_kill`` runs once
        the killed server is gone, before the next one starts."""
        workdir.mkdir(parents=True, exist_ok=True)
        self.data = workdir / "crash.db"
        self.env = {"BUNQUEUE_DATA_PATH": str(self.data), "RATE_LIMIT_MAX_REQUESTS": "0"}
        self.killed_env = dict(killed_env or {})
        self.after_kill = after_kill
        self.proc: ServerProcess | None = None

    @property
    def addrs(self) -> list[tuple[str, int]]:
        assert self.proc is not None
        return [self.proc.addr]

    async def start(self, to_be_killed: bool) -> None:
        env = {**self.env, **self.killed_env} if to_be_killed else self.env
        self.proc = ServerProcess(env=env).start()

    async def kill(self, round_no: int) -> None:
        assert self.proc is not None and self.proc.proc is not None
        os.kill(self.proc.proc.pid, signal.SIGKILL)

    async def outage(self, rng: random.Random) -> None:
        pass

    async def recover(self, to_be_killed: bool) -> None:
        assert self.proc is not None and self.proc.proc is not None
        self.proc.proc.wait()
        if self.after_kill is not None:
            self.after_kill()
        await self.start(to_be_killed)

    async def integrity(self) -> str:
        with sqlite3.connect(self.data) as conn:
            return str(conn.execute("PRAGMA integrity_check").fetchone()[0])

    async def store_mb(self) -> float:
        return self.data.stat().st_size / 1e6

    async def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()


# Rows in a state no command leaves them in; counted in the run's namespace after the drain.
_CONSISTENCY = f"""
SELECT
    count(*) FILTER (WHERE state = {states.ACTIVE} AND lease_expires_at IS NULL) AS active_without_lease,
    count(*) FILTER (WHERE state <> {states.ACTIVE} AND (lease_token IS NOT NULL OR lease_broker IS NOT NULL
                     OR lease_session IS NOT NULL OR lease_expires_at IS NOT NULL)) AS lease_outside_active,
    count(*) FILTER (WHERE state = {states.ACTIVE} AND lease_expires_at < $2) AS lapsed_leases_kept,
    count(*) FILTER (WHERE state = {states.COMPLETED} AND completed_at IS NULL) AS completed_without_time,
    count(*) FILTER (WHERE state = {states.WAITING_CHILDREN} AND pending_deps = 0) AS waiting_for_nothing,
    count(*) FILTER (WHERE pending_deps <> (SELECT count(*) FROM bunqueue_job_dependencies d
                                            WHERE d.namespace = j.namespace AND d.job_id = j.id)
                     AND (pending_deps > 0 OR state = {states.WAITING_CHILDREN})) AS pending_deps_off
FROM bunqueue_jobs j WHERE namespace = $1
"""
_EDGES_ON_FINISHED = f"""
SELECT count(*) FROM bunqueue_job_dependencies d JOIN bunqueue_jobs j ON j.namespace = d.namespace
    AND j.id = d.depends_on
WHERE d.namespace = $1 AND j.state = {states.COMPLETED}
"""

_ROWS_SIZE = "SELECT sum(pg_column_size(j.*)) FROM bunqueue_jobs j WHERE namespace = $1"


class PostgresTarget:
    buffer_loss_window_ms: float | None = None
    lock_ttl_ms = PG_LOCK_TTL_MS
    reply_limit_s: float | None = REPLY_LIMIT_S
    push_pause_s = PUSH_PAUSE_S

    def __init__(self, postgres: PostgresServer, owns_server: bool = False) -> None:
        self.postgres = postgres
        self.owns_server = owns_server
        self.namespace = f"crash-{uuid.uuid4().hex[:12]}"
        self.env = {
            "RATE_LIMIT_MAX_REQUESTS": "0", "BUNQUEUE_POSTGRES_URL": postgres.url(),
            "BUNQUEUE_POSTGRES_NAMESPACE": self.namespace,
            "BUNQUEUE_POSTGRES_STATEMENT_TIMEOUT_MS": str(STATEMENT_TIMEOUT_MS),
            "BUNQUEUE_POSTGRES_LEASE_DURATION_MS": str(SESSION_LEASE_MS),
        }
        self.brokers: list[ServerProcess] = []
        self.killed: int | None = None
        self.postgres_kills = 0
        self.slowest_reconnect_s = 0.0
        self.last_kill = ""
        self.resumed_at = 0.0

    @classmethod
    def on_new_server(cls) -> PostgresTarget:
        """A target on a PostgreSQL server of its own, with commits a crash keeps; stopped with the target."""
        return cls(PostgresServer(durable_commits=True).start(), owns_server=True)

    @property
    def addrs(self) -> list[tuple[str, int]]:
        return [broker.addr for broker in self.brokers]

    def _broker(self) -> ServerProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("BUNQUEUE_", "DATA_PATH"))}
        return ServerProcess(env={**env, **self.env}).start()

    async def start(self, to_be_killed: bool) -> None:
        self.brokers = [await asyncio.to_thread(self._broker) for _ in range(2)]

    async def kill(self, round_no: int) -> None:
        # Rounds alternate: broker 0, PostgreSQL, broker 1, PostgreSQL, ...
        if round_no % 2 == 0:
            self.killed = round_no // 2 % 2
            proc = self.brokers[self.killed].proc
            assert proc is not None
            os.kill(proc.pid, signal.SIGKILL)
            self.last_kill = f"broker {self.killed}"
        else:
            self.killed = None
            await asyncio.to_thread(self.postgres.crash)
            self.postgres_kills += 1
            self.last_kill = "postgres"

    async def outage(self, rng: random.Random) -> None:
        if self.killed is not None:
            return
        await asyncio.sleep(rng.uniform(*(LONG_OUTAGE_S if self.postgres_kills % 2 == 0 else SHORT_OUTAGE_S)))
        await asyncio.to_thread(self.postgres.resume)
        self.resumed_at = time.monotonic()
        # The load goes on while the brokers find the database again.
        await asyncio.sleep(0.3)

    async def recover(self, to_be_killed: bool) -> None:
        if self.killed is not None:
            broker = self.brokers[self.killed]
            assert broker.proc is not None
            await asyncio.to_thread(broker.proc.wait)
            self.brokers[self.killed] = await asyncio.to_thread(self._broker)
            return
        for broker in self.brokers:
            assert broker.proc is not None
            if broker.proc.poll() is not None:
                raise AssertionError(f"a broker exited while PostgreSQL was away: {broker.proc.returncode}")
            await self._serving(broker)

    async def _serving(self, broker: ServerProcess) -> None:
        """Waits until ``broker`` takes a push and hands the job out again; raises past the limit."""
        conn = await connect(*broker.addr)
        push = {"cmd": "PUSH", "queue": PROBE_QUEUE, "data": {}}
        pull = {"cmd": "PULL", "queue": PROBE_QUEUE, "timeout": 200}
        try:
            pushed = await asyncio.wait_for(conn.request(push), REPLY_LIMIT_S)
            while True:
                reply = await asyncio.wait_for(conn.request(pull if pushed.get("ok") else push), REPLY_LIMIT_S)
                waited = time.monotonic() - self.resumed_at
                self.slowest_reconnect_s = max(self.slowest_reconnect_s, waited)
                if pushed.get("ok") and reply.get("job"):
                    return
                pushed = pushed if pushed.get("ok") else reply
                if waited > RECONNECT_LIMIT_S:
                    raise AssertionError(f"a broker still hands out no job {RECONNECT_LIMIT_S:g} s after "
                                         f"PostgreSQL came back: {reply}")
                await asyncio.sleep(0.05)
        finally:
            await conn.close()

    async def integrity(self) -> str:
        conn = await asyncpg.connect(self.postgres.url())
        try:
            # Leases lapsed this long ago must have been taken back by a broker's expiry sweep.
            lapsed_before = int(now_ms()) - 5_000
            row = dict(await conn.fetchrow(_CONSISTENCY, self.namespace, lapsed_before))
            row["edges_on_completed"] = await conn.fetchval(_EDGES_ON_FINISHED, self.namespace)
        finally:
            await conn.close()
        wrong = [f"{name}: {count}" for name, count in row.items() if count]
        return "; ".join(wrong) or "ok"

    async def store_mb(self) -> float:
        """The namespace's job rows (the server may hold other namespaces)."""
        conn = await asyncpg.connect(self.postgres.url())
        try:
            size = await conn.fetchval(_ROWS_SIZE, self.namespace)
        finally:
            await conn.close()
        return int(size or 0) / 1e6

    async def stop(self) -> None:
        for broker in self.brokers:
            broker.stop()
        if self.owns_server:
            self.postgres.stop()
