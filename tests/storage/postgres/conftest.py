from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.postgres import PostgresServer
from bunqueue._testbase.server import ServerProcess
from bunqueue._testbase.twins import Twins


def postgres_broker(postgres: PostgresServer, namespace: str, **env: str) -> ServerProcess:
    """A PostgreSQL-mode server on the session's database, in ``namespace``."""
    return ServerProcess(env={
        "RATE_LIMIT_MAX_REQUESTS": "100000000", "BUNQUEUE_POSTGRES_URL": postgres.url(),
        "BUNQUEUE_POSTGRES_NAMESPACE": namespace, **env,
    }).start()


@pytest.fixture(scope="module")
def pg_server(postgres: PostgresServer) -> Iterator[ServerProcess]:
    """One PostgreSQL-mode server per test module, in a namespace of its own."""
    proc = postgres_broker(postgres, f"ops-{uuid.uuid4().hex[:12]}")
    yield proc
    proc.stop()


@pytest.fixture
def twins(server: ServerProcess, pg_server: ServerProcess) -> Iterator[Twins]:
    """The same frames to the memory server and the PostgreSQL one; each test uses its own queue names."""
    pair = Twins(server, pg_server)
    yield pair
    pair.close()


@pytest.fixture
def brokers(postgres: PostgresServer) -> Iterator[tuple[RawClient, RawClient]]:
    """A client on each of two PostgreSQL-mode brokers sharing a namespace of their own."""
    namespace = f"pair-{uuid.uuid4().hex[:12]}"
    first, second = postgres_broker(postgres, namespace), postgres_broker(postgres, namespace)
    a, b = RawClient(first.addr), RawClient(second.addr)
    yield a, b
    a.close()
    b.close()
    first.stop()
    second.stop()
