"""StorageStatus in PostgreSQL mode, and the health probe it serves: counts as the database holds them now."""
from __future__ import annotations

import json
import urllib.request

import pytest

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.server import ServerProcess
from bunqueue._testbase.twins import Twins

pytestmark = pytest.mark.usefixtures("postgres")


def test_storage_status_answers_as_in_memory(twins: Twins) -> None:
    assert twins.same({"cmd": "StorageStatus", "reqId": "s"}) == {
        "ok": True, "reqId": "s", "data": {"diskFull": False, "error": None, "since": None},
    }


def test_the_health_probe_counts_a_push_at_once(pg_server: ServerProcess) -> None:
    def waiting() -> int:
        with urllib.request.urlopen(f"http://127.0.0.1:{pg_server.http_port}/health") as answer:
            count: int = json.load(answer)["queues"]["waiting"]
        return count

    client = RawClient(pg_server.addr)
    try:
        before = waiting()
        client.ok({"cmd": "PUSH", "queue": "sys-health", "data": 1})
        # No wait for the totals' timer: the probe's StorageStatus reads them again.
        assert waiting() == before + 1
    finally:
        client.close()
