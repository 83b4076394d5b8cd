"""Job-level `repeat` on PUSH and PUSHB: refusals, the successor after each ACK, Update through the chain."""
from __future__ import annotations

import math
import time
from typing import Any

import pytest

from bunqueue._testbase.frames import RawClient

RELATIONS = "repeat jobs cannot participate in parent or dependency relationships"
JOB_ID = "repeat jobs cannot use JobOptions.jobId; use repeat.jobId instead"



def jobs(c: RawClient, queue: str) -> list[dict[str, Any]]:
    return sorted(c.ok({"cmd": "GetJobs", "queue": queue})["jobs"], key=lambda job: job["createdAt"])


def test_every_successor_after_ack_until_the_limit(raw: RawClient, queue_name: str) -> None:
    first = raw.ok({"cmd": "PUSH", "queue": queue_name, "name": "r", "data": {"a": 1},
                     "repeat": {"every": 1000, "limit": 2}, "priority": 2, "maxAttempts": 4})["id"]
    job = raw.ok({"cmd": "PULL", "queue": queue_name})["job"]
    assert job["id"] == first
    assert job["repeat"] == {"every": 1000, "limit": 2, "count": 0}
    before = math.floor(time.time() * 1000)
    assert raw.call({"cmd": "ACK", "id": first}) == {"ok": True}
    done, successor = jobs(raw, queue_name)
    assert done["id"] == first and done["state"] == "completed"
    assert successor["state"] == "delayed"
    assert successor["repeat"]["count"] == 1 and successor["repeat"]["every"] == 1000
    assert successor["repeat"]["prevMillis"] == successor["runAt"]
    assert before + 1000 <= successor["runAt"] <= time.time() * 1000 + 1000
    assert (successor["name"], successor["data"], successor["priority"], successor["maxAttempts"]) == (
        "r", {"a": 1}, 2, 4
    )
    # count 1 < limit 2: one more generation; count 2 is the last.
    raw.ok({"cmd": "Promote", "id": successor["id"]})
    raw.ok({"cmd": "PULL", "queue": queue_name})
    raw.ok({"cmd": "ACK", "id": successor["id"]})
    third = jobs(raw, queue_name)[-1]
    assert third["repeat"]["count"] == 2
    raw.ok({"cmd": "Promote", "id": third["id"]})
    raw.ok({"cmd": "PULL", "queue": queue_name})
    raw.ok({"cmd": "ACK", "id": third["id"]})
    assert len(jobs(raw, queue_name)) == 3


def test_a_failed_attempt_does_not_repeat(raw: RawClient, queue_name: str) -> None:
    job_id = raw.ok({"cmd": "PUSH", "queue": queue_name, "name": "r", "data": 1, "maxAttempts": 1,
                      "repeat": {"every": 500}})["id"]
    raw.ok({"cmd": "PULL", "queue": queue_name})
    raw.ok({"cmd": "FAIL", "id": job_id, "error": "no"})
    assert [(job["id"], job["state"]) for job in jobs(raw, queue_name)] == [(job_id, "failed")]


def test_pattern_successor_runs_at_the_next_occurrence(raw: RawClient, queue_name: str) -> None:
    job_id = raw.ok({"cmd": "PUSH", "queue": queue_name, "name": "p", "data": 1,
                      "repeat": {"pattern": "0 9 * * *", "tz": "Asia/Tokyo"}})["id"]
    raw.ok({"cmd": "PULL", "queue": queue_name})
    raw.ok({"cmd": "ACK", "id": job_id})
    successor = jobs(raw, queue_name)[-1]
    assert successor["runAt"] % 86_400_000 == 0  # 09:00 in Tokyo is midnight UTC
    assert successor["repeat"] == {"pattern": "0 9 * * *", "tz": "Asia/Tokyo", "count": 1,
                                   "prevMillis": successor["runAt"]}


def test_end_date_ends_the_chain(raw: RawClient, queue_name: str) -> None:
    end = time.time() * 1000 + 500
    job_id = raw.ok({"cmd": "PUSH", "queue": queue_name, "name": "e", "data": 1,
                      "repeat": {"every": 1000, "endDate": end}})["id"]
    raw.ok({"cmd": "PULL", "queue": queue_name})
    raw.ok({"cmd": "ACK", "id": job_id})
    assert len(jobs(raw, queue_name)) == 1


