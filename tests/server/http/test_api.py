"""The HTTP API against a real server: routes, status codes, auth, CORS, bodies, WebSocket and SSE."""
from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from http.client import HTTPConnection
from typing import Any

import aiohttp
import pytest

from bunqueue import errors
from bunqueue._testbase.server import ServerProcess
from bunqueue.client import connect


@pytest.fixture(scope="module")
def http_server() -> Iterator[ServerProcess]:
    proc = ServerProcess(env={"RATE_LIMIT_MAX_REQUESTS": "100000000", "CORS_ALLOW_ORIGIN": "*"}).start()
    yield proc
    proc.stop()


@pytest.fixture
async def http(http_server: ServerProcess) -> AsyncIterator[Any]:
    base = f"http://127.0.0.1:{http_server.http_port}"
    async with aiohttp.ClientSession(base) as session:
        yield session


async def fetch(http: Any, method: str, path: str, **kw: Any) -> tuple[int, Any, Any]:
    async with http.request(method, path, **kw) as resp:
        text = await resp.text()
        ctype = resp.headers.get("Content-Type", "")
        body = json.loads(text) if ctype.startswith("application/json") else text
        return resp.status, body, resp.headers


async def test_health_probes_answer_without_a_token(http: Any) -> None:
    status, body, headers = await fetch(http, "GET", "/health")
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert body["ok"] is True and body["status"] == "healthy" and isinstance(body["uptime"], int)
    assert set(body["queues"]) == {"waiting", "active", "delayed", "completed", "dlq"}
    assert set(body["connections"]) == {"tcp", "ws", "sse"} and body["memory"]["rss"] > 0
    for path in ("/healthz", "/live"):
        status, text, headers = await fetch(http, "GET", path)
        assert (status, text, headers["Content-Type"]) == (200, "OK", "text/plain;charset=utf-8")
    assert (await fetch(http, "GET", "/ready"))[:2] == (200, {"ok": True, "ready": True})


async def test_health_counts_waiting_jobs_as_the_original_does(http: Any) -> None:
    async def waiting() -> int:
        return int((await fetch(http, "GET", "/health"))[1]["queues"]["waiting"])

    before = await waiting()
    await fetch(http, "POST", "/queues/h-hw/jobs", json={"data": 1, "priority": 5})
    await fetch(http, "POST", "/queues/h-hw/jobs", json={"data": 2})
    await fetch(http, "POST", "/queues/h-hw-paused/jobs", json={"data": 3})
    await fetch(http, "POST", "/queues/h-hw-paused/pause")
    # Prioritized jobs are not "waiting" there; a paused queue's jobs are.
    assert await waiting() - before == 2


async def test_push_over_http_is_the_same_job_over_tcp(http: Any, http_server: ServerProcess) -> None:
    status, body, _ = await fetch(http, "POST", "/queues/h-x/jobs", json={"name": 42, "data": {"k": 1}, "attempts": 5})
    assert status == 200 and body["ok"] is True
    job_id = body["id"]
    conn = await connect(*http_server.addr)
    try:
        job = (await conn.request({"cmd": "GetJob", "id": job_id}))["job"]
    finally:
        await conn.close()
    # A non-string name reads as "default"; `attempts` is the maxAttempts alias.
    assert (job["name"], job["data"], job["maxAttempts"]) == ("default", {"k": 1}, 5)
    status, body, _ = await fetch(http, "GET", f"/jobs/{job_id}")
    assert status == 200 and body["job"]["id"] == job_id and body["job"]["createdAt"] == int(job["createdAt"])
    status, body, _ = await fetch(http, "GET", "/jobs/no-such-job")
    assert (status, body) == (404, {"ok": False, "error": "Job not found"})


async def test_pull_ack_and_result_over_http(http: Any) -> None:
    _, pushed, _ = await fetch(http, "POST", "/queues/h-pa/jobs", json={"name": "w", "data": 1})
    status, pulled, _ = await fetch(http, "GET", "/queues/h-pa/jobs")
    assert status == 200 and pulled["job"]["id"] == pushed["id"]
    assert (await fetch(http, "POST", f"/jobs/{pushed['id']}/ack", json={"result": {"done": True}}))[:2] == (
        200, {"ok": True})
    _, result, _ = await fetch(http, "GET", f"/jobs/{pushed['id']}/result")
    assert result["result"] == {"done": True}
    # An empty queue answers at once with no job, or after ?timeout= ms.
    assert (await fetch(http, "GET", "/queues/h-pa/jobs?timeout=50"))[1] == {"ok": True, "job": None}


