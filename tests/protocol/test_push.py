"""PUSH and PUSHB over a real socket: job shape, options, validation errors, idempotency."""
from __future__ import annotations

import pytest

from bunqueue.client import Connection

JOB_KEYS = [
    "id", "queue", "name", "data", "createdAt", "runAt", "startedAt", "completedAt", "attempts", "backoff",
    "backoffConfig", "dependsOn", "childrenIds", "childrenCompleted", "tags", "progress", "progressMessage",
    "stacktrace", "repeat", "durable", "lastHeartbeat", "stallCount", "priority", "lifo", "maxAttempts",
    "removeOnComplete", "removeOnFail", "ttl", "timeout", "uniqueKey", "customId", "parentId", "groupId",
    "stallTimeout", "stackTraceLimit", "keepLogs", "sizeLimit", "failParentOnFailure",
    "removeDependencyOnFailure", "continueParentOnFailure", "ignoreDependencyOnFailure", "deduplicationTtl",
    "deduplicationExtend", "deduplicationReplace", "debounceId", "debounceTtl", "timeline",
]


async def test_push_returns_uuid7_and_job_has_reference_shape(conn: Connection, queue_name: str) -> None:
    reply = await conn.request({"cmd": "PUSH", "queue": queue_name, "name": "email", "data": {"to": "a"}})
    assert reply["ok"] is True
    job_id = reply["id"]
    assert len(job_id) == 36 and job_id[14] == "7"
    job = (await conn.request({"cmd": "PULL", "queue": queue_name}))["job"]
    assert list(job) == JOB_KEYS
    assert job["id"] == job_id and job["queue"] == queue_name and job["name"] == "email"
    assert job["data"] == {"to": "a"}
    assert (job["attempts"], job["maxAttempts"], job["backoff"], job["priority"]) == (0, 3, 1000, 0)
    assert job["stackTraceLimit"] == 10 and job["startedAt"] >= job["createdAt"]
    assert [e["state"] for e in job["timeline"]] == ["waiting", "active"]


async def test_timestamps_travel_as_float64(conn: Connection, queue_name: str) -> None:
    """A JS client turns a uint64 into a BigInt; the reference's encoder sends float64."""
    await conn.request({"cmd": "PUSH", "queue": queue_name, "name": "t", "data": 1})
    from bunqueue.client import decode_payload  # noqa: F401  (the client decodes both the same way)

    job = (await conn.request({"cmd": "GetJob", "id": (await conn.request(
        {"cmd": "PUSH", "queue": queue_name, "name": "t2", "data": 1}))["id"]}))["job"]
    assert isinstance(job["createdAt"], float) and isinstance(job["runAt"], float)
    assert isinstance(job["timeline"][0]["timestamp"], float)
    assert isinstance(job["priority"], int)


