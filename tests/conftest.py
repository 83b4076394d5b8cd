from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

# Every job state assignment checks its predecessor (broker.transitions.moves), here and in the servers the
# tests start; set before any broker module is imported.
os.environ.setdefault("BUNQUEUE_DEBUG", "1")

from bunqueue._testbase.frames import RawClient
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
