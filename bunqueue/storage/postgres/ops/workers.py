"""Workers: RegisterWorker, UnregisterWorker, ListWorkers and Heartbeat in ``bunqueue_workers``, answered as
the memory engine's ``WorkerRegistry`` answers them, for every broker of the namespace.

A worker belongs to the connection that registered it (this broker's id and the connection's session key)
and goes when that connection closes. "Stale" and removal at three timeouts are judged by the database's
clock, so brokers agree; removal is one DELETE on a timer any broker runs. The running totals of what
heartbeats reported live in ``bunqueue_worker_totals``: they outlive the workers, as in memory; the total of
active jobs is the sum over the registered workers, which is what memory's running count amounts to.
"""
from __future__ import annotations

import asyncio
import sys
from typing import Any

import asyncpg

from bunqueue import errors
from bunqueue._core.jobfactory import JobFactory
from bunqueue._core.jobs import wire_number
from bunqueue.broker.components import eventnames
from bunqueue.broker.components.eventhub import EventHub
from bunqueue.broker.session import Session
from bunqueue.broker.timers.workerregistry import ACTIVE, REMOVE_AFTER_TIMEOUTS, STALE
from bunqueue.config import Settings
from bunqueue.errors import CommandError
from bunqueue.storage.postgres.ops.family import Family
from bunqueue.storage.postgres.pgtext import MAX_KEY_CHARS, from_text
from bunqueue.storage.postgres.pool import PostgresConfig
from bunqueue.storage.postgres.sessions import NOW_MS

# How often this broker removes workers silent for three timeouts (any broker may: the statement takes all).
WORKER_SWEEP_S = 1.0

_COLUMNS = (
    "worker_id, name, queues, concurrency, hostname, pid, registered_at, last_seen, active_jobs, processed, failed"
)

_W_COLUMNS = ", ".join(f"w.{column}" for column in _COLUMNS.split(", "))

# A new worker, or the re-registration of a live one: its queues and concurrency change, its hostname and
# pid when given (not empty, not 0), its name and its connection never.
_REGISTER = f"""
INSERT INTO bunqueue_workers AS w (namespace, worker_id, broker_id, session_key, name, queues, concurrency,
                                   hostname, pid, registered_at, last_seen)
VALUES ($1, $2, $3, $4::bigint, $5::text, $6::text[], $7::float8, coalesce($8::text, 'unknown'),
        coalesce($9::float8, 0), coalesce($10::float8, {NOW_MS}), {NOW_MS})
ON CONFLICT (namespace, worker_id) DO UPDATE SET
    queues = excluded.queues, concurrency = excluded.concurrency, last_seen = excluded.last_seen,
    hostname = CASE WHEN $8 <> '' THEN $8 ELSE w.hostname END,
    pid = CASE WHEN $9 <> 0 THEN $9 ELSE w.pid END
RETURNING {_COLUMNS}
"""

_UNREGISTER = "DELETE FROM bunqueue_workers WHERE namespace = $1 AND worker_id = $2 RETURNING worker_id"



def _float_sum(left: str, right: str) -> str:
    """``left + right`` of two double precision values as IEEE 754 (and Python) adds them: a sum past the
    range is an infinity, where PostgreSQL's float8 arithmetic raises an error."""
    big = repr(sys.float_info.max)
    return (
        f"(SELECT CASE WHEN s = 'NaN' THEN 'NaN'::float8 WHEN s > {big} THEN 'Infinity'::float8"
        f" WHEN s < -{big} THEN '-Infinity'::float8 ELSE s::float8 END"
        f" FROM (SELECT ({left})::numeric + ({right})::numeric AS s) AS exact)"
    )


# A counter a heartbeat reports replaces the worker's; the namespace's total moves by the difference.
_HEARTBEAT = f"""
WITH old AS (
    SELECT worker_id, processed, failed FROM bunqueue_workers WHERE namespace = $1 AND worker_id = $2 FOR UPDATE
), beat AS (
    UPDATE bunqueue_workers w SET last_seen = {NOW_MS}, active_jobs = coalesce($3::float8, w.active_jobs),
        processed = coalesce($4::float8, w.processed), failed = coalesce($5::float8, w.failed)
    FROM old WHERE w.namespace = $1 AND w.worker_id = old.worker_id
    RETURNING w.worker_id
), totals AS (
    INSERT INTO bunqueue_worker_totals AS t (namespace, processed, failed)
    SELECT $1, coalesce({_float_sum("$4::float8", "-old.processed")}, 0),
           coalesce({_float_sum("$5::float8", "-old.failed")}, 0)
    FROM old
    ON CONFLICT (namespace) DO UPDATE SET processed = {_float_sum("t.processed", "excluded.processed")},
                                          failed = {_float_sum("t.failed", "excluded.failed")}
)
SELECT count(*) FROM beat
"""

# Always one row (the clock and the totals), then one per worker in registration order.
_LISTING = f"""
SELECT c.now, t.processed AS total_processed, t.failed AS total_failed, {_W_COLUMNS}
FROM (SELECT {NOW_MS} AS now) c
LEFT JOIN bunqueue_worker_totals t ON t.namespace = $1
LEFT JOIN bunqueue_workers w ON w.namespace = $1
ORDER BY w.created_seq
"""

_DROP_SESSION = """
DELETE FROM bunqueue_workers WHERE namespace = $1 AND broker_id = $2 AND session_key = $3 RETURNING worker_id, name
"""

_SWEEP = f"""
DELETE FROM bunqueue_workers WHERE namespace = $1 AND last_seen <= {NOW_MS} - $2::bigint RETURNING worker_id, name
"""