async def test_all_options_are_stored(conn: Connection, queue_name: str) -> None:
    reply = await conn.request({
        "cmd": "PUSH", "queue": queue_name, "name": "full", "data": {"k": "v"}, "priority": 7,
        "delay": 60000, "maxAttempts": 5, "backoff": 250, "ttl": 600000, "timeout": 5000,
        "uniqueKey": "uk", "jobId": f"{queue_name}-custom", "tags": ["a", "b"], "lifo": True,
        "removeOnComplete": True, "removeOnFail": True, "durable": True, "stallTimeout": 1234,
        "stackTraceLimit": 3, "keepLogs": 10, "sizeLimit": 2048, "timestamp": 1700000000000.0,
    })
    assert reply["ok"] is True and reply["id"] == f"{queue_name}-custom"
    job = (await conn.request({"cmd": "GetJob", "id": reply["id"]}))["job"]
    assert job["createdAt"] == 1700000000000 and job["runAt"] == 1700000060000
    assert job["state"] == "prioritized"
    for key, value in [("priority", 7), ("maxAttempts", 5), ("backoff", 250), ("ttl", 600000),
                       ("timeout", 5000), ("uniqueKey", "uk"), ("customId", reply["id"]),
                       ("tags", ["a", "b"]), ("lifo", True), ("removeOnComplete", True),
                       ("removeOnFail", True), ("durable", True), ("stallTimeout", 1234),
                       ("stackTraceLimit", 3), ("keepLogs", 10), ("sizeLimit", 2048)]:
        assert job[key] == value, key


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"delay": float("nan")}, "delay must be a finite number"),
        ({"timeout": float("inf")}, "timeout must be a finite number"),
        ({"timeout": -1}, "timeout must be at least 0"),
        ({"ttl": -5}, "ttl must be at least 0"),
        ({"backoff": -1}, "backoff must be at least 0"),
        ({"priority": "high"}, "priority must be a number"),
        ({"priority": True}, "priority must be a number"),
        ({"maxAttempts": float("nan")}, "maxAttempts must be a finite number"),
        ({"stallTimeout": float("nan")}, "stallTimeout must be a finite number"),
        ({"backoff": {"type": "fixed", "delay": -1}}, "backoff.delay must be at least 0"),
        ({"backoff": {"type": "fixed", "delay": 1, "maxDelay": 86400001}}, "backoff.maxDelay must be at most 86400000"),
        ({"backoff": {"type": "fixed", "delay": 1, "maxDelay": "never"}}, "backoff.maxDelay must be a number"),
        ({"groupId": "g", "priority": 1.5}, "group.priority must be an integer"),
        ({"groupId": "g", "priority": 2097152}, "group.priority must be between 0 and 2097151"),
        ({"groupId": ""}, "groupId must be a non-empty string"),
        ({"groupId": 5}, "groupId must be a string"),
        ({"groupId": "g", "groupMaxSize": 0}, "group.maxSize must be a positive safe integer"),
        ({"name": ""}, "Job name must be a non-empty string of at most 256 characters"),
        ({"name": "n" * 257}, "Job name must be a non-empty string of at most 256 characters"),
        ({"dependsOn": ["no-such-job"]}, "Dependency job not found: no-such-job"),
        ({"tags": "x"}, "tags must be an array of strings of at most 256 characters"),
        ({"lifo": "yes"}, "lifo must be a boolean"),
        ({"repeat": {"every": -1}}, "repeat.every must be a positive finite number"),
    ],
)
async def test_invalid_option_names_the_field(conn: Connection, queue_name: str, options: dict,
                                              error: str) -> None:
    reply = await conn.request({"cmd": "PUSH", "queue": queue_name, "name": "j", "data": 1, **options})
    assert reply == {"ok": False, "error": error, "reqId": reply["reqId"]}
    assert (await conn.request({"cmd": "Count", "queue": queue_name}))["count"] == 0


@pytest.mark.parametrize(
    ("queue", "error"),
    [
        (None, "Queue name is required"),
        ("", "Queue name is required"),
        ("has space", "Queue name contains invalid characters"),
        ("ünïcode", "Queue name contains invalid characters"),
        ("q" * 257, "Queue name too long (max 256 characters)"),
        (5, "Queue name must be a string"),
    ],
)
async def test_queue_name_rules(conn: Connection, queue: object, error: str) -> None:
    cmd = {"cmd": "PUSH", "name": "j", "data": 1}
    if queue is not None:
        cmd["queue"] = queue
    assert (await conn.request(cmd))["error"] == error


async def test_numeric_strings_count_as_numbers(conn: Connection, queue_name: str) -> None:
    await conn.request({"cmd": "PUSH", "queue": queue_name, "name": "low", "data": 1, "priority": 3})
    await conn.request({"cmd": "PUSH", "queue": queue_name, "name": "str", "data": 2, "priority": "5"})
    first = await conn.request({"cmd": "PULL", "queue": queue_name})
    assert first["job"]["name"] == "str" and first["job"]["priority"] == 5


async def test_max_attempts_rules(conn: Connection, queue_name: str) -> None:
    ids = {}
    for name, value in [("zero", 0), ("frac", 1.5), ("inf", float("inf")), ("big", 5000)]:
        ids[name] = (await conn.request(
            {"cmd": "PUSH", "queue": queue_name, "name": name, "data": 1, "maxAttempts": value}))["id"]
    got = {n: (await conn.request({"cmd": "GetJob", "id": i}))["job"]["maxAttempts"] for n, i in ids.items()}
    assert got == {"zero": 1, "frac": 2, "inf": 2147483647, "big": 5000}


