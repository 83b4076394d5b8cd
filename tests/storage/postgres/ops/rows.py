"""Reading a PostgreSQL-mode server's job rows, for what no reply shows (leases, attempts, records)."""
from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

from bunqueue._core.jobs import Job
from bunqueue._testbase.postgres import PostgresServer
from bunqueue._testbase.server import ServerProcess
from bunqueue.storage.postgres.sessions import NOW_MS
from bunqueue.storage.schema import unpack


def fetch(postgres: PostgresServer, sql: str, *args: Any) -> list[asyncpg.Record]:
    async def run() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(postgres.url())
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()
    return asyncio.run(run())


def job_row(postgres: PostgresServer, server: ServerProcess, job_id: str) -> asyncpg.Record | None:
    """The job's row in ``server``'s namespace, with the database's clock as ``now``; None when gone."""
    rows = fetch(
        postgres, f"SELECT *, {NOW_MS} AS now FROM bunqueue_jobs WHERE namespace = $1 AND id = $2",
        server.env["BUNQUEUE_POSTGRES_NAMESPACE"], job_id,
    )
    return rows[0] if rows else None


def job_record(postgres: PostgresServer, server: ServerProcess, job_id: str) -> Job:
    row = job_row(postgres, server, job_id)
    assert row is not None, job_id
    return Job.from_record(unpack(row["record"]))
