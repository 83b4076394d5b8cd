"""Monitoring tools: stats, logs, storage, memory and Prometheus metrics."""
from __future__ import annotations

from typing import Any

from bunqueue.mcp import shapes
from bunqueue.mcp.adapter import Adapter
from bunqueue.mcp.schema import Tool, enum, number, string
from bunqueue.mcp.tools.queue_tools import job_counts
from bunqueue.mcp.tools.service_tools import list_workers

PER_QUEUE_FIELDS = ("waiting", "prioritized", "delayed", "active", "dlq")


def _data(reply: dict[str, Any]) -> dict[str, Any]:
    data = reply.get("data")
    return data if isinstance(data, dict) else {}


async def stats(adapter: Adapter) -> dict[str, Any]:
    return dict((await adapter.call({"cmd": "Stats"})).get("stats") or {})


async def storage_status(adapter: Adapter) -> dict[str, Any]:
    data = _data(await adapter.call({"cmd": "StorageStatus"}))
    return {"diskFull": bool(data.get("diskFull")), "error": data.get("error")}


async def memory_stats(adapter: Adapter) -> dict[str, Any]:
    """The sizes of the broker's collections, under the original's names (the dashboard's ``collections``)."""
    return dict(_data(await adapter.call({"cmd": "DashboardOverview"})).get("collections") or {})


def tools(adapter: Adapter) -> list[Tool]:
    send, call, succeeded = adapter.send, adapter.call, adapter.succeeded

    async def get_stats(a: dict[str, Any]) -> str:
        return shapes.text(await stats(adapter), pretty=True)

    async def get_queue_stats(a: dict[str, Any]) -> str:
        return shapes.text({"queue": a["queue"], **await job_counts(adapter, a["queue"])}, pretty=True)

    async def list_workers_tool(a: dict[str, Any]) -> str:
        workers = await list_workers(adapter)
        return shapes.text({"count": len(workers), "workers": workers}, pretty=True)

    async def get_job_logs(a: dict[str, Any]) -> str:
        reply = await send({"cmd": "GetLogs", "id": a["jobId"]})
        logs = _data(reply).get("logs") or reply.get("logs") or []
        return shapes.text({"jobId": a["jobId"], "count": len(logs), "logs": logs}, pretty=True)

    async def add_job_log(a: dict[str, Any]) -> str:
        success = await succeeded({"cmd": "AddLog", "id": a["jobId"], "message": a["message"], "level": a.get("level")})
        return shapes.text({"success": success, "jobId": a["jobId"]})

    async def get_storage_status(a: dict[str, Any]) -> str:
        return shapes.text(await storage_status(adapter), pretty=True)

    async def get_per_queue_stats(a: dict[str, Any]) -> str:
        rows = _data(await call({"cmd": "DashboardQueues"})).get("queues") or []
        per_queue = {row["name"]: {field: row.get(field) or 0 for field in PER_QUEUE_FIELDS}
                     for row in rows if isinstance(row.get("name"), str)}
        return shapes.text(per_queue, pretty=True)

    async def get_memory_stats(a: dict[str, Any]) -> str:
        return shapes.text(await memory_stats(adapter), pretty=True)

    async def get_prometheus_metrics(a: dict[str, Any]) -> str:
        reply = await call({"cmd": "Prometheus"})
        return str(_data(reply).get("metrics") or reply.get("metrics") or "")

    async def clear_job_logs(a: dict[str, Any]) -> str:
        await call({"cmd": "ClearLogs", "id": a["jobId"], "keepLogs": a.get("keepLogs")})
        return shapes.text({"success": True, "jobId": a["jobId"]})

    async def compact_memory(a: dict[str, Any]) -> str:
        await call({"cmd": "CompactMemory"})
        return shapes.text({"success": True, "message": "Memory compaction triggered"})

    return [
        Tool("bunqueue_get_stats",
             "Get overall queue server statistics including throughput, memory usage, and uptime.", {}, (), get_stats),
        Tool("bunqueue_get_queue_stats",
             "Get detailed statistics for a specific queue including job counts per state.",
             {"queue": string("Queue name")}, ("queue",), get_queue_stats),
        Tool("bunqueue_list_workers", "List all registered workers with their status, queues, and processing stats.",
             {}, (), list_workers_tool),
        Tool("bunqueue_get_job_logs", "Get log entries for a specific job.", {"jobId": string("Job ID")}, ("jobId",),
             get_job_logs),
        Tool("bunqueue_add_job_log", "Add a log entry to a job.", {
            "jobId": string("Job ID"),
            "message": string("Log message"),
            "level": enum(("info", "warn", "error"), "Log level (default: info)"),
        }, ("jobId", "message"), add_job_log),
        Tool("bunqueue_get_storage_status", "Get storage health status. Reports if disk is full or has errors.", {},
             (), get_storage_status),
        Tool("bunqueue_get_per_queue_stats",
             "Get detailed statistics broken down per queue (throughput, latency, etc.).", {}, (), get_per_queue_stats),
        Tool("bunqueue_get_memory_stats", "Get memory usage statistics (jobIndex, completedJobs, cache sizes, etc.).",
             {}, (), get_memory_stats),
        Tool("bunqueue_get_prometheus_metrics", "Get metrics in Prometheus exposition format for monitoring.", {}, (),
             get_prometheus_metrics),
        Tool("bunqueue_clear_job_logs",
             "Clear log entries for a specific job, optionally keeping the last N entries.", {
                 "jobId": string("Job ID"),
                 "keepLogs": number("Number of recent log entries to keep (default: 0 = clear all)", minimum=0),
             }, ("jobId",), clear_job_logs),
        Tool("bunqueue_compact_memory", "Force memory compaction to free unused memory.", {}, (), compact_memory),
    ]
