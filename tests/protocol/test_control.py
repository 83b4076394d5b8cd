"""Job control commands over a real socket: Cancel, Update, ChangePriority, Promote(Jobs), MoveToDelayed,
ChangeDelay, MoveToWait, Discard, Progress/GetProgress and WaitJob, with their errors and the races that
break in practice (a waited-for job removed, a lease token that changed)."""
from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bunqueue._testbase.frames import call
from bunqueue.client import Connection


async def push(conn: Connection, queue: str, name: str, **opts: Any) -> str:
    reply = await call(conn, {"cmd": "PUSH", "queue": queue, "name": name, "data": {"n": name}, **opts})
    assert reply["ok"], reply
    return str(reply["id"])


async def state(conn: Connection, job_id: str) -> str:
    return str((await call(conn, {"cmd": "GetState", "id": job_id}))["state"])


async def counts(conn: Connection, queue: str) -> dict[str, int]:
    return dict((await call(conn, {"cmd": "GetJobCounts", "queue": queue}))["counts"])


async def pulled_names(conn: Connection, queue: str) -> list[str]:
    reply = await call(conn, {"cmd": "PULLB", "queue": queue, "count": 100})
    return [job["name"] for job in reply["jobs"]]


# -- Cancel ---------------------------------------------------------------------------------------------


async def test_cancel_removes_waiting_delayed_and_dependent_jobs(conn: Connection, queue_name: str) -> None:
    waiting = await push(conn, queue_name, "w")
    delayed = await push(conn, queue_name, "d", delay=60000)
    blocker = await push(conn, queue_name, "b", delay=60000)
    dependent = await push(conn, queue_name, "c", dependsOn=[blocker])
    assert await state(conn, dependent) == "waiting-children"
    for job_id in (waiting, delayed, dependent):
        assert await call(conn, {"cmd": "Cancel", "id": job_id}) == {"ok": True}
        assert await state(conn, job_id) == "unknown"
    assert await counts(conn, queue_name) == {
        "waiting": 0, "prioritized": 0, "delayed": 1, "active": 0, "completed": 0, "failed": 0,
        "waiting-children": 0, "paused": 0}
    again = await call(conn, {"cmd": "Cancel", "id": waiting})
    assert again == {"ok": False, "error": "Job not found or cannot be cancelled"}


async def test_cancel_refuses_active_and_finished_jobs(conn: Connection, queue_name: str) -> None:
    job_id = await push(conn, queue_name, "a")
    await call(conn, {"cmd": "PULL", "queue": queue_name})
    assert (await call(conn, {"cmd": "Cancel", "id": job_id}))["error"] == "Job not found or cannot be cancelled"
    await call(conn, {"cmd": "ACK", "id": job_id})
    assert (await call(conn, {"cmd": "Cancel", "id": job_id}))["ok"] is False
    assert (await call(conn, {"cmd": "Cancel"}))["error"] == "Job not found or cannot be cancelled"


async def test_cancel_releases_the_unique_key(conn: Connection, queue_name: str) -> None:
    first = await push(conn, queue_name, "u", uniqueKey="k")
    assert await push(conn, queue_name, "u2", uniqueKey="k") == first
    await call(conn, {"cmd": "Cancel", "id": first})
    assert await push(conn, queue_name, "u3", uniqueKey="k") != first


# -- Update and ChangePriority ---------------------------------------------------------------------------


async def test_update_replaces_data_of_live_jobs_only(conn: Connection, queue_name: str) -> None:
    job_id = await push(conn, queue_name, "a")
    assert await call(conn, {"cmd": "Update", "id": job_id, "data": {"v": 2}}) == {"ok": True}
    assert (await call(conn, {"cmd": "GetJob", "id": job_id}))["job"]["data"] == {"v": 2}
    await call(conn, {"cmd": "PULL", "queue": queue_name})
    assert (await call(conn, {"cmd": "Update", "id": job_id, "data": [1]}))["ok"]
    await call(conn, {"cmd": "ACK", "id": job_id})
    refused = await call(conn, {"cmd": "Update", "id": job_id, "data": 3})
    assert refused == {"ok": False, "error": "Job not found or cannot be updated"}
    assert (await call(conn, {"cmd": "Update", "id": "nope", "data": 3}))["ok"] is False


async def test_update_without_data_clears_it(conn: Connection, queue_name: str) -> None:
    job_id = await push(conn, queue_name, "a")
    await call(conn, {"cmd": "Update", "id": job_id})
    assert "data" not in (await call(conn, {"cmd": "GetJob", "id": job_id}))["job"]


