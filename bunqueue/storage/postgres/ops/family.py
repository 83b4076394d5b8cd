"""What every family of the PostgreSQL engine shares: the pool, the namespace, the hot path and the clock."""
from __future__ import annotations

from collections.abc import Callable

import asyncpg

from bunqueue.storage.postgres.hotpath import HotPath


class Family:
    """Declared here, set by ``PostgresEngine.__init__``: each family reads only these."""

    hot: HotPath
    pool: asyncpg.Pool
    namespace: str
    # Epoch milliseconds, as on the wire. Where two brokers must agree on a time, SQL reads the database's
    # clock instead (``sessions.NOW_MS``).
    clock: Callable[[], float]