# Whether a worker not yet stale serves the queue ($2; $3 the stale timeout): a cron's skipIfNoWorker.
SERVES = f"""
SELECT EXISTS (SELECT 1 FROM bunqueue_workers
               WHERE namespace = $1 AND $2 = ANY(queues) AND last_seen > {NOW_MS} - $3::bigint)
"""


def _name_of(row: asyncpg.Record) -> str | None:
    return row["name"]


def worker_view(row: asyncpg.Record, id_key: str, status: str) -> dict[str, Any]:
    """A row as ``Worker.view`` shows a worker."""
    out: dict[str, Any] = {id_key: row["worker_id"]}
    if row["name"] is not None:
        out["name"] = row["name"]
    out.update(
        queues=[from_text(queue) for queue in row["queues"]],
        concurrency=wire_number(row["concurrency"]),
        hostname=row["hostname"],
        pid=wire_number(row["pid"]),
        status=status,
        registeredAt=wire_number(row["registered_at"]),
        lastSeen=float(row["last_seen"]),
        activeJobs=wire_number(row["active_jobs"]),
        processedJobs=wire_number(row["processed"]),
        failedJobs=wire_number(row["failed"]),
        currentJob=None,
    )
    return out


class WorkersFamily(Family):
    config: PostgresConfig
    settings: Settings
    events: EventHub
    factory: JobFactory
    # Keys of this broker's connections that registered a worker: only their closing costs a statement.
    worker_sessions: set[int]
    worker_drops: set[asyncio.Task[None]]

    async def register_worker(
        self, session_key: int, name: str | None, queues: list[str], concurrency: float, worker_id: str | None,
        hostname: str | None, pid: float | None, started_at: float | None,
    ) -> dict[str, Any]:
        if type(worker_id) is str and len(worker_id) > MAX_KEY_CHARS:
            raise CommandError(errors.must_be_at_most_chars("workerId", MAX_KEY_CHARS))
        row = await self.pool.fetchrow(
            _REGISTER, self.namespace, worker_id if worker_id is not None else self.factory.new_token(),
            self.config.broker_id, session_key, name,
            queues, concurrency, hostname,
            pid, started_at,
        )
        assert row is not None
        self.worker_sessions.add(session_key)
        view = worker_view(row, "workerId", ACTIVE)
        if self.events.notices:
            self.events.notify(eventnames.WORKER_CONNECTED, {
                "workerId": view["workerId"], "name": view.get("name"), "queues": view["queues"],
                "hostname": view["hostname"], "pid": view["pid"],
            })
        return view

    async def unregister_worker(self, worker_id: Any) -> bool:
        if type(worker_id) is not str:
            return False
        if await self.pool.fetchval(_UNREGISTER, self.namespace, worker_id) is None:
            return False
        if self.events.notices:
            self.events.notify(eventnames.WORKER_DISCONNECTED, {"workerId": worker_id})
        return True

    async def list_workers(self) -> dict[str, Any]:
        rows = await self.pool.fetch(_LISTING, self.namespace)
        now = rows[0]["now"]
        timeout = self.settings.worker_timeout_ms
        workers = []
        active = 0
        slots: float = 0
        active_jobs: float = 0
        for row in rows:
            if row["worker_id"] is None:
                continue
            status = ACTIVE if now - row["last_seen"] < timeout else STALE
            if status == ACTIVE:
                active += 1
                slots += row["concurrency"]
            active_jobs += row["active_jobs"]
            entry = worker_view(row, "id", status)
            entry["uptime"] = wire_number(now - row["registered_at"])
            workers.append(entry)
        stats = {
            "total": len(workers),
            "active": active,
            "totalProcessed": wire_number(rows[0]["total_processed"] or 0),
            "totalFailed": wire_number(rows[0]["total_failed"] or 0),
            "activeJobs": wire_number(active_jobs),
            "concurrencySlots": wire_number(slots),
        }
        return {"workers": workers, "stats": stats}

    async def worker_heartbeat(
        self, worker_id: Any, active_jobs: float | None, processed: float | None, failed: float | None
    ) -> bool:
        if type(worker_id) is not str:
            return False
        if not await self.pool.fetchval(
                _HEARTBEAT, self.namespace, worker_id, active_jobs, processed, failed):
            return False
        if self.events.notices:
            self.events.notify(eventnames.WORKER_HEARTBEAT, {"workerId": worker_id})
        return True

    def drop_session_workers(self, session: Session) -> None:
        """The connection closed: the workers it registered go (in the background: the caller cannot wait)."""
        if session.key not in self.worker_sessions:
            return
        self.worker_sessions.discard(session.key)
        task = asyncio.get_running_loop().create_task(self._drop_session_workers(session.key, session.client_id()))
        self.worker_drops.add(task)
        task.add_done_callback(self.worker_drops.discard)

    async def close_workers(self) -> None:
        """Let the drops of connections closed at shutdown finish, so their workers go with them."""
        await asyncio.gather(*self.worker_drops, return_exceptions=True)

    async def _drop_session_workers(self, session_key: int, client_id: str) -> None:
        rows = await self.pool.fetch(_DROP_SESSION, self.namespace, self.config.broker_id, session_key)
        if self.events.notices:
            for row in rows:
                self.events.notify(eventnames.WORKER_DISCONNECTED, {
                    "workerId": row["worker_id"], "name": _name_of(row), "clientId": client_id})

    async def remove_silent_workers(self) -> None:
        limit = REMOVE_AFTER_TIMEOUTS * self.settings.worker_timeout_ms
        rows = await self.pool.fetch(_SWEEP, self.namespace, limit)
        if self.events.notices:
            for row in rows:
                self.events.notify(eventnames.WORKER_REMOVED_STALE, {
                    "workerId": row["worker_id"], "name": _name_of(row)})