async def test_update_keeps_flow_metadata(conn: Connection, queue_name: str) -> None:
    job_id = (await call(conn, {"cmd": "PUSH", "queue": queue_name, "name": "kid",
                                  "data": {"__parentId": "p", "x": 1}}))["id"]
    assert (await call(conn, {"cmd": "Update", "id": job_id, "data": 5}))["error"] == (
        "flow job data must be an object")
    assert (await call(conn, {"cmd": "Update", "id": job_id, "data": {"__x": 1}}))["error"] == (
        "flow job data key is reserved: __x")
    await call(conn, {"cmd": "Update", "id": job_id, "data": {"y": 2}})
    assert (await call(conn, {"cmd": "GetJob", "id": job_id}))["job"]["data"] == {"y": 2, "__parentId": "p"}


async def test_change_priority_reorders_and_keeps_counts(conn: Connection, queue_name: str) -> None:
    ids = [await push(conn, queue_name, name, priority=1) for name in ("a", "b", "c")]
    await push(conn, queue_name, "later", delay=60000, priority=1)
    assert (await call(conn, {"cmd": "ChangePriority", "id": ids[2], "priority": 1, "lifo": True}))["ok"]
    assert (await call(conn, {"cmd": "ChangePriority", "id": ids[0], "priority": "0"}))["ok"]
    got = await call(conn, {"cmd": "GetCountsPerPriority", "queue": queue_name})
    assert got == {"ok": True, "queue": queue_name, "counts": {"0": 1, "1": 3}}
    c = await counts(conn, queue_name)
    assert (c["waiting"], c["prioritized"], c["delayed"]) == (1, 2, 1)
    assert await pulled_names(conn, queue_name) == ["c", "b", "a"]


async def test_change_priority_errors(conn: Connection, queue_name: str) -> None:
    job_id = await push(conn, queue_name, "a")
    nan = await call(conn, {"cmd": "ChangePriority", "id": job_id, "priority": float("nan")})
    assert nan["error"] == "priority must be a finite number"
    text = await call(conn, {"cmd": "ChangePriority", "id": job_id, "priority": "high"})
    assert text["error"] == "priority must be a number"
    assert (await call(conn, {"cmd": "ChangePriority", "id": job_id, "lifo": 1}))["error"] == (
        "lifo must be a boolean")
    await call(conn, {"cmd": "PULL", "queue": queue_name})
    active = await call(conn, {"cmd": "ChangePriority", "id": job_id, "priority": 3})
    assert active == {"ok": False, "error": "Job not found or not in queue"}


async def test_change_priority_of_grouped_job(conn: Connection, queue_name: str) -> None:
    await push(conn, queue_name, "g1", groupId="G", priority=1)
    late = await push(conn, queue_name, "g2", groupId="G", priority=5)
    await call(conn, {"cmd": "ChangePriority", "id": late, "priority": 0})
    assert await pulled_names(conn, queue_name) == ["g2", "g1"]


# -- Promote, PromoteJobs ---------------------------------------------------------------------------------


async def test_promote_and_promote_jobs(conn: Connection, queue_name: str) -> None:
    ids = [await push(conn, queue_name, f"d{i}", delay=60000) for i in range(3)]
    waiting = await push(conn, queue_name, "w")
    # Promoted jobs run from the time of promotion: later than the waiting job, not in the same ms.
    await asyncio.sleep(0.005)
    assert await call(conn, {"cmd": "Promote", "id": ids[1]}) == {"ok": True}
    assert await state(conn, ids[1]) == "waiting"
    for job_id in (ids[1], waiting, "nope"):
        assert (await call(conn, {"cmd": "Promote", "id": job_id}))["error"] == "Job not found or not delayed"
    await asyncio.sleep(0.005)
    assert (await call(conn, {"cmd": "PromoteJobs", "queue": queue_name, "count": 1}))["count"] == 1
    assert await state(conn, ids[0]) == "waiting" and await state(conn, ids[2]) == "delayed"
    assert (await call(conn, {"cmd": "PromoteJobs", "queue": queue_name, "count": -4}))["count"] == 0
    assert (await call(conn, {"cmd": "PromoteJobs", "queue": queue_name}))["count"] == 1
    assert (await call(conn, {"cmd": "PromoteJobs", "queue": "nothing-here"}))["count"] == 0
    assert await pulled_names(conn, queue_name) == ["w", "d1", "d0", "d2"]


