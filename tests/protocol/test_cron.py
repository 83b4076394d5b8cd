"""Cron, CronDelete, CronList, CronGet over a real socket, and the jobs crons push.

Crons are server-wide, so these tests share one server of their own and use distinct cron names; the
exact CronList test looks only at its own names.
"""
from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import Any

import pytest

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.server import ServerProcess

REPEAT_EVERY = "Cron repeatEvery must be a positive safe integer number of milliseconds"
FIELD_COUNT = "Invalid cron expression: Cron expression must have 5 fields, or 6 fields with leading seconds"


@pytest.fixture(scope="module")
def cron_server() -> Iterator[ServerProcess]:
    proc = ServerProcess(env={"RATE_LIMIT_MAX_REQUESTS": "0"}).start()
    yield proc
    proc.stop()


@pytest.fixture
def c(cron_server: ServerProcess) -> Iterator[RawClient]:
    client = RawClient(cron_server.addr)
    yield client
    client.close()



def refused(client: RawClient, cmd: dict[str, Any]) -> str:
    reply = client.call(cmd)
    assert reply["ok"] is False, reply
    return str(reply["error"])



def waiting(client: RawClient, queue: str) -> int:
    return int(client.call({"cmd": "GetJobCounts", "queue": queue})["counts"]["waiting"])


def test_create_get_list_update_delete(c: RawClient) -> None:
    before = math.floor(time.time() * 1000)
    created = c.ok({"cmd": "Cron", "name": "crud-a", "queue": "cq-crud", "data": {"x": 1}, "repeatEvery": 60000})
    cron = created["cron"]
    assert before + 60000 <= cron.pop("nextRun") <= time.time() * 1000 + 60000
    assert cron == {
        "name": "crud-a", "jobName": "default", "queue": "cq-crud", "schedule": None, "repeatEvery": 60000,
        "executions": 0, "maxLimit": None, "timezone": None, "priority": 0,
    }
    five = c.ok({
        "cmd": "Cron", "name": "crud-b", "queue": "cq-crud", "data": {"y": 2}, "schedule": "*/5 * * * *",
        "jobName": "tick", "timezone": "Europe/Rome", "priority": 3, "maxLimit": 10,
    })["cron"]
    assert five["nextRun"] % 300000 == 0 and five["nextRun"] > before
    assert (five["schedule"], five["timezone"], five["priority"], five["maxLimit"], five["jobName"]) == (
        "*/5 * * * *", "Europe/Rome", 3, 10, "tick"
    )
    assert c.ok({"cmd": "CronGet", "name": "crud-b"})["cron"] == five
    listed = [x for x in c.ok({"cmd": "CronList"})["crons"] if x["name"].startswith("crud-")]
    assert [x["name"] for x in listed] == ["crud-a", "crud-b"]
    updated = c.ok({
        "cmd": "Cron", "name": "crud-a", "queue": "cq-crud", "data": {"x": 2}, "repeatEvery": 120000,
        "jobName": "renamed",
    })["cron"]
    assert (updated["repeatEvery"], updated["jobName"], updated["executions"]) == (120000, "renamed", 0)
    # An update keeps the cron's place in the listing.
    listed = [x["name"] for x in c.ok({"cmd": "CronList"})["crons"] if x["name"].startswith("crud-")]
    assert listed == ["crud-a", "crud-b"]
    assert c.call({"cmd": "CronDelete", "name": "crud-a"}) == {"ok": True}
    assert refused(c, {"cmd": "CronDelete", "name": "crud-a"}) == "Cron job not found"
    assert refused(c, {"cmd": "CronGet", "name": "crud-a"}) == "Cron job not found"
    assert [x["name"] for x in c.ok({"cmd": "CronList"})["crons"] if x["name"].startswith("crud-")] == ["crud-b"]
    c.ok({"cmd": "CronDelete", "name": "crud-b"})
    assert waiting(c, "cq-crud") == 0