async def test_negative_delay_runs_ahead_of_ready_jobs(conn: Connection, queue_name: str) -> None:
    await conn.request({"cmd": "PUSH", "queue": queue_name, "name": "first", "data": 1})
    past = await conn.request({"cmd": "PUSH", "queue": queue_name, "name": "past", "data": 2, "delay": -60000})
    state = await conn.request({"cmd": "GetState", "id": past["id"]})
    assert state["state"] == "waiting"
    names = [(await conn.request({"cmd": "PULL", "queue": queue_name}))["job"]["name"] for _ in range(2)]
    assert names == ["past", "first"]


async def test_huge_durations_are_clamped_not_rejected(conn: Connection, queue_name: str) -> None:
    reply = await conn.request({"cmd": "PUSH", "queue": queue_name, "name": "h", "data": 1, "delay": 1e16})
    job = (await conn.request({"cmd": "GetJob", "id": reply["id"]}))["job"]
    assert job["state"] == "delayed"
    assert job["runAt"] - job["createdAt"] == 4.32e15


async def test_backoff_object_form(conn: Connection, queue_name: str) -> None:
    reply = await conn.request({"cmd": "PUSH", "queue": queue_name, "name": "b", "data": 1,
                                "backoff": {"type": "fixed", "delay": 50, "maxDelay": 100}})
    job = (await conn.request({"cmd": "GetJob", "id": reply["id"]}))["job"]
    assert job["backoff"] == 50
    assert job["backoffConfig"] == {"type": "fixed", "delay": 50, "maxDelay": 100}


async def test_custom_job_id_is_idempotent_while_live(conn: Connection, queue_name: str) -> None:
    jid = f"{queue_name}-order"
    a = await conn.request({"cmd": "PUSH", "queue": queue_name, "name": "first", "data": 1, "jobId": jid})
    b = await conn.request({"cmd": "PUSH", "queue": queue_name, "name": "second", "data": 2, "jobId": jid})
    assert a["id"] == b["id"] == jid
    job = (await conn.request({"cmd": "GetJobByCustomId", "customId": jid}))["job"]
    assert job["name"] == "first" and "state" not in job
    assert (await conn.request({"cmd": "Count", "queue": queue_name}))["count"] == 1


async def test_finished_custom_id_starts_a_new_generation(conn: Connection, queue_name: str) -> None:
    jid = f"{queue_name}-gen"
    await conn.request({"cmd": "PUSH", "queue": queue_name, "name": "one", "data": 1, "jobId": jid})
    await conn.request({"cmd": "PULL", "queue": queue_name})
    await conn.request({"cmd": "ACK", "id": jid, "result": "r1"})
    again = await conn.request({"cmd": "PUSH", "queue": queue_name, "name": "two", "data": 2, "jobId": jid})
    assert again["id"] == jid
    job = (await conn.request({"cmd": "GetJob", "id": jid}))["job"]
    assert (job["name"], job["state"]) == ("two", "waiting")
    assert "result" not in await conn.request({"cmd": "GetResult", "id": jid})


async def test_unique_key_dedups_until_the_owner_finishes(conn: Connection, queue_name: str) -> None:
    a = await conn.request({"cmd": "PUSH", "queue": queue_name, "name": "a", "data": 1, "uniqueKey": "k"})
    b = await conn.request({"cmd": "PUSH", "queue": queue_name, "name": "b", "data": 2, "uniqueKey": "k"})
    assert a["id"] == b["id"]
    await conn.request({"cmd": "PULL", "queue": queue_name})
    c = await conn.request({"cmd": "PUSH", "queue": queue_name, "name": "c", "data": 3, "uniqueKey": "k"})
    assert c["id"] == a["id"], "an active owner still holds its key"
    await conn.request({"cmd": "ACK", "id": a["id"]})
    d = await conn.request({"cmd": "PUSH", "queue": queue_name, "name": "d", "data": 4, "uniqueKey": "k"})
    assert d["id"] != a["id"]


async def test_legacy_name_envelope(conn: Connection, queue_name: str) -> None:
    legacy = await conn.request({"cmd": "PUSH", "queue": queue_name, "data": {"name": "old", "x": 1}})
    plain = await conn.request({"cmd": "PUSH", "queue": queue_name, "name": "top", "data": {"name": "in"}})
    nameless = await conn.request({"cmd": "PUSH", "queue": queue_name, "data": 1})
    jobs = [(await conn.request({"cmd": "GetJob", "id": r["id"]}))["job"] for r in (legacy, plain, nameless)]
    assert [(j["name"], j["data"]) for j in jobs] == [("old", {"x": 1}), ("top", {"name": "in"}), ("default", 1)]


