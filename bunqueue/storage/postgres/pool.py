"""What a broker needs to reach PostgreSQL: its settings in one record, and the connections made from them."""
from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from urllib.parse import urlsplit

import asyncpg

from bunqueue.config import Settings
from bunqueue.storage.postgres.errors import storage_failed
from bunqueue.storage.postgres.outages import one_line_pool_warnings
from bunqueue.storage.postgres.pgtext import TextConnection, decode_text

# How long opening one connection may take before the server counts as unreachable (the original's 10 s).
CONNECT_TIMEOUT_S = 10.0
# The original's floors: a smaller value is raised to these rather than refused.
MIN_POOL_SIZE = 2
MIN_LEASE_DURATION_MS = 1000
MIN_POLL_INTERVAL_MS = 25
# What a lost, refused or too slow database connection raises, through asyncpg or the socket.
UNREACHABLE = (OSError, TimeoutError, asyncpg.PostgresConnectionError, asyncpg.InterfaceError,
               asyncpg.CannotConnectNowError, asyncpg.QueryCanceledError)


@dataclass(frozen=True)
class PostgresConfig:
    url: str
    namespace: str
    broker_id: str
    pool_size: int
    lease_duration_ms: int
    poll_interval_ms: int
    statement_timeout_ms: int
    lock_timeout_ms: int
    idle_transaction_timeout_ms: int

    @classmethod
    def from_settings(cls, settings: Settings) -> PostgresConfig:
        """Settings that ``config.startup_error`` accepted, with the original's defaults and floors applied."""
        assert settings.postgres_url is not None
        return cls(
            url=settings.postgres_url,
            namespace=settings.postgres_namespace.strip() or "default",
            broker_id=(settings.broker_id or "").strip() or default_broker_id(),
            pool_size=max(MIN_POOL_SIZE, settings.postgres_pool_size),
            lease_duration_ms=max(MIN_LEASE_DURATION_MS, settings.postgres_lease_duration_ms),
            poll_interval_ms=max(MIN_POLL_INTERVAL_MS, settings.postgres_poll_interval_ms),
            statement_timeout_ms=settings.postgres_statement_timeout_ms,
            lock_timeout_ms=settings.postgres_lock_timeout_ms,
            idle_transaction_timeout_ms=settings.postgres_idle_transaction_timeout_ms,
        )

    def server_settings(self) -> dict[str, str]:
        """Set on every connection: a statement, a lock wait or an abandoned transaction cannot hang a broker."""
        return {
            "application_name": f"bunqueue:{self.broker_id}"[:63],
            "statement_timeout": str(self.statement_timeout_ms),
            "lock_timeout": str(self.lock_timeout_ms),
            "idle_in_transaction_session_timeout": str(self.idle_transaction_timeout_ms),
        }

    @property
    def where(self) -> str:
        return describe_url(self.url)


def default_broker_id() -> str:
    """Unique per process start, readable in ``pg_stat_activity``: host, pid and a random tail."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[-12:]}"


def describe_url(url: str) -> str:
    """The URL without its password, for messages and logs."""
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    port = parts.port or 5432
    database = parts.path.lstrip("/") or parts.username or "postgres"
    return f"{host}:{port}/{database}"


async def connect(config: PostgresConfig) -> asyncpg.Connection:
    """One connection with the broker's session settings and stored values (``pgtext``), or ``StartupFailed``
    naming why not."""
    try:
        conn = await asyncpg.connect(
            config.url, timeout=CONNECT_TIMEOUT_S, server_settings=config.server_settings(),
            connection_class=TextConnection,
        )
        await decode_text(conn)
        return conn
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError, ValueError) as exc:
        raise storage_failed(f"cannot connect to PostgreSQL at {config.where}: {reason(exc)}") from None


async def create_pool(config: PostgresConfig) -> asyncpg.Pool:
    """The broker's pool: ``pool_size`` connections, each with the session settings and stored values, all
    opened at start: the first requests of a busy start do not wait for new connections, and a database that
    refuses them refuses the start."""
    one_line_pool_warnings()
    try:
        pool = await asyncpg.create_pool(
            config.url,
            min_size=config.pool_size,
            max_size=config.pool_size,
            timeout=CONNECT_TIMEOUT_S,
            server_settings=config.server_settings(),
            connection_class=TextConnection,
            init=decode_text,
            reset=_keep_session,
        )
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError, ValueError) as exc:
        raise storage_failed(f"cannot connect to PostgreSQL at {config.where}: {reason(exc)}") from None
    assert pool is not None
    return pool


async def _keep_session(conn: asyncpg.Connection) -> None:
    """A released connection goes back as it is: the engine leaves no session state on a pooled one (its
    advisory locks are transaction locks, its LISTEN has a connection of its own, it sets nothing), so
    asyncpg's default reset (unlock all, CLOSE ALL, UNLISTEN *, RESET ALL) would be a round trip per
    statement for nothing. An open transaction is still rolled back by the pool."""


def reason(exc: BaseException) -> str:
    """One line saying what went wrong: the system's words for a socket error, the server's for the rest."""
    if isinstance(exc, TimeoutError):
        return f"no answer within {CONNECT_TIMEOUT_S:g} s"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