@pytest.mark.parametrize(
    "extra, error",
    [
        ({}, "Cron job must have either schedule or repeatEvery"),
        ({"schedule": ""}, "Cron job must have either schedule or repeatEvery"),
        ({"schedule": "bogus"}, FIELD_COUNT),
        ({"schedule": "* * * * * * *"}, FIELD_COUNT),
        ({"schedule": "61 * * * *"},
         'Invalid cron expression: Invalid cron minute field "61": values must be between 0 and 59'),
        ({"schedule": "0 0 30 2 *"}, "Invalid cron expression: Cron expression has no future occurrences"),
        ({"schedule": "0 9 * * *", "timezone": "Mars/Base"},
         "Invalid cron expression: Bun.cron: unknown time zone 'Mars/Base'"),
        ({"repeatEvery": -1}, REPEAT_EVERY),
        ({"repeatEvery": 0}, REPEAT_EVERY),
        ({"repeatEvery": 1.5}, REPEAT_EVERY),
        ({"repeatEvery": "1000"}, REPEAT_EVERY),
        ({"repeatEvery": 9007199254740992}, REPEAT_EVERY),
        ({"repeatEvery": 1000, "timezone": 5}, "timezone must be a string"),
        ({"repeatEvery": 1000, "priority": "high"}, "priority must be a number"),
        ({"repeatEvery": 1000, "immediately": "yes"}, "immediately must be a boolean"),
        ({"repeatEvery": 1000, "preventOverlap": 1}, "preventOverlap must be a boolean"),
        ({"repeatEvery": 1000, "jobOptions": []}, "jobOptions must be an object"),
        ({"repeatEvery": 1000, "jobOptions": {"timeout": -5}}, "jobOptions.timeout must be at least 0"),
        ({"repeatEvery": 1000, "jobOptions": {"delay": "soon"}}, "jobOptions.delay must be a number"),
        ({"repeatEvery": 1000, "uniqueKey": 7}, "uniqueKey must be a string"),
        ({"repeatEvery": 1000, "dedup": "x"}, "dedup must be an object"),
        ({"repeatEvery": 1000, "jobName": ""}, None),
    ],
)
def test_refusals_name_the_problem(c: RawClient, extra: dict[str, Any], error: str | None) -> None:
    reason = refused(c, {"cmd": "Cron", "name": "bad", "queue": "cq-bad", "data": {}, **extra})
    if error is not None:
        assert reason == error
    else:
        assert "name" in reason.lower()
    assert refused(c, {"cmd": "CronGet", "name": "bad"}) == "Cron job not found"


def test_name_and_queue_are_required(c: RawClient) -> None:
    assert refused(c, {"cmd": "Cron", "queue": "cq", "repeatEvery": 1000}) == "name must be a string"
    assert refused(c, {"cmd": "Cron", "name": "", "queue": "cq", "repeatEvery": 1000}) == (
        "name must be a non-empty string"
    )
    assert "queue" in refused(c, {"cmd": "Cron", "name": "nq", "repeatEvery": 1000}).lower()
    assert "queue" in refused(c, {"cmd": "Cron", "name": "nq", "queue": "a b", "repeatEvery": 1000}).lower()


def test_seconds_and_precedence(c: RawClient) -> None:
    both = c.ok({"cmd": "Cron", "name": "prec-both", "queue": "cq-prec", "data": {}, "schedule": "0 0 1 1 *",
                  "repeatEvery": 1000})["cron"]
    # The schedule wins: the next run is a new year's midnight, not a second from now.
    assert both["nextRun"] > time.time() * 1000 + 86_400_000 and both["repeatEvery"] == 1000
    secs = c.ok({"cmd": "Cron", "name": "prec-secs", "queue": "cq-prec", "data": {},
                  "schedule": "*/30 * * * * *"})["cron"]
    assert secs["nextRun"] % 30000 == 0
    assert c.ok({"cmd": "Cron", "name": "prec-macro", "queue": "cq-prec", "data": {},
                  "schedule": "@daily"})["cron"]["nextRun"] % 86_400_000 == 0
    for name in ("prec-both", "prec-secs", "prec-macro"):
        c.ok({"cmd": "CronDelete", "name": name})


def test_immediately_pushes_at_once_with_the_job_fields(c: RawClient) -> None:
    c.ok({"cmd": "Cron", "name": "now", "queue": "cq-now", "data": {"i": 1}, "repeatEvery": 60000,
           "immediately": True, "jobName": "kick", "priority": 2})
    c.poll({"cmd": "GetJobCounts", "queue": "cq-now"}, lambda r: r["counts"]["prioritized"] == 1)
    job = c.ok({"cmd": "PULL", "queue": "cq-now"})["job"]
    assert (job["name"], job["data"], job["priority"], job["uniqueKey"]) == ("kick", {"i": 1}, 2, "cron:now")
    assert c.ok({"cmd": "CronGet", "name": "now"})["cron"]["executions"] == 1
    c.ok({"cmd": "CronDelete", "name": "now"})