async def test_command_failures_keep_the_routes_status(http: Any) -> None:
    status, body, _ = await fetch(http, "POST", "/queues/h-bad/jobs", json={"data": 1, "priority": "high"})
    assert status == 400 and body["ok"] is False and "priority" in body["error"]
    status, body, _ = await fetch(http, "POST", "/queues/bad%20queue/jobs", json={"data": 1})
    assert status == 400 and body["ok"] is False
    # Always-200 routes answer ok:false with 200.
    status, body, _ = await fetch(http, "DELETE", "/jobs/nothing-here")
    assert status == 200 and body["ok"] is False


async def test_bodies_and_unknown_routes(http: Any) -> None:
    assert (await fetch(http, "POST", "/queues/h-b/jobs", data="{nope"))[:2] == (
        400, {"ok": False, "error": "Invalid JSON body"})
    # A required body that is empty is invalid too; an optional one reads as {}.
    assert (await fetch(http, "POST", "/queues/h-b/jobs", data=""))[0] == 400
    assert (await fetch(http, "POST", "/queues/h-b/clean", data=""))[0] == 200
    # Routes that ignore their body do not read it.
    assert (await fetch(http, "POST", "/queues/h-b/pause", data="{nope"))[:2] == (200, {"ok": True})
    for method, path in (("GET", "/nope"), ("PATCH", "/queues"), ("GET", "/queues/")):
        assert (await fetch(http, method, path))[:2] == (404, {"ok": False, "error": "Not found"}), path


async def test_a_body_nested_past_the_parser_is_refused_by_name(http: Any) -> None:
    for nested in ("[" * 5000 + "]" * 5000, '{"a":' * 5000 + "1" + "}" * 5000):
        answer = await fetch(http, "POST", "/queues/h-deep/jobs", data=f'{{"data":{nested}}}')
        assert answer[:2] == (400, {"ok": False, "error": errors.nested_too_deeply("body")})
    assert (await fetch(http, "GET", "/queues/h-deep/count"))[1] == {"ok": True, "count": 0}


async def test_integers_past_the_wire_read_as_json_parse_reads_them(http: Any) -> None:
    job_id = (await fetch(http, "POST", "/queues/h-bigint/jobs", json={"data": {"n": 2**64 - 1}}))[1]["id"]
    assert (await fetch(http, "GET", f"/jobs/{job_id}"))[1]["job"]["data"] == {"n": 2**64 - 1}
    # Past 64 bits an integer is a number like 1e400: Infinity beyond the float range, never a 500.
    refused = (400, {"ok": False, "error": errors.must_be_finite("priority")})
    for digits in ("1e400", "9" * 400, "-" + "9" * 400, "9" * 5000):
        answer = await fetch(http, "PUT", f"/jobs/{job_id}/priority", data=f'{{"priority":{digits}}}')
        assert answer[:2] == refused, digits
    answer = await fetch(http, "PUT", f"/jobs/{job_id}/priority", data='{"priority":' + "1" * 30 + "}")
    assert answer[:2] == (200, {"ok": True})
    assert (await fetch(http, "GET", f"/jobs/{job_id}"))[1]["job"]["priority"] == float("1" * 30)


async def test_page_offsets_past_the_wire_echo_as_numbers(http: Any) -> None:
    await fetch(http, "POST", "/queues/h-far/jobs", json={"data": 1})
    status, page, _ = await fetch(http, "GET", "/dashboard/queues?offset=1e300&limit=2")
    assert (status, page["queues"], page["offset"], page["limit"]) == (200, [], 1e300, 2)
    assert page["total"] >= 1
    status, page, _ = await fetch(http, "GET", "/dashboard/queues?offset=9007199254740993")
    assert (status, page["queues"], page["offset"]) == (200, [], 2**53)
    answer = await fetch(http, "GET", "/queues/h-far/dlq?offset=1e300&limit=1e300")
    assert answer[:2] == (200, {"ok": True, "entries": [], "total": 0})


async def test_cors_preflight_and_origin(http: Any) -> None:
    async with http.options("/queues/x/jobs", headers={"Origin": "https://a.example"}) as resp:
        assert resp.status == 204 and await resp.text() == ""
        assert resp.headers["Access-Control-Allow-Origin"] == "*"
        assert resp.headers["Access-Control-Allow-Methods"] == "GET, POST, PUT, DELETE, OPTIONS"
        assert resp.headers["Access-Control-Max-Age"] == "86400"
    assert (await fetch(http, "GET", "/queues"))[2]["Access-Control-Allow-Origin"] == "*"


