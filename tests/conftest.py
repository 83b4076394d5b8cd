from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest

# Every job state assignment checks its predecessor (broker.transitions.moves), here and in the servers the
# tests start; set before any broker module is imported.
os.environ.setdefault("BUNQUEUE_DEBUG", "1")

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.postgres import PostgresServer, PostgresUnavailable
from bunqueue._testbase.server import ServerProcess


@pytest.fixture(scope="session")
def server() -> Iterator[ServerProcess]:
    """One memory-mode server shared by the protocol tests; each test uses its own queue names."""
    proc = ServerProcess(env={"RATE_LIMIT_MAX_REQUESTS": "100000000"}).start()
    yield proc
    proc.stop()


@pytest.fixture
def raw(server: ServerProcess) -> Iterator[RawClient]:
    client = RawClient(server.addr)
    yield client
    client.close()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the session (installed first when missing). In CI a server that cannot
    start fails the tests that need it; elsewhere they are skipped with the reason."""
    port = os.environ.get("BUNQUEUE_TEST_POSTGRES_PORT")
    server = start_postgres(PostgresServer(int(port) if port else None))
    yield server
    server.stop()


def start_postgres(server: PostgresServer) -> PostgresServer:
    """``server`` started; when it cannot start, the test fails in CI and is skipped elsewhere, with the reason."""
    try:
        return server.start()
    except PostgresUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL could not be started: {exc}")
        pytest.skip(f"PostgreSQL could not be started: {exc}")


@pytest.fixture
async def postgres_url(postgres: PostgresServer) -> AsyncIterator[str]:
    """A URL to a database of its own, empty, dropped after the test (over a connection of its own: the test
    may have restarted the server)."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    admin = await asyncpg.connect(postgres.url())
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    yield postgres.url(name)
    admin = await asyncpg.connect(postgres.url())
    try:
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
    finally:
        await admin.close()