def test_sub_minute_schedules_fire_every_time(c: RawClient) -> None:
    c.ok({"cmd": "Cron", "name": "fast", "queue": "cq-fast", "data": {}, "repeatEvery": 100,
           "preventOverlap": False})
    c.poll({"cmd": "GetJobCounts", "queue": "cq-fast"}, lambda r: r["counts"]["waiting"] >= 5)
    c.ok({"cmd": "CronDelete", "name": "fast"})
    c.ok({"cmd": "Cron", "name": "secs", "queue": "cq-secs", "data": {}, "schedule": "* * * * * *",
           "preventOverlap": False})
    c.poll({"cmd": "GetJobCounts", "queue": "cq-secs"}, lambda r: r["counts"]["waiting"] >= 2)
    c.ok({"cmd": "CronDelete", "name": "secs"})
    # Nothing fires after a delete.
    count = waiting(c, "cq-fast")
    time.sleep(0.3)
    assert waiting(c, "cq-fast") == count


def test_max_limit_stops_the_cron(c: RawClient) -> None:
    c.ok({"cmd": "Cron", "name": "limited", "queue": "cq-limit", "data": {}, "repeatEvery": 50, "maxLimit": 3,
           "preventOverlap": False})
    c.poll({"cmd": "CronList"}, lambda r: all(x["name"] != "limited" for x in r["crons"]))
    assert waiting(c, "cq-limit") == 3


def test_max_limit_zero_or_less_means_no_limit(c: RawClient) -> None:
    for limit in (0, -3):
        cron = c.ok({"cmd": "Cron", "name": "nolimit", "queue": "cq-nl", "data": {}, "repeatEvery": 60000,
                      "maxLimit": limit})["cron"]
        assert cron["maxLimit"] is None
    c.ok({"cmd": "CronDelete", "name": "nolimit"})


def test_prevent_overlap_keeps_one_run_waiting(c: RawClient) -> None:
    c.ok({"cmd": "Cron", "name": "overlap", "queue": "cq-ovl", "data": {}, "repeatEvery": 50})
    c.poll({"cmd": "CronGet", "name": "overlap"}, lambda r: r["cron"]["executions"] >= 4)
    c.ok({"cmd": "CronDelete", "name": "overlap"})
    assert waiting(c, "cq-ovl") == 1


def test_unique_key_and_dedup_pass_to_the_jobs(c: RawClient) -> None:
    c.ok({"cmd": "Cron", "name": "keyed", "queue": "cq-key", "data": {}, "repeatEvery": 50, "uniqueKey": "mine",
           "dedup": {"ttl": 60000}, "preventOverlap": False})
    c.poll({"cmd": "CronGet", "name": "keyed"}, lambda r: r["cron"]["executions"] >= 3)
    c.ok({"cmd": "CronDelete", "name": "keyed"})
    job = c.ok({"cmd": "PULL", "queue": "cq-key"})["job"]
    assert (job["uniqueKey"], job["deduplicationTtl"]) == ("mine", 60000)
    assert waiting(c, "cq-key") == 0


def test_job_options_apply_to_every_job(c: RawClient) -> None:
    c.ok({"cmd": "Cron", "name": "opts", "queue": "cq-opts", "data": {"d": 1}, "repeatEvery": 60000,
           "immediately": True, "jobOptions": {
               "maxAttempts": 5, "backoff": {"type": "fixed", "delay": 250}, "timeout": 9000, "stallTimeout": 8000,
               "removeOnComplete": True, "removeOnFail": True, "delay": 60000,
           }})
    c.poll({"cmd": "GetJobCounts", "queue": "cq-opts"}, lambda r: r["counts"]["delayed"] == 1)
    job = c.ok({"cmd": "GetJobs", "queue": "cq-opts"})["jobs"][0]
    assert (job["maxAttempts"], job["backoff"], job["backoffConfig"]["type"], job["timeout"], job["stallTimeout"],
            job["removeOnComplete"], job["removeOnFail"]) == (5, 250, "fixed", 9000, 8000, True, True)
    assert job["runAt"] - job["createdAt"] == 60000
    c.ok({"cmd": "CronDelete", "name": "opts"})


def test_skip_if_no_worker(c: RawClient, cron_server: ServerProcess) -> None:
    c.ok({"cmd": "Cron", "name": "needs-worker", "queue": "cq-w", "data": {}, "repeatEvery": 50,
           "skipIfNoWorker": True, "preventOverlap": False})
    time.sleep(0.3)
    assert waiting(c, "cq-w") == 0
    assert c.ok({"cmd": "CronGet", "name": "needs-worker"})["cron"]["executions"] == 0
    worker = RawClient(cron_server.addr)
    worker.ok({"cmd": "RegisterWorker", "name": "w", "queues": ["cq-w"]})
    c.poll({"cmd": "GetJobCounts", "queue": "cq-w"}, lambda r: r["counts"]["waiting"] >= 2)
    worker.close()
    c.ok({"cmd": "CronDelete", "name": "needs-worker"})


