"""Queue tools: listing and counts, pause and resume, drain, obliterate and clean, the dead letter queue,
and rate and concurrency limits."""
from __future__ import annotations

from typing import Any

from bunqueue.mcp import shapes
from bunqueue.mcp.adapter import Adapter
from bunqueue.mcp.schema import Handler, Tool, enum, number, string

QUEUE = string("Queue name")
STATES = ("waiting", "delayed", "active", "completed", "failed")
DEFAULT_PAGE_END = 20
DEFAULT_DLQ_LIMIT = 20


async def job_counts(adapter: Adapter, queue: str) -> dict[str, int]:
    reply = await adapter.call({"cmd": "GetJobCounts", "queue": queue})
    return shapes.counts(reply.get("counts") or {})


async def list_queues(adapter: Adapter) -> list[str]:
    return list((await adapter.call({"cmd": "ListQueues"})).get("queues") or [])


async def is_paused(adapter: Adapter, queue: str) -> bool:
    return bool((await adapter.call({"cmd": "IsPaused", "queue": queue})).get("paused"))


async def dlq(adapter: Adapter, queue: str, limit: int) -> list[dict[str, Any]]:
    reply = await adapter.call({"cmd": "Dlq", "queue": queue, "count": limit})
    return [shapes.job(raw) for raw in reply.get("jobs") or []]


async def jobs_page(adapter: Adapter, queue: str, state: str | None, start: float, end: float | None
                    ) -> list[dict[str, Any]]:
    limit = max(0, end - start) if end is not None and end >= 0 else None
    reply = await adapter.call({"cmd": "GetJobs", "queue": queue, "state": state, "offset": start, "limit": limit})
    return [shapes.job(raw) for raw in reply.get("jobs") or []]


async def counts_per_priority(adapter: Adapter, queue: str) -> dict[str, int]:
    return dict((await adapter.call({"cmd": "GetCountsPerPriority", "queue": queue})).get("counts") or {})


