"""Tools, resources and prompts driven over stdio: embedded with no server, and tcp against a real one."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.server import ServerProcess
from tests.mcp.stdio_client import mcp_server

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
JOB_KEYS = ["id", "name", "queue", "data", "priority", "progress", "attempts", "maxAttempts", "createdAt"]


async def test_a_job_lifecycle_in_embedded_mode() -> None:
    async with mcp_server() as mcp:
        added = await mcp.ok("bunqueue_add_job", {"queue": "emails", "name": "send", "data": {"to": "a"},
                                                  "priority": 5, "attempts": 2})
        job_id = added["jobId"]
        assert list(added) == ["jobId"] and isinstance(job_id, str)
        job = await mcp.ok("bunqueue_get_job", {"jobId": job_id})
        assert list(job) == JOB_KEYS
        assert job["id"] == job_id and job["name"] == "send" and job["queue"] == "emails"
        assert job["data"] == {"to": "a"} and job["priority"] == 5 and job["maxAttempts"] == 2
        assert ISO.match(job["createdAt"])
        # A job with a priority waits as "prioritized", as GetState says.
        assert await mcp.ok("bunqueue_get_job_state", {"jobId": job_id}) == {"jobId": job_id, "state": "prioritized"}

        pulled = (await mcp.ok("bunqueue_pull_job", {"queue": "emails"}))["job"]
        assert pulled["id"] == job_id and ISO.match(pulled["startedAt"])
        assert await mcp.ok("bunqueue_pull_job", {"queue": "emails"}) == {"job": None}
        assert await mcp.ok("bunqueue_update_progress", {"jobId": job_id, "progress": 40}) == {
            "success": True, "jobId": job_id, "progress": 40}
        assert await mcp.ok("bunqueue_ack_job", {"jobId": job_id, "result": {"sent": 1}}) == {
            "success": True, "jobId": job_id}
        assert await mcp.ok("bunqueue_get_job_state", {"jobId": job_id}) == {"jobId": job_id, "state": "completed"}
        assert await mcp.ok("bunqueue_get_job_result", {"jobId": job_id}) == {"jobId": job_id, "result": {"sent": 1}}
        assert await mcp.ok("bunqueue_wait_for_job", {"jobId": job_id, "timeoutMs": 100}) == {
            "jobId": job_id, "completed": True}
        counts = await mcp.ok("bunqueue_get_job_counts", {"queue": "emails"})
        assert counts == {"queue": "emails", "waiting": 0, "prioritized": 0, "delayed": 0, "active": 0,
                          "completed": 1, "failed": 0, "paused": 0}


async def test_refusals_are_tool_errors_with_the_original_texts() -> None:
    async with mcp_server() as mcp:
        assert await mcp.error("bunqueue_get_job", {"jobId": "nope"}) == '{"error":"Job not found"}'
        assert await mcp.error("bunqueue_ack_job", {"jobId": "nope"}) == (
            '{"error":"Job not found or not in processing state: nope"}')
        assert await mcp.error("bunqueue_get_cron", {"name": "zz"}) == '{"error":"Cron not found","name":"zz"}'
        assert await mcp.error("bunqueue_add_cron", {"name": "c", "queue": "q", "data": {}}) == (
            '{"error":"Cron job must have either schedule or repeatEvery"}')
        assert await mcp.error("bunqueue_add_webhook", {"url": "http://127.0.0.1:9/x", "events": ["job.failed"]}) == (
            '{"error":"Webhook URL cannot point to localhost"}')
        assert await mcp.error("bunqueue_get_flow", {"jobId": "nope", "queueName": "q"}) == (
            '{"error":"Flow not found"}')
        assert await mcp.ok("bunqueue_cancel_job", {"jobId": "nope"}) == {"success": False, "jobId": "nope"}
        assert await mcp.ok("bunqueue_get_job_state", {"jobId": "nope"}) == {"jobId": "nope", "state": "unknown"}


async def test_queues_crons_flows_and_the_dlq() -> None:
    async with mcp_server() as mcp:
        bulk = await mcp.ok("bunqueue_add_jobs_bulk", {"queue": "bulk", "jobs": [
            {"name": "a", "data": {"n": 1}}, {"name": "b", "data": {"n": 2}, "priority": 3}]})
        assert len(bulk["jobIds"]) == 2
        assert await mcp.ok("bunqueue_count_jobs", {"queue": "bulk"}) == {"queue": "bulk", "count": 2}
        listed = await mcp.ok("bunqueue_get_jobs", {"queue": "bulk", "end": 1})
        assert listed["queue"] == "bulk" and listed["count"] == 1 and listed["jobs"][0]["id"] in bulk["jobIds"]
        assert await mcp.ok("bunqueue_pause_queue", {"queue": "bulk"}) == {
            "success": True, "queue": "bulk", "message": "Queue paused"}
        assert await mcp.ok("bunqueue_is_paused", {"queue": "bulk"}) == {"queue": "bulk", "paused": True}
        assert await mcp.ok("bunqueue_drain_queue", {"queue": "bulk"}) == {"success": True, "queue": "bulk",
                                                                            "removed": 2}

        cron = await mcp.ok("bunqueue_add_cron", {"name": "tick", "queue": "cq", "data": {}, "repeatEvery": 60000})
        assert list(cron) == ["success", "name", "queue", "repeatEvery", "nextRun", "executions"]
        assert cron["repeatEvery"] == 60000 and ISO.match(cron["nextRun"]) and cron["executions"] == 0
        assert (await mcp.ok("bunqueue_list_crons"))["count"] == 1
        assert await mcp.ok("bunqueue_delete_cron", {"name": "tick"}) == {"success": True, "name": "tick"}

        flow = await mcp.ok("bunqueue_add_flow", {"name": "root", "queueName": "fq", "data": {},
                                                  "children": [{"name": "leaf", "queueName": "fq"}]})
        assert list(flow) == ["jobId", "name", "queueName", "children"]
        assert [list(child) for child in flow["children"]] == [["jobId", "name", "queueName"]]
        assert await mcp.ok("bunqueue_get_flow", {"jobId": flow["jobId"], "queueName": "fq"}) == flow
        chain = await mcp.ok("bunqueue_add_flow_chain", {"steps": [
            {"name": "a", "queueName": "fq", "data": {}}, {"name": "b", "queueName": "fq", "data": {}}]})
        assert len(chain["jobIds"]) == 2
        fan = await mcp.ok("bunqueue_add_flow_bulk_then", {"parallel": [{"name": "p", "queueName": "fq", "data": {}}],
                                                           "final": {"name": "f", "queueName": "fq", "data": {}}})
        assert list(fan) == ["parallelIds", "finalId"] and len(fan["parallelIds"]) == 1

        failing = (await mcp.ok("bunqueue_add_job", {"queue": "dq", "name": "x", "data": {}, "attempts": 1}))["jobId"]
        await mcp.ok("bunqueue_pull_job", {"queue": "dq"})
        assert await mcp.ok("bunqueue_fail_job", {"jobId": failing, "error": "boom"}) == {
            "success": True, "jobId": failing}
        dlq = await mcp.ok("bunqueue_get_dlq", {"queue": "dq"})
        assert dlq["queue"] == "dq" and dlq["count"] == 1 and dlq["jobs"][0]["id"] == failing
        assert await mcp.ok("bunqueue_retry_dlq", {"queue": "dq"}) == {"success": True, "queue": "dq", "retried": 1}


async def test_resources_are_json_and_prompts_render() -> None:
    async with mcp_server() as mcp:
        await mcp.ok("bunqueue_add_job", {"queue": "rq", "name": "n", "data": {}})
        stats = await mcp.resource("bunqueue://stats")
        assert stats["waiting"] == 1 and "uptime" in stats
        assert await mcp.resource("bunqueue://queues") == [{"name": "rq", "waiting": 1, "prioritized": 0,
                                                             "delayed": 0, "active": 0, "completed": 0, "failed": 0,
                                                             "paused": 0}]
        assert await mcp.resource("bunqueue://crons") == []
        assert await mcp.resource("bunqueue://workers") == []
        assert await mcp.resource("bunqueue://webhooks") == []

        report = await mcp.session.get_prompt("bunqueue_health_report")
        assert report.description == "Comprehensive bunqueue server health report"
        text = report.messages[0].content.text  # type: ignore[union-attr]
        assert report.messages[0].role == "user"
        assert text.startswith("Analyze the following bunqueue server health data")
        for heading in ("## System Stats", "## Storage Status", "## Queue Details (1 queues)",
                        "## Workers (0 registered)", "## Cron Jobs (0 scheduled)", "## Memory Stats"):
            assert heading in text
        assert '"name": "rq"' in text
        debug = await mcp.session.get_prompt("bunqueue_debug_queue", {"queue": "rq"})
        assert debug.description == 'Deep diagnostic for queue "rq"'
        assert "- Paused: false\n- Total jobs: 1" in debug.messages[0].content.text  # type: ignore[union-attr]
        incident = await mcp.session.get_prompt("bunqueue_incident_response", {})
        assert incident.description == "Incident response: jobs not processing"
        assert "## Flagged Queues (1 problematic)" in incident.messages[0].content.text  # type: ignore[union-attr]


async def test_tcp_mode_adds_the_job_on_the_server() -> None:
    server = ServerProcess(env={"RATE_LIMIT_MAX_REQUESTS": "100000000"}).start()
    raw = RawClient(server.addr)
    try:
        env = {"BUNQUEUE_MODE": "tcp", "BUNQUEUE_HOST": "127.0.0.1", "BUNQUEUE_PORT": str(server.port)}
        async with mcp_server(env) as mcp:
            job_id = (await mcp.ok("bunqueue_add_job", {"queue": "remote", "name": "n", "data": {"k": 1}}))["jobId"]
            on_server = raw.ok({"cmd": "GetJob", "id": job_id})["job"]
            assert on_server["queue"] == "remote" and on_server["data"] == {"k": 1} and on_server["name"] == "n"
            pulled = raw.ok({"cmd": "PULL", "queue": "remote"})["job"]
            raw.ok({"cmd": "ACK", "id": pulled["id"], "result": 7})
            assert await mcp.ok("bunqueue_get_job_state", {"jobId": job_id}) == {"jobId": job_id, "state": "completed"}
            assert await mcp.ok("bunqueue_get_job_result", {"jobId": job_id}) == {"jobId": job_id, "result": 7}
            assert (await mcp.resource("bunqueue://queues"))[0]["completed"] == 1
    finally:
        raw.close()
        server.stop()


async def test_embedded_mode_keeps_its_jobs_in_sqlite_with_data_path(tmp_path: Path) -> None:
    env = {"DATA_PATH": str(tmp_path / "jobs.db")}
    async with mcp_server(env) as mcp:
        job_id = (await mcp.ok("bunqueue_add_job", {"queue": "kept", "name": "n", "data": {"v": 1}}))["jobId"]
    async with mcp_server(env) as mcp:
        job = await mcp.ok("bunqueue_get_job", {"jobId": job_id})
        assert job["queue"] == "kept" and job["data"] == {"v": 1}


def test_without_the_sdk_the_command_says_how_to_install_it() -> None:
    probe = "import sys; sys.modules['mcp'] = None; from bunqueue.cli import main; raise SystemExit(main(['mcp']))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr == ("[bunqueue-mcp] The MCP server requires the MCP SDK (the 'mcp' extra).\n"
                           "Install it with:  pip install 'bunqueue[mcp]'\n")