def test_update_of_a_finished_generation_reaches_its_successor(raw: RawClient, queue_name: str) -> None:
    job_id = raw.ok({"cmd": "PUSH", "queue": queue_name, "name": "u", "data": {"v": 1},
                      "repeat": {"every": 60000}})["id"]
    raw.ok({"cmd": "PULL", "queue": queue_name})
    raw.ok({"cmd": "ACK", "id": job_id})
    assert raw.call({"cmd": "Update", "id": job_id, "data": {"v": 2}}) == {"ok": True}
    done, successor = jobs(raw, queue_name)
    assert done["data"] == {"v": 1} and successor["data"] == {"v": 2}


def test_successor_of_a_batch_job(raw: RawClient, queue_name: str) -> None:
    ids = raw.ok({"cmd": "PUSHB", "queue": queue_name, "jobs": [
        {"name": "plain", "data": 1}, {"name": "rep", "data": 2, "repeat": {"every": 60000, "limit": 1}},
    ]})["ids"]
    raw.ok({"cmd": "PULLB", "queue": queue_name, "count": 2})
    raw.ok({"cmd": "ACKB", "ids": ids})
    states = [(job["name"], job["state"]) for job in jobs(raw, queue_name)]
    assert states == [("plain", "completed"), ("rep", "completed"), ("rep", "delayed")]


@pytest.mark.parametrize(
    "repeat, error",
    [
        ({}, "repeat requires exactly one of every or pattern"),
        ({"every": 1000, "pattern": "* * * * *"}, "repeat requires exactly one of every or pattern"),
        ({"every": -1}, "repeat.every must be a positive finite number"),
        ({"every": 0}, "repeat.every must be a positive finite number"),
        ({"pattern": "bogus"},
         "Invalid repeat pattern: Cron expression must have 5 fields, or 6 fields with leading seconds"),
        ({"pattern": "0 0 30 2 *"}, "Invalid repeat pattern: Cron expression has no future occurrences"),
        ({"pattern": "0 9 * * *", "tz": "Mars/X"}, "Invalid repeat pattern: Bun.cron: unknown time zone 'Mars/X'"),
        ({"every": 100, "startDate": "x"}, "repeat.startDate must be a number"),
        ({"every": 100, "endDate": {}}, "repeat.endDate must be a number"),
        ({"every": 100, "offset": "x"}, "repeat.offset must be a finite timestamp"),
        ({"every": 100, "prevMillis": []}, "repeat.prevMillis must be a finite timestamp"),
        ({"every": 100, "limit": "x"}, "repeat.limit must be a number"),
        ("every", "repeat requires exactly one of every or pattern"),
    ],
)
def test_refused_repeat_options(raw: RawClient, queue_name: str, repeat: Any, error: str) -> None:
    reply = raw.call({"cmd": "PUSH", "queue": queue_name, "name": "x", "data": 1, "repeat": repeat})
    assert reply == {"ok": False, "error": error}
    assert raw.ok({"cmd": "Count", "queue": queue_name})["count"] == 0


def test_refused_relations(raw: RawClient, queue_name: str) -> None:
    dep = raw.ok({"cmd": "PUSH", "queue": queue_name, "name": "dep", "data": 1})["id"]
    base = {"cmd": "PUSH", "queue": queue_name, "name": "x", "data": 1, "repeat": {"every": 100}}
    assert raw.call({**base, "jobId": "custom-1"}) == {"ok": False, "error": JOB_ID}
    assert raw.call({**base, "dependsOn": [dep]}) == {"ok": False, "error": RELATIONS}
    assert raw.call({**base, "parentId": dep}) == {"ok": False, "error": RELATIONS}
    assert raw.call({**base, "childrenIds": [dep]}) == {"ok": False, "error": RELATIONS}
    # A missing dependency is reported first, as in the reference.
    assert raw.call({**base, "dependsOn": ["nope"]}) == {"ok": False, "error": "Dependency job not found: nope"}
    batch = raw.call({"cmd": "PUSHB", "queue": queue_name, "jobs": [
        {"name": "a", "data": 1}, {"name": "b", "data": 1, "customId": "c-2", "repeat": {"every": 100}},
    ]})
    assert batch == {"ok": False, "error": f"jobs[1]: {JOB_ID}"}
    assert raw.ok({"cmd": "Count", "queue": queue_name})["count"] == 1
