from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest

from bunqueue._testbase.postgres import PostgresServer, PostgresUnavailable


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the session (installed first when missing). In CI a server that cannot
    start fails the tests that need it; elsewhere they are skipped with the reason."""
    port = os.environ.get("BUNQUEUE_TEST_POSTGRES_PORT")
    server = PostgresServer(int(port) if port else None)
    try:
        server.start()
    except PostgresUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL could not be started: {exc}")
        pytest.skip(f"PostgreSQL could not be started: {exc}")
    yield server
    server.stop()


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