async def test_promote_wakes_a_long_poll(conn: Connection, conn2: Connection, queue_name: str) -> None:
    job_id = await push(conn, queue_name, "d", delay=60000)
    waiting = conn2.request_nowait({"cmd": "PULL", "queue": queue_name, "timeout": 5000})
    await asyncio.sleep(0.05)
    await call(conn, {"cmd": "Promote", "id": job_id})
    assert (await asyncio.wait_for(waiting, 2))["job"]["id"] == job_id


# -- MoveToDelayed, ChangeDelay, MoveToWait ---------------------------------------------------------------


async def test_move_to_delayed_from_active_needs_the_current_token(conn: Connection, queue_name: str) -> None:
    job_id = await push(conn, queue_name, "m")
    token = (await call(conn, {"cmd": "PULL", "queue": queue_name, "owner": "w"}))["token"]
    missing = await call(conn, {"cmd": "MoveToDelayed", "id": job_id, "delay": 1000})
    assert missing["error"] == f"Lock token required for job {job_id}"
    wrong = await call(conn, {"cmd": "MoveToDelayed", "id": job_id, "delay": 1000, "token": "x"})
    assert wrong["error"] == f"Invalid or expired lock token for job {job_id}"
    assert (await call(conn, {"cmd": "MoveToDelayed", "id": job_id, "delay": 60000, "token": token}))["ok"]
    job = (await call(conn, {"cmd": "GetJob", "id": job_id}))["job"]
    assert (job["state"], job["attempts"], job["startedAt"]) == ("delayed", 0, None)
    # The old token belongs to a lease that ended with the move.
    assert (await call(conn, {"cmd": "ACK", "id": job_id, "token": token}))["ok"] is False
    c = await counts(conn, queue_name)
    assert (c["active"], c["delayed"]) == (0, 1)


async def test_a_token_from_an_earlier_delivery_is_refused(conn: Connection, queue_name: str) -> None:
    job_id = await push(conn, queue_name, "t")
    first = (await call(conn, {"cmd": "PULL", "queue": queue_name, "owner": "w"}))["token"]
    assert (await call(conn, {"cmd": "MoveToWait", "id": job_id, "token": first}))["ok"]
    second = (await call(conn, {"cmd": "PULL", "queue": queue_name, "owner": "w"}))["token"]
    assert second != first
    for cmd in ("MoveToDelayed", "ChangeDelay", "MoveToWait", "Discard"):
        stale = await call(conn, {"cmd": cmd, "id": job_id, "delay": 10, "token": first})
        assert stale["error"] == f"Invalid or expired lock token for job {job_id}", cmd
    assert await state(conn, job_id) == "active"
    assert (await call(conn, {"cmd": "ACK", "id": job_id, "token": second}))["ok"]


async def test_move_to_delayed_errors(conn: Connection, queue_name: str) -> None:
    assert (await call(conn, {"cmd": "MoveToDelayed", "id": "nope", "delay": 5}))["error"] == "Job not found"
    job_id = await push(conn, queue_name, "a")
    await call(conn, {"cmd": "PULL", "queue": queue_name})
    await call(conn, {"cmd": "ACK", "id": job_id})
    done = await call(conn, {"cmd": "MoveToDelayed", "id": job_id, "delay": 5})
    assert done["error"] == "Job is not active (current state: completed)"
    assert (await call(conn, {"cmd": "MoveToDelayed", "id": job_id}))["error"] == "delay is required"


async def test_change_delay_rules(conn: Connection, queue_name: str) -> None:
    ready = await push(conn, queue_name, "ready")
    later = await push(conn, queue_name, "later", delay=60000)
    for delay, error in [(float("nan"), "delay must be a finite number"), (float("inf"),
                         "delay must be a finite number"), ("abc", "delay must be a number"), (None,
                         "delay is required")]:
        cmd = {"cmd": "ChangeDelay", "id": later} | ({} if delay is None else {"delay": delay})
        assert (await call(conn, cmd))["error"] == error
    assert (await call(conn, {"cmd": "ChangeDelay", "id": later, "delay": "120000"}))["ok"]
    assert await state(conn, later) == "delayed"
    assert (await call(conn, {"cmd": "ChangeDelay", "id": ready, "delay": 60000}))["ok"]
    assert await state(conn, ready) == "delayed"
    # A negative delay is a run time in the past: ready at once, ahead of later ready jobs.
    await call(conn, {"cmd": "ChangeDelay", "id": later, "delay": -5000})
    await call(conn, {"cmd": "ChangeDelay", "id": ready, "delay": 0})
    assert await pulled_names(conn, queue_name) == ["later", "ready"]
    missing = await call(conn, {"cmd": "ChangeDelay", "id": "nope", "delay": 1})
    assert missing["error"] == "Job not found or cannot change delay"


