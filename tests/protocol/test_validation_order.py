"""Option checks that the reference settles: null where an object or a number is expected, which error wins
when several fields are wrong, and the field rules of webhooks, crons and tags, over TCP and HTTP alike.

The expected replies are the reference server's answers to the same requests, except where a comment says
the broker is stricter (README, "Where this broker is stricter than the reference").
"""
from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from bunqueue._testbase.frames import error_of, ok
from bunqueue._testbase.server import ServerProcess
from bunqueue.client import Connection

VALID_EVENTS = "Valid: job.pushed, job.started, job.completed, job.failed, job.progress"
URL = "https://example.com/hook"
TAGS_ERROR = "tags must be an array of strings of at most 256 characters"
CRON_TIMING = "Cron job must have either schedule or repeatEvery"
CRON_REPEAT = "Cron repeatEvery must be a positive safe integer number of milliseconds"


async def http_call(server: ServerProcess, method: str, path: str, body: Any) -> tuple[int, Any]:
    async with aiohttp.ClientSession(f"http://127.0.0.1:{server.http_port}") as session:
        async with session.request(method, path, json=body) as resp:
            return resp.status, json.loads(await resp.text())


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"group": None}, "group must be an object"),
        ({"group": {"concurrency": None}}, "group.concurrency must be a positive safe integer"),
        ({"group": {"limit": None}}, "group.limit must be an object"),
        ({"group": {"limit": {"max": None, "duration": 1000}}}, "group.limit.max must be a positive safe integer"),
        ({"group": {"concurrency": "3"}}, "group.concurrency must be a positive safe integer"),
        ({"timeout": float("inf")}, "timeout must be a finite number"),
        # The group is checked before the lease fields; the timeout before the group.
        ({"owner": 5, "lockTtl": "x", "group": 4}, "group must be an object"),
        ({"owner": "w", "lockTtl": "x", "group": {"concurrency": 0}},
         "group.concurrency must be a positive safe integer"),
        ({"timeout": -1, "group": 5}, "timeout must be at least 0"),
    ],
)
@pytest.mark.parametrize("cmd", ["PULL", "PULLB"])
async def test_pull_options(conn: Connection, cmd: str, fields: dict[str, Any], error: str) -> None:
    assert await error_of(conn, {"cmd": cmd, "queue": "vo-pull", **fields}) == error


async def test_pull_group_affinity_null_still_means_ungrouped_only(conn: Connection, queue_name: str) -> None:
    await ok(conn, {"cmd": "PUSH", "queue": queue_name, "name": "g", "data": 1, "groupId": "G"})
    plain = (await ok(conn, {"cmd": "PUSH", "queue": queue_name, "name": "p", "data": 2}))["id"]
    reply = await ok(conn, {"cmd": "PULLB", "queue": queue_name, "count": 5, "group": {"affinity": None}})
    assert [job["id"] for job in reply["jobs"]] == [plain]


async def test_pullb_checks_count_before_timeout(conn: Connection, queue_name: str) -> None:
    cmd = {"cmd": "PULLB", "queue": queue_name, "count": 0, "timeout": -1}
    assert await error_of(conn, cmd) == "count must be at least 1"
    cmd = {"cmd": "PULLB", "queue": queue_name, "count": float("inf")}
    assert await error_of(conn, cmd) == "count must be a finite number"


@pytest.mark.parametrize("cmd", ["SetGroupRateLimit", "SetGroupConcurrency", "PauseGroup", "GetGroupJobsCount"])
async def test_group_commands_refuse_a_null_group_id(conn: Connection, cmd: str) -> None:
    assert await error_of(conn, {"cmd": cmd, "queue": "vo-groups", "groupId": None}) == "groupId must be a string"
    assert await error_of(conn, {"cmd": cmd, "queue": "vo-groups"}) == "groupId is required"


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"url": 5, "events": ["job.completed"]}, "Invalid URL format"),
        ({"url": {"a": 1}, "events": ["job.completed"]}, "Invalid URL format"),
        ({"url": ["x"], "events": 5}, "Invalid URL format"),
        ({"url": 0, "events": ["job.completed"]}, "Webhook URL is required"),
        ({"url": [], "events": ["job.completed"]}, "Webhook URL is required"),
        ({"events": ["job.completed"]}, "Webhook URL is required"),
        ({"url": URL, "events": [1]}, f"Invalid webhook event(s): 1. {VALID_EVENTS}"),
        ({"url": URL, "events": [None, "job.pushed", "nope"]}, f"Invalid webhook event(s): , nope. {VALID_EVENTS}"),
        ({"url": URL, "events": [[1, 2], {"a": 1}]}, f"Invalid webhook event(s): 1,2, [object Object]. {VALID_EVENTS}"),
        # The URL is checked before the events.
        ({"url": "ftp://example.com", "events": [1]}, "Webhook URL must use http or https protocol"),
    ],
)
async def test_add_webhook_field_errors(server: ServerProcess, conn: Connection, fields: dict[str, Any],
                                        error: str) -> None:
    assert await error_of(conn, {"cmd": "AddWebhook", **fields}) == error
    assert await http_call(server, "POST", "/webhooks", fields) == (400, {"ok": False, "error": error})