def tools(adapter: Adapter) -> list[Tool]:
    call = adapter.call

    def done(cmd: str, message: str | None = None, *, count: str | None = None, echo: str | None = None) -> Handler:
        """A tool that runs ``cmd`` on a queue and reports success, a message, a count or an echoed limit."""

        async def run(a: dict[str, Any]) -> str:
            reply = await call({"cmd": cmd, "queue": a["queue"], "limit": a.get("limit") if echo else None,
                                "id": a.get("jobId")})
            shape: dict[str, Any] = {"success": True, "queue": a["queue"]}
            if message is not None:
                shape["message"] = message
            if count is not None:
                shape[count] = reply.get("count") or 0
            if echo is not None:
                shape[echo] = a["limit"]
            return shapes.text(shape)

        return run

    async def list_queues_tool(a: dict[str, Any]) -> str:
        return shapes.text({"queues": await list_queues(adapter)})

    async def count_jobs(a: dict[str, Any]) -> str:
        reply = await call({"cmd": "Count", "queue": a["queue"]})
        return shapes.text({"queue": a["queue"], "count": reply.get("count") or 0})

    async def get_jobs(a: dict[str, Any]) -> str:
        start = a.get("start") or 0
        end = a.get("end") if a.get("end") is not None else DEFAULT_PAGE_END
        jobs = await jobs_page(adapter, a["queue"], a.get("state"), start, end)
        return shapes.text({"queue": a["queue"], "count": len(jobs), "jobs": jobs}, pretty=True)

    async def get_job_counts(a: dict[str, Any]) -> str:
        return shapes.text({"queue": a["queue"], **await job_counts(adapter, a["queue"])})

    async def clean_queue(a: dict[str, Any]) -> str:
        reply = await call({"cmd": "Clean", "queue": a["queue"], "grace": a["graceMs"], "state": a.get("state"),
                            "limit": a.get("limit")})
        ids = [str(i) for i in reply.get("ids") or []]
        return shapes.text({"success": True, "queue": a["queue"], "removed": len(ids), "ids": ids})

    async def is_paused_tool(a: dict[str, Any]) -> str:
        return shapes.text({"queue": a["queue"], "paused": await is_paused(adapter, a["queue"])})

    async def get_counts_per_priority(a: dict[str, Any]) -> str:
        priorities = await counts_per_priority(adapter, a["queue"])
        return shapes.text({"queue": a["queue"], "priorities": priorities}, pretty=True)

    async def get_dlq(a: dict[str, Any]) -> str:
        jobs = await dlq(adapter, a["queue"], a.get("limit") or DEFAULT_DLQ_LIMIT)
        return shapes.text({"queue": a["queue"], "count": len(jobs), "jobs": jobs}, pretty=True)

    queue_only = {"queue": QUEUE}
    return [
        Tool("bunqueue_list_queues", "List all queues.", {}, (), list_queues_tool),
        Tool("bunqueue_count_jobs", "Count total jobs in a queue (all states).", queue_only, ("queue",), count_jobs),
        Tool("bunqueue_get_jobs", "List jobs in a queue with optional state filter and pagination.", {
            "queue": QUEUE,
            "state": enum(STATES, "Filter by job state"),
            "start": number("Start index for pagination (default: 0)"),
            "end": number("End index for pagination (default: 20)"),
        }, ("queue",), get_jobs),
        Tool("bunqueue_get_job_counts",
             "Get job counts per state for a queue (waiting, delayed, active, completed, failed).",
             queue_only, ("queue",), get_job_counts),
        Tool("bunqueue_pause_queue", "Pause job processing on a queue. No new jobs will be processed until resumed.",
             queue_only, ("queue",), done("Pause", "Queue paused")),
        Tool("bunqueue_resume_queue", "Resume job processing on a paused queue.", queue_only, ("queue",),
             done("Resume", "Queue resumed")),
        Tool("bunqueue_drain_queue", "Remove all waiting jobs from a queue. Active jobs continue processing.",
             queue_only, ("queue",), done("Drain", count="removed")),
        Tool("bunqueue_obliterate_queue",
             "Remove ALL data from a queue (waiting, active, completed, failed). Destructive operation.",
             queue_only, ("queue",), done("Obliterate", "Queue obliterated")),
        Tool("bunqueue_clean_queue", "Remove old jobs from a queue based on grace period and state.", {
            "queue": QUEUE,
            "graceMs": number("Grace period in ms - only remove jobs older than this", minimum=0),
            "state": enum(("completed", "failed"), "State to clean (default: both completed and failed)"),
            "limit": number("Maximum number of jobs to remove"),
        }, ("queue", "graceMs"), clean_queue),
        Tool("bunqueue_is_paused", "Check if a queue is currently paused.", queue_only, ("queue",), is_paused_tool),
        Tool("bunqueue_get_counts_per_priority",
             "Get job count breakdown by priority level for a queue. Counts only waiting/delayed (queued) jobs — "
             "active, completed and failed jobs are not included.", queue_only, ("queue",), get_counts_per_priority),
        Tool("bunqueue_get_dlq", "Get Dead Letter Queue entries for a queue. Shows jobs that permanently failed.",
             {"queue": QUEUE, "limit": number("Max entries to return (default: 20)")}, ("queue",), get_dlq),
        Tool("bunqueue_retry_dlq", "Retry jobs from the Dead Letter Queue. Moves them back to waiting state.",
             {"queue": QUEUE, "jobId": string("Specific job ID to retry (omit to retry all)")}, ("queue",),
             done("RetryDlq", count="retried")),
        Tool("bunqueue_purge_dlq", "Remove all entries from the Dead Letter Queue permanently.", queue_only,
             ("queue",), done("PurgeDlq", count="purged")),
        Tool("bunqueue_retry_completed", "Retry completed jobs - move them back to waiting state for reprocessing.",
             {"queue": QUEUE, "jobId": string("Specific job ID to retry (omit to retry all completed)")},
             ("queue",), done("RetryCompleted", count="retried")),
        Tool("bunqueue_set_rate_limit", "Set rate limit for a queue (max jobs processed per second).",
             {"queue": QUEUE, "limit": number("Max jobs per second", minimum=1)}, ("queue", "limit"),
             done("RateLimit", echo="rateLimit")),
        Tool("bunqueue_clear_rate_limit", "Remove rate limit from a queue, allowing unlimited throughput.",
             queue_only, ("queue",), done("RateLimitClear", "Rate limit cleared")),
        Tool("bunqueue_set_concurrency", "Set concurrency limit for a queue (max simultaneous active jobs).",
             {"queue": QUEUE, "limit": number("Max concurrent jobs", minimum=1)}, ("queue", "limit"),
             done("SetConcurrency", echo="concurrency")),
        Tool("bunqueue_clear_concurrency", "Remove concurrency limit from a queue.", queue_only, ("queue",),
             done("ClearConcurrency", "Concurrency limit cleared")),
    ]
