"""Consumption tools: pull, ack and fail jobs, heartbeats and locks."""
from __future__ import annotations

from typing import Any

from bunqueue.mcp import shapes
from bunqueue.mcp.adapter import Adapter
from bunqueue.mcp.schema import Tool, anything, array, number, string

LONG_POLL = number("Long-poll timeout in ms (0 = no wait)", minimum=0, maximum=30000)


def tools(adapter: Adapter) -> list[Tool]:
    send, call, succeeded = adapter.send, adapter.call, adapter.succeeded

    async def pull_job(a: dict[str, Any]) -> str:
        wait = a.get("timeoutMs")
        reply = await call({"cmd": "PULL", "queue": a["queue"], "timeout": wait}, wait_ms=wait)
        raw = reply.get("job")
        return shapes.text({"job": shapes.job(raw) if raw else None}, pretty=True)

    async def pull_job_batch(a: dict[str, Any]) -> str:
        wait = a.get("timeoutMs")
        reply = await call({"cmd": "PULLB", "queue": a["queue"], "count": a["count"], "timeout": wait}, wait_ms=wait)
        jobs = [shapes.job(raw) for raw in reply.get("jobs") or []]
        return shapes.text({"count": len(jobs), "jobs": jobs}, pretty=True)

    async def ack_job(a: dict[str, Any]) -> str:
        await call({"cmd": "ACK", "id": a["jobId"], "result": a.get("result")})
        return shapes.text({"success": True, "jobId": a["jobId"]})

    async def ack_job_batch(a: dict[str, Any]) -> str:
        await call({"cmd": "ACKB", "ids": a["jobIds"]})
        return shapes.text({"success": True, "count": len(a["jobIds"])})

    async def fail_job(a: dict[str, Any]) -> str:
        await call({"cmd": "FAIL", "id": a["jobId"], "error": a.get("error")})
        return shapes.text({"success": True, "jobId": a["jobId"]})

    async def job_heartbeat(a: dict[str, Any]) -> str:
        success = await succeeded({"cmd": "JobHeartbeat", "id": a["jobId"]})
        return shapes.text({"success": success, "jobId": a["jobId"]})

    async def job_heartbeat_batch(a: dict[str, Any]) -> str:
        reply = await send({"cmd": "JobHeartbeatB", "ids": a["jobIds"]})
        return shapes.text({"success": True, "acknowledged": reply.get("count") or 0})

    async def extend_lock(a: dict[str, Any]) -> str:
        success = await succeeded({"cmd": "ExtendLock", "id": a["jobId"], "token": a["token"],
                                   "duration": a["duration"]})
        return shapes.text({"success": success, "jobId": a["jobId"]})

    job_ids = array(string(), min_items=1)
    return [
        Tool("bunqueue_pull_job", "Pull a single job from a queue for processing. Returns null if no jobs available.",
             {"queue": string("Queue name"), "timeoutMs": LONG_POLL}, ("queue",), pull_job),
        Tool("bunqueue_pull_job_batch", "Pull multiple jobs from a queue in one operation.", {
            "queue": string("Queue name"),
            "count": number("Number of jobs to pull", minimum=1, maximum=1000),
            "timeoutMs": LONG_POLL,
        }, ("queue", "count"), pull_job_batch),
        Tool("bunqueue_ack_job", "Acknowledge a job as completed with an optional result.",
             {"jobId": string("Job ID to acknowledge"), "result": anything("Optional result data")}, ("jobId",),
             ack_job),
        Tool("bunqueue_ack_job_batch", "Acknowledge multiple jobs as completed in one operation.",
             {"jobIds": {**job_ids, "description": "Array of job IDs to acknowledge"}}, ("jobIds",), ack_job_batch),
        Tool("bunqueue_fail_job", "Mark a job as failed with an optional error message.",
             {"jobId": string("Job ID to fail"), "error": string("Error message")}, ("jobId",), fail_job),
        Tool("bunqueue_job_heartbeat", "Send a heartbeat for an active job to prevent stall detection.",
             {"jobId": string("Job ID")}, ("jobId",), job_heartbeat),
        Tool("bunqueue_job_heartbeat_batch", "Send heartbeats for multiple active jobs at once.",
             {"jobIds": {**job_ids, "description": "Array of job IDs"}}, ("jobIds",), job_heartbeat_batch),
        Tool("bunqueue_extend_lock", "Extend the lock on an active job to prevent it from being reclaimed.", {
            "jobId": string("Job ID"),
            "token": string("Lock token"),
            "duration": number("Extension duration in milliseconds", minimum=1000),
        }, ("jobId", "token", "duration"), extend_lock),
    ]
