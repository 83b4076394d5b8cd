from __future__ import annotations

import itertools
from collections.abc import AsyncIterator

import pytest

from bunqueue._testbase.server import ServerProcess
from bunqueue.client import Connection, connect

_names = itertools.count()


@pytest.fixture
def queue_name(request: pytest.FixtureRequest) -> str:
    """A queue of this test's own, so tests sharing one server never see each other's jobs."""
    return f"t{next(_names)}-{request.node.name[:40].replace('[', '-').replace(']', '')}"


@pytest.fixture
async def conn(server: ServerProcess) -> AsyncIterator[Connection]:
    c = await connect(*server.addr)
    yield c
    await c.close()


@pytest.fixture
async def conn2(server: ServerProcess) -> AsyncIterator[Connection]:
    c = await connect(*server.addr)
    yield c
    await c.close()
