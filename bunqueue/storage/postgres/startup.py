"""The PostgreSQL mode's start-up: reach the server, bring the schema to this version."""
from __future__ import annotations

import asyncpg

from bunqueue.storage.postgres.errors import storage_failed
from bunqueue.storage.postgres.migrations import SchemaTooNew, migrate
from bunqueue.storage.postgres.pool import PostgresConfig, connect, reason


async def prepare_database(config: PostgresConfig) -> int:
    """Connect and migrate; the schema version, or ``StartupFailed`` with the one line to log."""
    conn = await connect(config)
    try:
        return await migrate(conn)
    except SchemaTooNew as exc:
        raise storage_failed(str(exc)) from None
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise storage_failed(f"cannot prepare the schema at {config.where}: {reason(exc)}") from None
    finally:
        await conn.close()