async def test_pushb_returns_ids_in_order_and_keeps_options(conn: Connection, queue_name: str) -> None:
    reply = await conn.request({"cmd": "PUSHB", "queue": queue_name, "jobs": [
        {"name": "a", "data": 0}, {"name": "b", "data": 1, "priority": 5},
        {"name": "c", "data": 2, "customId": f"{queue_name}-c"}, {"name": "d", "data": 3, "delay": 60000},
    ]})
    assert reply["ok"] and len(reply["ids"]) == 4 and reply["ids"][2] == f"{queue_name}-c"
    counts = (await conn.request({"cmd": "GetJobCounts", "queue": queue_name}))["counts"]
    assert (counts["waiting"], counts["prioritized"], counts["delayed"]) == (2, 1, 1)
    pulled = (await conn.request({"cmd": "PULLB", "queue": queue_name, "count": 10}))["jobs"]
    assert [j["name"] for j in pulled] == ["b", "a", "c"]


async def test_pushb_is_all_or_nothing(conn: Connection, queue_name: str) -> None:
    reply = await conn.request({"cmd": "PUSHB", "queue": queue_name, "jobs": [
        {"name": "ok", "data": 1}, {"name": "ok2", "data": 2}, {"name": "bad", "data": 3, "timeout": -1},
    ]})
    assert reply["error"] == "jobs[2]: timeout must be at least 0"
    missing = await conn.request({"cmd": "PUSHB", "queue": queue_name,
                                  "jobs": [{"name": "x", "data": 1, "dependsOn": ["ghost"]}]})
    assert missing["error"] == "jobs[0]: Dependency job not found: ghost"
    not_list = await conn.request({"cmd": "PUSHB", "queue": queue_name, "jobs": "x"})
    assert not_list["error"] == "jobs must be an array"
    not_map = await conn.request({"cmd": "PUSHB", "queue": queue_name, "jobs": [5]})
    assert not_map["error"] == "jobs[0]: job must be an object"
    assert (await conn.request({"cmd": "Count", "queue": queue_name}))["count"] == 0


async def test_pushb_intra_batch_dependency(conn: Connection, queue_name: str) -> None:
    child, parent = f"{queue_name}-child", f"{queue_name}-parent"
    await conn.request({"cmd": "PUSHB", "queue": queue_name, "jobs": [
        {"name": "child", "data": 1, "customId": child, "dependsOn": [parent]},
        {"name": "parent", "data": 2, "customId": parent},
    ]})
    assert (await conn.request({"cmd": "GetState", "id": child}))["state"] == "waiting-children"
    first = await conn.request({"cmd": "PULL", "queue": queue_name})
    assert first["job"]["id"] == parent
    assert (await conn.request({"cmd": "PULL", "queue": queue_name}))["job"] is None
    await conn.request({"cmd": "ACK", "id": parent})
    assert (await conn.request({"cmd": "PULL", "queue": queue_name}))["job"]["id"] == child


async def test_group_max_size_rejects_the_whole_batch(conn: Connection, queue_name: str) -> None:
    ok = await conn.request({"cmd": "PUSHB", "queue": queue_name, "jobs": [
        {"name": "a", "data": 1, "groupId": "g", "groupMaxSize": 2},
        {"name": "b", "data": 2, "groupId": "g", "groupMaxSize": 2},
    ]})
    assert ok["ok"]
    full = await conn.request({"cmd": "PUSHB", "queue": queue_name, "jobs": [
        {"name": "c", "data": 3}, {"name": "d", "data": 4, "groupId": "g", "groupMaxSize": 2},
    ]})
    assert full["error"] == "Group g has reached its maximum size of 2"
    assert (await conn.request({"cmd": "Count", "queue": queue_name}))["count"] == 2


async def test_data_over_ten_megabytes_is_rejected(conn: Connection, queue_name: str) -> None:
    big = await conn.request({"cmd": "PUSH", "queue": queue_name, "name": "j", "data": "x" * 10485761})
    assert big["error"] == "Job data too large (max 10MB)"
    fits = await conn.request({"cmd": "PUSH", "queue": queue_name, "name": "j", "data": "x" * 10485758})
    assert fits["ok"]