async def test_move_to_wait_by_state(conn: Connection, queue_name: str) -> None:
    job_id = await push(conn, queue_name, "j", maxAttempts=1)
    assert await call(conn, {"cmd": "MoveToWait", "id": job_id}) == {"ok": True}
    await call(conn, {"cmd": "PULL", "queue": queue_name})
    assert (await call(conn, {"cmd": "MoveToWait", "id": job_id}))["ok"]
    assert await state(conn, job_id) == "waiting"
    await call(conn, {"cmd": "ChangeDelay", "id": job_id, "delay": 60000})
    await call(conn, {"cmd": "MoveToWait", "id": job_id})
    assert await state(conn, job_id) == "waiting"
    await call(conn, {"cmd": "PULL", "queue": queue_name})
    await call(conn, {"cmd": "FAIL", "id": job_id, "error": "x"})
    assert (await call(conn, {"cmd": "MoveToWait", "id": job_id}))["ok"]
    job = (await call(conn, {"cmd": "GetJob", "id": job_id}))["job"]
    assert (job["state"], job["attempts"]) == ("waiting", 0)
    await call(conn, {"cmd": "PULL", "queue": queue_name})
    await call(conn, {"cmd": "ACK", "id": job_id})
    done = await call(conn, {"cmd": "MoveToWait", "id": job_id})
    assert done["error"] == "Cannot move job from state 'completed' to waiting"
    unknown = await call(conn, {"cmd": "MoveToWait", "id": "nope"})
    assert unknown["error"] == "Cannot move job from state 'unknown' to waiting"


# -- Discard --------------------------------------------------------------------------------------------


async def test_discard_files_waiting_and_active_jobs_as_unknown(conn: Connection, queue_name: str) -> None:
    waiting = await push(conn, queue_name, "w", removeOnFail=True)
    active = await push(conn, queue_name, "a")
    await call(conn, {"cmd": "Discard", "id": waiting})
    token = (await call(conn, {"cmd": "PULL", "queue": queue_name, "owner": "o"}))["token"]
    assert (await call(conn, {"cmd": "Discard", "id": active}))["error"] == (
        f"Lock token required for job {active}")
    assert (await call(conn, {"cmd": "Discard", "id": active, "token": token}))["ok"]
    dlq = await call(conn, {"cmd": "Dlq", "queue": queue_name})
    assert [j["id"] for j in dlq["jobs"]] == [waiting, active]
    first = dlq["entries"][0]
    assert (first["reason"], first["error"]) == ("unknown", None)
    assert first["attempts"][0]["attempt"] == 0 and first["attempts"][0]["startedAt"] is not None
    c = await counts(conn, queue_name)
    assert (c["failed"], c["active"], c["waiting"]) == (2, 0, 0)
    for job_id in (waiting, "nope"):
        assert (await call(conn, {"cmd": "Discard", "id": job_id}))["error"] == "Job not found"


# -- Progress --------------------------------------------------------------------------------------------


async def test_progress_roundtrip_and_normalisation(conn: Connection, queue_name: str) -> None:
    job_id = await push(conn, queue_name, "p")
    not_active = await call(conn, {"cmd": "Progress", "id": job_id, "progress": 5})
    assert not_active["error"] == "Job is not active (current state: waiting)"
    assert (await call(conn, {"cmd": "GetProgress", "id": "nope"}))["error"] == "Job not found"
    await call(conn, {"cmd": "PULL", "queue": queue_name})
    for sent, message, expected in [
        (42, None, (42, None)), (150, "over", (100, "over")), (-3, None, (0, "over")),
        ("50", None, (50, "over")), ("downloading", None, (0, "downloading")),
        ({"step": 2}, None, (0, '{"step":2}')), (float("nan"), "m", (0, "m")),
    ]:
        cmd = {"cmd": "Progress", "id": job_id, "progress": sent}
        if message is not None:
            cmd["message"] = message
        assert (await call(conn, cmd))["ok"]
        got = await call(conn, {"cmd": "GetProgress", "id": job_id})
        assert (got["progress"], got["message"]) == expected, sent
    assert (await call(conn, {"cmd": "Progress", "id": job_id, "progress": 1, "message": 3}))["error"] == (
        "message must be a string")


# -- WaitJob ---------------------------------------------------------------------------------------------