async def test_queue_summary_is_a_bare_array(http: Any) -> None:
    await fetch(http, "POST", "/queues/h-sum/jobs/bulk", json={"jobs": [{"data": 1}, {"data": 2, "priority": 3}]})
    status, summary, _ = await fetch(http, "GET", "/queues/summary")
    mine = next(q for q in summary if q["name"] == "h-sum")
    assert status == 200 and mine["paused"] is False
    assert mine["counts"]["waiting"] == 1 and mine["counts"]["prioritized"] == 1


async def test_websocket_runs_commands_and_checks_subscriptions(http: Any) -> None:
    async with http.ws_connect("/ws") as ws:
        await ws.send_str(json.dumps({"cmd": "Ping", "reqId": "p"}))
        reply = json.loads(await ws.receive_str())
        assert reply["ok"] is True and reply["reqId"] == "p" and reply["data"]["pong"] is True
        await ws.send_str("{not json")
        assert json.loads(await ws.receive_str()) == {"ok": False, "error": "Invalid JSON"}
        await ws.send_str(json.dumps({"reqId": 1}))
        assert json.loads(await ws.receive_str()) == {"ok": False, "error": "Invalid command"}
        await ws.send_str(json.dumps({"cmd": "Nope", "reqId": "n"}))
        assert json.loads(await ws.receive_str()) == {"ok": False, "error": "Unknown command: Nope", "reqId": "n"}
        await ws.send_str(json.dumps({"cmd": "Subscribe", "events": []}))
        assert json.loads(await ws.receive_str())["error"] == "events must be a non-empty array"
        await ws.send_str(json.dumps({"cmd": "Subscribe", "events": ["job:completed", "bogus"]}))
        assert json.loads(await ws.receive_str())["error"] == "Invalid: bogus"
        await ws.send_str(json.dumps({"cmd": "Subscribe", "events": ["job:*"], "reqId": "s"}))
        assert json.loads(await ws.receive_str()) == {"ok": True, "subscribed": ["job:*"], "reqId": "s"}
    status, text, headers = await fetch(http, "GET", "/ws")
    assert (status, text) == (400, "WebSocket upgrade failed")


async def test_websocket_subscribers_receive_the_system_events_they_named(http: Any) -> None:
    async with http.ws_connect("/ws") as ws:
        await ws.send_str(json.dumps({"cmd": "Subscribe", "events": ["queue:*"]}))
        assert json.loads(await ws.receive_str()) == {"ok": True, "subscribed": ["queue:*"]}
        await ws.send_str(json.dumps({"cmd": "PUSH", "queue": "h-ws-sys", "name": "n", "data": 1, "reqId": "p"}))
        messages = [json.loads(await asyncio.wait_for(ws.receive_str(), 5)) for _ in range(3)]
        events = {m["event"]: m for m in messages if "event" in m}
        assert [m for m in messages if "event" not in m][0]["reqId"] == "p"
        assert events["queue:created"]["data"] == {"queue": "h-ws-sys"} and events["queue:created"]["ts"] > 0
        assert events["queue:counts"]["data"]["waiting"] == 1
        # job:pushed was not asked for.
        assert set(events) == {"queue:created", "queue:counts"}


async def test_sse_stream_opens_with_retry_and_client_id(http: Any) -> None:
    async with http.get("/events") as resp:
        assert resp.status == 200 and resp.headers["Content-Type"] == "text/event-stream"
        first = await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 5)
        lines = first.decode().strip().splitlines()
        assert lines[0] == "retry: 3000"
        hello = json.loads(lines[1].removeprefix("data: "))
        assert hello["connected"] is True and len(hello["clientId"]) == 36


def raw_get(server: ServerProcess, path: str) -> tuple[int, Any, dict[str, str]]:
    conn = HTTPConnection("127.0.0.1", server.http_port, timeout=5)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read()), dict(resp.getheaders())
    finally:
        conn.close()


def test_paths_match_exactly_and_bad_escapes_are_errors(http_server: ServerProcess) -> None:
    assert raw_get(http_server, "//health")[:2] == (404, {"ok": False, "error": "Not found"})
    status, body, headers = raw_get(http_server, "/queues/bad%zzname/counts")
    assert (status, body) == (500, {"ok": False, "error": "URI error"})
    assert "Access-Control-Allow-Origin" not in headers