async def test_set_webhook_enabled_looks_the_webhook_up_first(server: ServerProcess, conn: Connection) -> None:
    for fields in ({}, {"id": "nope"}, {"id": "nope", "enabled": "yes"}, {"id": 5, "enabled": None}):
        assert await error_of(conn, {"cmd": "SetWebhookEnabled", **fields}) == "Webhook not found"
    for body in ({}, {"enabled": "yes"}, {"enabled": None}):
        status, reply = await http_call(server, "PUT", "/webhooks/nope/enabled", body)
        assert (status, reply) == (400, {"ok": False, "error": "Webhook not found"})
    hook = (await ok(conn, {"cmd": "AddWebhook", "url": URL, "events": ["job.failed"]}))["data"]["webhookId"]
    try:
        refused = await error_of(conn, {"cmd": "SetWebhookEnabled", "id": hook, "enabled": 1})
        assert refused == "enabled must be a boolean"
        assert set(await ok(conn, {"cmd": "SetWebhookEnabled", "id": hook, "enabled": False})) == {"ok", "reqId"}
        listed = (await ok(conn, {"cmd": "ListWebhooks"}))["data"]["webhooks"]
        assert [h["enabled"] for h in listed if h["id"] == hook] == [False]
    finally:
        await ok(conn, {"cmd": "RemoveWebhook", "webhookId": hook})


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({}, CRON_TIMING),
        ({"name": "c"}, CRON_TIMING),
        ({"queue": "a b"}, CRON_TIMING),
        ({"name": 5, "queue": "a b", "repeatEvery": -1}, CRON_REPEAT),
        ({"name": "c", "queue": "a b", "repeatEvery": "1000"}, CRON_REPEAT),
        ({"name": "c", "repeatEvery": 0}, CRON_REPEAT),
        # Once the timing holds, the name comes next, then the queue (the reference checks neither).
        ({"queue": "a b", "repeatEvery": 1000}, "name must be a string"),
        ({"name": "", "repeatEvery": 1000}, "name must be a non-empty string"),
        ({"name": "c", "queue": "a b", "repeatEvery": 1000}, "Queue name contains invalid characters"),
        ({"name": "c", "repeatEvery": 1000}, "Queue name is required"),
    ],
)
async def test_cron_checks_the_timing_first(server: ServerProcess, conn: Connection, fields: dict[str, Any],
                                            error: str) -> None:
    assert await error_of(conn, {"cmd": "Cron", **fields}) == error
    assert await http_call(server, "POST", "/crons", fields) == (400, {"ok": False, "error": error})


@pytest.mark.parametrize(
    "tags",
    [["a" * 257], ["ok", "b" * 300], [1], [None], "abc", {"a": 1}],
)
async def test_tags_are_strings_of_at_most_256_characters(conn: Connection, queue_name: str, tags: Any) -> None:
    # The reference's PUSHF rule and text; its PUSH and PUSHB take any tags (stricter here).
    job = {"name": "n", "data": {}, "tags": tags}
    assert await error_of(conn, {"cmd": "PUSH", "queue": queue_name, **job}) == TAGS_ERROR
    assert await error_of(conn, {"cmd": "PUSHB", "queue": queue_name, "jobs": [job]}) == f"jobs[0]: {TAGS_ERROR}"
    flow = {"cmd": "PUSHF", "jobs": [{"id": f"{queue_name}-f", "queue": queue_name, "input": job}]}
    assert await error_of(conn, flow) == TAGS_ERROR


async def test_tags_at_the_limit_and_many_of_them_are_kept(conn: Connection, queue_name: str) -> None:
    tags = ["a" * 256, ""] + [f"t{i}" for i in range(1000)]
    job_id = (await ok(conn, {"cmd": "PUSH", "queue": queue_name, "name": "n", "data": {}, "tags": tags}))["id"]
    assert (await ok(conn, {"cmd": "GetJob", "id": job_id}))["job"]["tags"] == tags


async def test_group_options_follow_the_spec_numeric_rule(conn: Connection) -> None:
    # The spec: a numeric string counts as its number in every numeric option (the reference 2.9.5 refuses
    # "2" here); null is an absent option.
    job = {"cmd": "PUSH", "queue": "vo-gms", "name": "n", "data": {}, "groupId": "G"}
    await ok(conn, {**job, "groupMaxSize": "2"})
    await ok(conn, {**job, "groupMaxSize": "2", "priority": "7"})
    assert await error_of(conn, {**job, "groupMaxSize": "2"}) == "Group G has reached its maximum size of 2"
    await ok(conn, {**job, "groupMaxSize": None})
    assert await error_of(conn, {**job, "groupMaxSize": "2.5"}) == "group.maxSize must be a positive safe integer"
    jobs = (await ok(conn, {"cmd": "PULLB", "queue": "vo-gms", "count": 5}))["jobs"]
    assert [j["priority"] for j in jobs] == [0, 0, 7]


@pytest.mark.parametrize(
    ("cmd", "error"),
    [
        ({"cmd": "PULL", "queue": "vo-strict", "detach": "yes"}, "detach must be a boolean"),
        ({"cmd": "PULLB", "queue": "vo-strict", "owner": 7}, "owner must be a string"),
        ({"cmd": "AddWebhook", "url": URL, "events": ["job.failed"], "queue": 5}, "Queue name must be a string"),
        ({"cmd": "AddWebhook", "url": URL, "events": ["job.failed"], "secret": 5}, "secret must be a string"),
        ({"cmd": "AddWebhook", "url": URL, "events": "job.failed"}, "events must be an array of strings"),
        ({"cmd": "Cron", "name": "vo", "queue": "vo-strict", "repeatEvery": 1000, "priority": "x"},
         "priority must be a number"),
    ],
)
async def test_where_the_broker_is_stricter(conn: Connection, cmd: dict[str, Any], error: str) -> None:
    assert await error_of(conn, cmd) == error
