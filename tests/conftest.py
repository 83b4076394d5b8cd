from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from harness import RawClient, ServerProcess


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