def test_time_zone_next_run(c: RawClient) -> None:
    cron = c.ok({"cmd": "Cron", "name": "tokyo", "queue": "cq-tz", "data": {}, "schedule": "0 9 * * *",
                  "timezone": "Asia/Tokyo"})["cron"]
    # 09:00 in Tokyo (UTC+9, no daylight saving) is 00:00 UTC.
    assert cron["nextRun"] % 86_400_000 == 0 and cron["timezone"] == "Asia/Tokyo"
    c.ok({"cmd": "CronDelete", "name": "tokyo"})


def test_legacy_job_name_in_data(c: RawClient) -> None:
    cron = c.ok({"cmd": "Cron", "name": "legacy", "queue": "cq-leg", "data": {"name": "inner", "v": 1},
                  "repeatEvery": 60000})["cron"]
    assert cron["jobName"] == "inner"
    c.ok({"cmd": "CronDelete", "name": "legacy"})



def spawn_and_pull(c: RawClient, server: ServerProcess, name: str, queue: str, **pull: Any) -> tuple[RawClient, str]:
    """A cron's first job, pulled by a worker of its own connection."""
    c.ok({"cmd": "Cron", "name": name, "queue": queue, "data": {}, "repeatEvery": 3_600_000, "immediately": True})
    c.poll({"cmd": "GetJobCounts", "queue": queue}, lambda r: r["counts"]["waiting"] == 1)
    worker = RawClient(server.addr)
    job = worker.ok({"cmd": "PULL", "queue": queue, **pull})["job"]
    assert job["uniqueKey"] == f"cron:{name}"
    return worker, job["id"]


def gone(c: RawClient, queue: str, job_id: str, timeout: float = 5.0) -> None:
    c.poll({"cmd": "GetJob", "id": job_id}, lambda r: r.get("job") is None, timeout)
    counts = c.ok({"cmd": "GetJobCounts", "queue": queue})["counts"]
    assert counts == {**counts, "waiting": 0, "active": 0, "delayed": 0, "failed": 0}, counts


def test_spawned_job_dropped_when_its_worker_disconnects(c: RawClient, cron_server: ServerProcess) -> None:
    worker, job_id = spawn_and_pull(c, cron_server, "drop-close", "cq-drop-close")
    worker.close()
    gone(c, "cq-drop-close", job_id)
    c.ok({"cmd": "CronDelete", "name": "drop-close"})


def test_spawned_job_dropped_when_its_lease_expires(c: RawClient, cron_server: ServerProcess) -> None:
    worker, job_id = spawn_and_pull(c, cron_server, "drop-lease", "cq-drop-lease", owner="w", lockTtl=100)
    gone(c, "cq-drop-lease", job_id)
    worker.close()
    c.ok({"cmd": "CronDelete", "name": "drop-lease"})


def test_spawned_job_dropped_when_it_stalls(c: RawClient, cron_server: ServerProcess) -> None:
    queue = "cq-drop-stall"
    c.ok({"cmd": "SetStallConfig", "queue": queue, "config": {"stallInterval": 100, "gracePeriod": 0}})
    worker, job_id = spawn_and_pull(c, cron_server, "drop-stall", queue, detach=True)
    # Found stalled after 100 ms, acted on once still stalled one check period (5 s) later.
    gone(c, queue, job_id, timeout=10.0)
    worker.close()
    c.ok({"cmd": "CronDelete", "name": "drop-stall"})


def test_a_job_with_its_own_unique_key_is_requeued(c: RawClient, cron_server: ServerProcess) -> None:
    c.ok({"cmd": "Cron", "name": "keep", "queue": "cq-keep", "data": {}, "repeatEvery": 3_600_000,
           "immediately": True, "uniqueKey": "own-key"})
    c.poll({"cmd": "GetJobCounts", "queue": "cq-keep"}, lambda r: r["counts"]["waiting"] == 1)
    worker = RawClient(cron_server.addr)
    job = worker.ok({"cmd": "PULL", "queue": "cq-keep"})["job"]
    worker.close()
    c.poll({"cmd": "GetState", "id": job["id"]}, lambda r: r.get("state") == "waiting")
    c.ok({"cmd": "CronDelete", "name": "keep"})