def test_bearer_tokens_guard_everything_but_health_and_preflight() -> None:
    server = ServerProcess(env={"AUTH_TOKENS": "tok-one,tok-two"}).start()

    async def check() -> None:
        async with aiohttp.ClientSession(f"http://127.0.0.1:{server.http_port}") as http:
            assert (await fetch(http, "GET", "/health"))[0] == 200
            assert (await fetch(http, "OPTIONS", "/queues"))[0] == 204
            status, body, headers = await fetch(http, "GET", "/queues")
            assert (status, body) == (401, {"ok": False, "error": "Unauthorized"})
            assert "Access-Control-Allow-Origin" not in headers
            # Unknown paths answer 401 before they could answer 404.
            assert (await fetch(http, "GET", "/nope"))[0] == 401
            good = {"Authorization": "Bearer tok-two"}
            assert (await fetch(http, "GET", "/queues", headers=good))[0] == 200
            assert (await fetch(http, "GET", "/nope", headers=good))[0] == 404
            assert (await fetch(http, "GET", "/queues", headers={"Authorization": "bearer tok-two"}))[0] == 401
            # A repeated header counts with its first value only.
            for first, second, status in (("tok-one", "nope", b"200"), ("nope", "tok-one", b"401")):
                reader, writer = await asyncio.open_connection("127.0.0.1", server.http_port)
                writer.write(b"GET /queues HTTP/1.1\r\nAuthorization: Bearer %s\r\nauthorization: Bearer %s\r\n\r\n"
                             % (first.encode(), second.encode()))
                assert (await asyncio.wait_for(reader.readline(), 5)).split()[1] == status
                writer.close()

    try:
        asyncio.run(check())
    finally:
        server.stop()


def test_rate_limit_answers_429_per_client_address() -> None:
    server = ServerProcess(env={"RATE_LIMIT_MAX_REQUESTS": "3", "RATE_LIMIT_WINDOW_MS": "60000"}).start()

    async def check() -> None:
        async with aiohttp.ClientSession(f"http://127.0.0.1:{server.http_port}") as http:
            statuses = [(await fetch(http, "GET", "/queues"))[0] for _ in range(4)]
            assert statuses == [200, 200, 200, 429]
            # Health probes are never limited; another forwarded address has its own budget.
            assert (await fetch(http, "GET", "/health"))[0] == 200
            other = {"X-Forwarded-For": "10.1.2.3, 10.0.0.1"}
            assert (await fetch(http, "GET", "/queues", headers=other))[0] == 200

    try:
        asyncio.run(check())
    finally:
        server.stop()


async def test_monitoring_answers_in_the_originals_shapes(http: Any) -> None:
    await fetch(http, "POST", "/queues/h-mon/jobs/bulk", json={"jobs": [{"data": 1}, {"data": 2, "priority": 4}]})
    assert (await fetch(http, "POST", "/crons", json={"name": "h-mon-cron", "queue": "h-mon",
                                                        "repeatEvery": 3600000}))[0] == 200
    status, stats, _ = await fetch(http, "GET", "/stats")
    assert status == 200 and stats["ok"] is True
    wanted = {"waiting", "prioritized", "waiting-children", "totalPushed", "pushPerSec", "cronJobs"}
    assert wanted <= set(stats["stats"])
    assert stats["stats"]["totalPushed"] >= 2 and stats["stats"]["cronJobs"] >= 1
    assert {"jobIndex", "jobLocks", "queuedTotal"} <= set(stats["collections"])
    status, metrics, _ = await fetch(http, "GET", "/metrics")
    assert set(metrics["metrics"]) == {"totalPushed", "totalPulled", "totalCompleted", "totalFailed"}
    status, board, _ = await fetch(http, "GET", "/dashboard")
    cron = next(c for c in board["crons"]["list"] if c["name"] == "h-mon-cron")
    next_run = (await fetch(http, "GET", "/crons/h-mon-cron"))[1]["cron"]["nextRun"]
    assert cron == {"name": "h-mon-cron", "queue": "h-mon", "schedule": None, "repeatEvery": 3600000,
                    "nextRun": next_run, "executions": 0}
    assert set(board["crons"]) == {"total", "list", "truncated"} and board["crons"]["truncated"] is False
    status, page, _ = await fetch(http, "GET", "/dashboard/queues?limit=1&offset=0")
    assert page["limit"] == 1 and page["offset"] == 0 and len(page["queues"]) == 1 and page["total"] >= 1
    assert set(page["queues"][0]) == {"name", "waiting", "delayed", "active", "dlq", "paused"}
    status, detail, _ = await fetch(http, "GET", "/dashboard/queues/h-mon")
    assert status == 200 and detail["name"] == "h-mon" and detail["priorityCounts"] == {"0": 1, "4": 1}
    assert (await fetch(http, "GET", "/dashboard/queues/bad%20name"))[0] == 400


