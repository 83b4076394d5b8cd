"""Job logs over a real socket: AddLog, GetLogs (inclusive pages, count, 100-entry cap), ClearLogs."""
from __future__ import annotations

from typing import Any

import pytest

from bunqueue._testbase.frames import call
from bunqueue.client import Connection


async def job(conn: Connection, queue: str) -> str:
    return str((await call(conn, {"cmd": "PUSH", "queue": queue, "name": "l", "data": 1}))["id"])


async def messages(conn: Connection, job_id: str, **page: Any) -> tuple[list[str], int]:
    data = (await call(conn, {"cmd": "GetLogs", "id": job_id, **page}))["data"]
    return [entry["message"] for entry in data["logs"]], data["count"]


async def test_add_and_page(conn: Connection, queue_name: str) -> None:
    job_id = await job(conn, queue_name)
    assert await call(conn, {"cmd": "GetLogs", "id": job_id}) == {"ok": True, "data": {"logs": [], "count": 0}}
    for i in range(5):
        added = await call(conn, {"cmd": "AddLog", "id": job_id, "message": f"l{i}"} | (
            {"level": "warn"} if i == 4 else {}))
        assert added == {"ok": True, "data": {"added": True}}
    logs = (await call(conn, {"cmd": "GetLogs", "id": job_id}))["data"]["logs"]
    assert [(e["level"], e["message"]) for e in logs] == [("info", "l0"), ("info", "l1"), ("info", "l2"),
                                                          ("info", "l3"), ("warn", "l4")]
    assert list(logs[0]) == ["timestamp", "level", "message"]
    assert await messages(conn, job_id, start=1, end=3) == (["l1", "l2", "l3"], 5)
    assert await messages(conn, job_id, start=3) == (["l3", "l4"], 5)
    assert await messages(conn, job_id, start=0, end=0) == (["l0"], 5)
    assert await messages(conn, job_id, start=-1) == (["l4"], 5)
    assert await messages(conn, job_id, end=1) == (["l0", "l1"], 5)


async def test_logs_of_finished_jobs_and_unknown_ids(conn: Connection, queue_name: str) -> None:
    job_id = await job(conn, queue_name)
    await call(conn, {"cmd": "PULL", "queue": queue_name})
    await call(conn, {"cmd": "ACK", "id": job_id})
    assert (await call(conn, {"cmd": "AddLog", "id": job_id, "message": "after"}))["ok"]
    assert await call(conn, {"cmd": "AddLog", "id": "nope", "message": "x"}) == {
        "ok": False, "error": "Job not found"}
    assert await messages(conn, "nope") == ([], 0)
    assert await call(conn, {"cmd": "ClearLogs", "id": "nope"}) == {"ok": True}


async def test_cap_of_one_hundred_keeps_the_newest(conn: Connection, queue_name: str) -> None:
    job_id = await job(conn, queue_name)
    await conn.pipeline([{"cmd": "AddLog", "id": job_id, "message": f"m{i}"} for i in range(130)])
    assert await messages(conn, job_id, start=0, end=0) == (["m30"], 100)
    assert await messages(conn, job_id, start=-1) == (["m129"], 100)


async def test_clear_logs_keep_rules(conn: Connection, queue_name: str) -> None:
    job_id = await job(conn, queue_name)
    for i in range(6):
        await call(conn, {"cmd": "AddLog", "id": job_id, "message": f"m{i + 1}"})
    for keep in ("abc", float("nan"), True):
        refused = await call(conn, {"cmd": "ClearLogs", "id": job_id, "keepLogs": keep})
        assert refused == {"ok": False, "error": "keepLogs must be a number"}
    assert (await messages(conn, job_id))[1] == 6
    await call(conn, {"cmd": "ClearLogs", "id": job_id, "keepLogs": 10})
    assert (await messages(conn, job_id))[1] == 6
    await call(conn, {"cmd": "ClearLogs", "id": job_id, "keepLogs": float("inf")})
    assert (await messages(conn, job_id))[1] == 6
    await call(conn, {"cmd": "ClearLogs", "id": job_id, "keepLogs": "5"})
    assert await messages(conn, job_id) == (["m2", "m3", "m4", "m5", "m6"], 5)
    await call(conn, {"cmd": "ClearLogs", "id": job_id, "keepLogs": 2.5})
    assert await messages(conn, job_id) == (["m5", "m6"], 2)
    await call(conn, {"cmd": "ClearLogs", "id": job_id, "keepLogs": -1})
    assert await messages(conn, job_id) == ([], 0)
    await call(conn, {"cmd": "AddLog", "id": job_id, "message": "again"})
    await call(conn, {"cmd": "ClearLogs", "id": job_id})
    assert await messages(conn, job_id) == ([], 0)


@pytest.mark.parametrize(
    ("cmd", "error"),
    [
        ({"cmd": "AddLog", "message": 5}, "message must be a string"),
        ({"cmd": "AddLog"}, "message must be a string"),
        ({"cmd": "AddLog", "message": "m", "level": 3}, "level must be a string"),
        ({"cmd": "GetLogs", "start": "1"}, "start must be a number"),
        ({"cmd": "GetLogs", "end": float("inf")}, "end must be a finite number"),
    ],
    ids=["message-type", "message-missing", "level", "start", "end"],
)
async def test_validation(conn: Connection, queue_name: str, cmd: dict[str, Any], error: str) -> None:
    job_id = await job(conn, queue_name)
    assert (await call(conn, {"id": job_id, **cmd}))["error"] == error


async def test_logs_go_with_their_job(conn: Connection, queue_name: str) -> None:
    job_id = await job(conn, queue_name)
    await call(conn, {"cmd": "AddLog", "id": job_id, "message": "m"})
    await call(conn, {"cmd": "Cancel", "id": job_id})
    assert await messages(conn, job_id) == ([], 0)
