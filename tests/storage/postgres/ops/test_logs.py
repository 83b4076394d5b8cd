"""AddLog, GetLogs and ClearLogs in PostgreSQL mode: the memory engine's replies frame for frame (the
100-entry cap and pagination included), logs that go with their job, and logs shared by brokers."""
from __future__ import annotations

import math
import uuid

import pytest

from bunqueue import errors
from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.postgres import PostgresServer
from bunqueue._testbase.server import ServerProcess
from bunqueue._testbase.twins import Twins
from tests.storage.postgres.ops.conftest import postgres_broker
from tests.storage.postgres.ops.rows import fetch

pytestmark = pytest.mark.usefixtures("postgres")


def _messages(reply: dict) -> list[str]:
    return [entry["message"] for entry in reply["data"]["logs"]]


def test_logs_are_added_read_and_paged_as_in_memory(twins: Twins) -> None:
    twins.same({"cmd": "PUSH", "queue": "logs-basic", "data": 1})
    assert twins.same({"cmd": "GetLogs", "id": "$0"}) == {"ok": True, "data": {"logs": [], "count": 0}}
    assert twins.same({"cmd": "AddLog", "id": "$0", "message": "l0"}) == {"ok": True, "data": {"added": True}}
    for i, level in ((1, "warn"), (2, "error"), (3, "custom"), (4, None)):
        twins.same({"cmd": "AddLog", "id": "$0", "message": f"l{i}", **({"level": level} if level else {})})
    assert twins.same({"cmd": "AddLog", "id": "nope", "message": "x"}) == {"ok": False, "error": errors.JOB_NOT_FOUND}
    whole = twins.same({"cmd": "GetLogs", "id": "$0"})
    assert _messages(whole) == ["l0", "l1", "l2", "l3", "l4"]
    assert [entry["level"] for entry in whole["data"]["logs"]] == ["info", "warn", "error", "custom", "info"]
    for start, end in ((1, 3), (3, None), (0, 0), (-2, None), (None, 1), (-1, -1), (4, 2), (2.5, 10), (10, 12)):
        frame = {"cmd": "GetLogs", "id": "$0", **({"start": start} if start is not None else {}),
                 **({"end": end} if end is not None else {})}
        assert twins.same(frame)["data"]["count"] == 5
    assert twins.same({"cmd": "GetLogs", "id": "nope"}) == {"ok": True, "data": {"logs": [], "count": 0}}


def test_a_job_keeps_its_newest_hundred_entries(twins: Twins) -> None:
    twins.same({"cmd": "PUSH", "queue": "logs-cap", "data": 1})
    for i in range(105):
        twins.same({"cmd": "AddLog", "id": "$0", "message": f"L{i:03}"})
    newest = twins.same({"cmd": "GetLogs", "id": "$0", "start": 0, "end": 0})
    assert newest["data"]["count"] == 100 and _messages(newest) == ["L005"]
    assert _messages(twins.same({"cmd": "GetLogs", "id": "$0", "start": -1})) == ["L104"]


def test_clear_logs_keeps_the_newest_as_in_memory(twins: Twins) -> None:
    twins.same({"cmd": "PUSH", "queue": "logs-clear", "data": 1})
    for i in range(6):
        twins.same({"cmd": "AddLog", "id": "$0", "message": f"m{i + 1}"})
    for keep in ("abc", math.nan):
        assert "keepLogs must be a number" in twins.same({"cmd": "ClearLogs", "id": "$0", "keepLogs": keep})["error"]
    for keep, left in ((10, 6), (math.inf, 6), ("5", 5), (2.5, 2), (-1, 0)):
        assert twins.same({"cmd": "ClearLogs", "id": "$0", "keepLogs": keep}) == {"ok": True}
        assert twins.same({"cmd": "GetLogs", "id": "$0"})["data"]["count"] == left
    twins.same({"cmd": "AddLog", "id": "$0", "message": "again"})
    assert twins.same({"cmd": "ClearLogs", "id": "$0"}) == {"ok": True}
    assert twins.same({"cmd": "GetLogs", "id": "$0"})["data"]["count"] == 0
    assert twins.same({"cmd": "ClearLogs", "id": "nope", "keepLogs": 3}) == {"ok": True}


def test_logs_go_with_their_job(twins: Twins, postgres: PostgresServer, pg_server: ServerProcess) -> None:
    pushed = twins.same({"cmd": "PUSH", "queue": "logs-gone", "data": 1})
    twins.same({"cmd": "AddLog", "id": "$0", "message": "kept until the job goes"})
    assert twins.same({"cmd": "Cancel", "id": "$0"}) == {"ok": True}
    assert twins.same({"cmd": "GetLogs", "id": "$0"})["data"]["count"] == 0
    assert twins.same({"cmd": "AddLog", "id": "$0", "message": "late"})["ok"] is False
    rows = fetch(postgres, "SELECT count(*) FROM bunqueue_job_logs WHERE namespace = $1 AND job_id = $2",
                 pg_server.env["BUNQUEUE_POSTGRES_NAMESPACE"], pushed["id"])
    assert rows[0][0] == 0


def test_logs_written_on_one_broker_are_read_and_cleared_on_another(postgres: PostgresServer) -> None:
    namespace = f"logs-two-{uuid.uuid4().hex[:8]}"
    first, second = postgres_broker(postgres, namespace), postgres_broker(postgres, namespace)
    try:
        a, b = RawClient(first.addr), RawClient(second.addr)
        job_id = a.ok({"cmd": "PUSH", "queue": "logs-two", "data": 1})["id"]
        for i in range(3):
            (a if i % 2 == 0 else b).ok({"cmd": "AddLog", "id": job_id, "message": f"m{i}"})
        assert _messages(b.ok({"cmd": "GetLogs", "id": job_id})) == ["m0", "m1", "m2"]
        a.ok({"cmd": "ClearLogs", "id": job_id, "keepLogs": 1})
        assert _messages(b.ok({"cmd": "GetLogs", "id": job_id})) == ["m2"]
        a.close()
        b.close()
    finally:
        first.stop()
        second.stop()