async def next_event(resp: Any) -> tuple[str, Any]:
    """The next SSE message of a stream as (event name, data)."""
    message = (await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 5)).decode()
    lines = dict(line.split(": ", 1) for line in message.strip().splitlines())
    assert lines["id"].isdigit()
    return lines["event"], json.loads(lines["data"])


async def events_until(resp: Any, name: str) -> list[tuple[str, Any]]:
    """Messages up to and including the first one called ``name``."""
    seen = [await next_event(resp)]
    while seen[-1][0] != name:
        seen.append(await next_event(resp))
    return seen


async def next_event_or_none(resp: Any, wait_s: float = 0.2) -> tuple[str, Any] | None:
    try:
        return await asyncio.wait_for(next_event(resp), wait_s)
    except TimeoutError:
        return None


async def test_job_events_reach_sse_streams_and_system_events_every_stream(http: Any) -> None:
    async with http.get("/events/queues/h-sse") as resp:
        await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 5)
        await fetch(http, "POST", "/queues/h-sse-other/jobs", json={"data": 0})
        _, pushed, _ = await fetch(http, "POST", "/queues/h-sse/jobs", json={"data": 1})
        seen = await events_until(resp, "job:pushed")
        # The other queue's job event is filtered out; its creation, a system event, is not.
        names = [name for name, _ in seen]
        assert names.index("queue:created") < names.index("job:pushed")
        assert ("queue:created", {"queue": "h-sse-other"}) in seen and ("queue:created", {"queue": "h-sse"}) in seen
        assert seen[-1][1]["jobId"] == pushed["id"] and seen[-1][1]["queue"] == "h-sse"


async def test_sse_streams_hear_tcp_clients_come_and_go(http: Any, http_server: ServerProcess) -> None:
    async with http.get("/events") as resp:
        await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 5)
        conn = await connect("127.0.0.1", http_server.port)
        (name, came), = [e for e in await events_until(resp, "client:connected") if e[0].startswith("client:")]
        assert came["transport"] == "tcp" and len(came["clientId"]) == 36
        await conn.close()
        went = (await events_until(resp, "client:disconnected"))[-1][1]
        assert went == came


async def test_queue_counts_follow_job_changes_coalesced(http: Any, http_server: ServerProcess) -> None:
    conn = await connect("127.0.0.1", http_server.port)
    try:
        async with http.get("/events") as resp:
            await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 5)
            # Ten jobs in one command: one snapshot after them, not one per job.
            jobs = [{"name": "n", "data": i} for i in range(10)]
            await conn.request({"cmd": "PUSHB", "queue": "h-counts", "jobs": jobs})
            seen = await events_until(resp, "queue:counts")
            # System events reach every stream: a snapshot of a queue an earlier test changed may come first.
            while seen[-1][1]["queue"] != "h-counts":
                seen += await events_until(resp, "queue:counts")
            assert [n for n, _ in seen].count("job:pushed") == 10
            assert seen[-1][1] == {"queue": "h-counts", "waiting": 10, "prioritized": 0, "active": 0,
                                   "completed": 0, "failed": 0, "delayed": 0}
            job = (await conn.request({"cmd": "PULL", "queue": "h-counts"}))["job"]
            await conn.request({"cmd": "ACK", "id": job["id"]})
            counts: dict[str, Any] = {}
            while counts.get("completed") != 1:
                counts = (await events_until(resp, "queue:counts"))[-1][1]
            assert (counts["waiting"], counts["active"]) == (9, 0)
            assert await next_event_or_none(resp) is None
    finally:
        await conn.close()


async def test_streams_that_closed_leave_the_health_count(http: Any) -> None:
    async with http.get("/events") as resp:
        await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 5)
        assert (await fetch(http, "GET", "/health"))[1]["connections"]["sse"] == 1
    for _ in range(50):
        if (await fetch(http, "GET", "/health"))[1]["connections"]["sse"] == 0:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the closed stream is still counted")