async def test_wait_job_resolves_on_completion(conn: Connection, conn2: Connection, queue_name: str) -> None:
    job_id = await push(conn, queue_name, "w")
    waiting = conn2.request_nowait({"cmd": "WaitJob", "id": job_id, "timeout": 5000})
    await asyncio.sleep(0.05)
    await call(conn, {"cmd": "PULL", "queue": queue_name})
    await call(conn, {"cmd": "ACK", "id": job_id, "result": {"r": 1}})
    reply = await asyncio.wait_for(waiting, 2)
    assert (reply["completed"], reply["result"]) == (True, {"r": 1})
    again = await call(conn, {"cmd": "WaitJob", "id": job_id})
    assert (again["completed"], again["result"]) == (True, {"r": 1})


async def test_wait_job_resolves_false_when_the_job_is_removed(conn: Connection, conn2: Connection,
                                                                queue_name: str) -> None:
    job_id = await push(conn, queue_name, "gone")
    waiting = conn2.request_nowait({"cmd": "WaitJob", "id": job_id, "timeout": 10000})
    await asyncio.sleep(0.05)
    await call(conn, {"cmd": "Cancel", "id": job_id})
    reply = await asyncio.wait_for(waiting, 2)
    assert (reply["ok"], reply["completed"], "result" in reply) == (True, False, False)


async def test_wait_job_with_remove_on_complete_reports_completion(conn: Connection, conn2: Connection,
                                                                    queue_name: str) -> None:
    job_id = await push(conn, queue_name, "r")
    waiting = conn2.request_nowait({"cmd": "WaitJob", "id": job_id, "timeout": 5000})
    await asyncio.sleep(0.05)
    await call(conn, {"cmd": "PULL", "queue": queue_name})
    await call(conn, {"cmd": "ACK", "id": job_id, "result": 1, "removeOnComplete": True})
    reply = await asyncio.wait_for(waiting, 2)
    assert reply["completed"] is True and "result" not in reply


async def test_wait_job_times_out_and_validates(conn: Connection, queue_name: str) -> None:
    job_id = await push(conn, queue_name, "slow")
    reply = await call(conn, {"cmd": "WaitJob", "id": job_id, "timeout": 100})
    assert (reply["ok"], reply["completed"]) == (True, False)
    assert (await call(conn, {"cmd": "WaitJob", "id": "nope"}))["error"] == "Job not found"
    for timeout, error in [(600001, "timeout must be at most 600000"), (-1, "timeout must be at least 0"),
                           ("5", "timeout must be a number")]:
        assert (await call(conn, {"cmd": "WaitJob", "id": job_id, "timeout": timeout}))["error"] == error


async def test_wait_job_keeps_waiting_through_a_dlq_retry(conn: Connection, conn2: Connection,
                                                          queue_name: str) -> None:
    job_id = await push(conn, queue_name, "f", maxAttempts=1)
    waiting = conn2.request_nowait({"cmd": "WaitJob", "id": job_id, "timeout": 5000})
    await call(conn, {"cmd": "PULL", "queue": queue_name})
    await call(conn, {"cmd": "FAIL", "id": job_id, "error": "x"})
    await asyncio.sleep(0.05)
    assert not waiting.done()
    await call(conn, {"cmd": "RetryDlq", "queue": queue_name, "jobId": job_id})
    await call(conn, {"cmd": "PULL", "queue": queue_name})
    await call(conn, {"cmd": "ACK", "id": job_id, "result": "second time"})
    assert (await asyncio.wait_for(waiting, 2))["result"] == "second time"


async def test_closing_a_connection_drops_its_job_waits(server: Any, queue_name: str) -> None:
    from bunqueue.client import connect

    c = await connect(*server.addr)
    job_id = await push(c, queue_name, "w")
    c.request_nowait({"cmd": "WaitJob", "id": job_id, "timeout": 60000})
    await asyncio.sleep(0.05)
    c.abort()
    other = await connect(*server.addr)
    try:
        await call(other, {"cmd": "PULL", "queue": queue_name})
        assert (await call(other, {"cmd": "ACK", "id": job_id}))["ok"]
    finally:
        await other.close()


@pytest.mark.parametrize("cmd", ["Cancel", "Update", "ChangePriority", "Promote", "Discard", "MoveToWait"])
async def test_unknown_id_types_answer_like_unknown_ids(conn: Connection, cmd: str) -> None:
    reply = await call(conn, {"cmd": cmd, "id": 12345})
    assert reply["ok"] is False
