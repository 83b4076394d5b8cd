"""What a PostgreSQL broker answers from its own process: the probes' totals and a closed connection."""
from __future__ import annotations

import time

import pytest

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.server import ServerProcess
from bunqueue._testbase.twins import Twins

pytestmark = pytest.mark.usefixtures("postgres")


def test_the_totals_the_health_probe_shows_come_from_the_database(pg_server: ServerProcess) -> None:
    import json
    import urllib.request

    client = RawClient(pg_server.addr)
    client.call({"cmd": "PUSHB", "queue": "local-totals", "jobs": [{"data": i} for i in range(3)]})
    client.call({"cmd": "PUSH", "queue": "local-totals", "data": 9, "priority": 5})
    client.close()
    deadline = time.monotonic() + 5
    while True:
        with urllib.request.urlopen(f"http://127.0.0.1:{pg_server.http_port}/stats") as answer:
            stats = json.load(answer)
        counts = stats["stats"]
        if counts["prioritized"] == 1 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert (counts["waiting"], counts["prioritized"]) == (3, 1), stats


def test_a_closed_connection_keeps_its_leases_for_a_worker_that_reconnects(twins: Twins) -> None:
    pg = twins.postgres
    pushed = pg.call({"cmd": "PUSH", "queue": "local-reconnect", "data": 1})
    pulled = pg.call({"cmd": "PULL", "queue": "local-reconnect", "owner": "w", "lockTtl": 60000})
    addr = pg.sock.getpeername()
    pg.close()
    twins.postgres = again = RawClient(addr)
    assert again.call({"cmd": "ACK", "id": pushed["id"], "token": pulled["token"]}) == {"ok": True}
