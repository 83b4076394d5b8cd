"""Job tools: add, read, cancel, promote, progress, and the management of one job's data, priority and delay."""
from __future__ import annotations

from typing import Any

from bunqueue import errors
from bunqueue.mcp import shapes
from bunqueue.mcp.adapter import Adapter, ToolFailure
from bunqueue.mcp.schema import Handler, Tool, array, number, obj, record, string

JOB_ID = string("Job ID")


def tools(adapter: Adapter) -> list[Tool]:
    send, call, succeeded = adapter.send, adapter.call, adapter.succeeded

    async def add_job(a: dict[str, Any]) -> str:
        reply = await call({"cmd": "PUSH", "queue": a["queue"], "name": a["name"], "data": a["data"],
                            "priority": a.get("priority"), "delay": a.get("delay"), "maxAttempts": a.get("attempts")})
        return shapes.text({"jobId": str(reply["id"])}, pretty=True)

    async def add_jobs_bulk(a: dict[str, Any]) -> str:
        jobs = [shapes.defined(name=j["name"], data=j["data"], priority=j.get("priority"), delay=j.get("delay"))
                for j in a["jobs"]]
        reply = await call({"cmd": "PUSHB", "queue": a["queue"], "jobs": jobs})
        return shapes.text({"jobIds": [str(i) for i in reply.get("ids") or []]}, pretty=True)

    async def found_job(command: dict[str, Any]) -> str:
        reply = await send(command)
        if not reply.get("ok") or not reply.get("job"):
            raise ToolFailure(errors.MCP_JOB_NOT_FOUND)
        return shapes.text(shapes.job(reply["job"]), pretty=True)

    async def get_job(a: dict[str, Any]) -> str:
        return await found_job({"cmd": "GetJob", "id": a["jobId"]})

    async def get_job_state(a: dict[str, Any]) -> str:
        reply = await send({"cmd": "GetState", "id": a["jobId"]})
        return shapes.text({"jobId": a["jobId"], "state": reply.get("state") or "unknown"})

    async def get_job_result(a: dict[str, Any]) -> str:
        reply = await send({"cmd": "GetResult", "id": a["jobId"]})
        return shapes.text(shapes.defined(jobId=a["jobId"], result=reply.get("result")), pretty=True)

    def flag(cmd: str, *echo: str) -> Handler:
        """A tool that reports whether the broker did ``cmd`` on the job, echoing some arguments."""

        async def run(a: dict[str, Any]) -> str:
            success = await succeeded({"cmd": cmd, "id": a["jobId"], **{k: a.get(k) for k in echo}})
            return shapes.text({"success": success, "jobId": a["jobId"], **{k: a.get(k) for k in echo}})

        return run

    async def update_progress(a: dict[str, Any]) -> str:
        success = await succeeded({"cmd": "Progress", "id": a["jobId"], "progress": a["progress"],
                                   "message": a.get("message")})
        return shapes.text({"success": success, "jobId": a["jobId"], "progress": a["progress"]})

    async def update_job_data(a: dict[str, Any]) -> str:
        success = await succeeded({"cmd": "Update", "id": a["jobId"], "data": a["data"]})
        return shapes.text({"success": success, "jobId": a["jobId"]})

    async def get_children_values(a: dict[str, Any]) -> str:
        reply = await send({"cmd": "GetChildrenValues", "id": a["parentJobId"]})
        data = reply.get("data")
        values = data.get("values") if isinstance(data, dict) else None
        return shapes.text({"parentJobId": a["parentJobId"], "children": values or {}}, pretty=True)

    async def get_job_by_custom_id(a: dict[str, Any]) -> str:
        return await found_job({"cmd": "GetJobByCustomId", "customId": a["customId"]})

    async def wait_for_job(a: dict[str, Any]) -> str:
        reply = await send({"cmd": "WaitJob", "id": a["jobId"], "timeout": a["timeoutMs"]}, wait_ms=a["timeoutMs"])
        return shapes.text({"jobId": a["jobId"], "completed": bool(reply.get("ok") and reply.get("completed", True))})

    async def get_progress(a: dict[str, Any]) -> str:
        reply = await send({"cmd": "GetProgress", "id": a["jobId"]})
        if not reply.get("ok") or reply.get("progress") is None:
            raise ToolFailure(errors.MCP_JOB_NOT_FOUND)
        return shapes.text({"jobId": a["jobId"], "progress": reply.get("progress") or 0,
                            "message": reply.get("message")})

    job_only = {"jobId": JOB_ID}
    return [
        Tool("bunqueue_add_job", "Add a job to a queue. Returns the job ID.", {
            "queue": string("Queue name"),
            "name": string("Job name/type"),
            "data": record("Job payload data"),
            "priority": number("Priority (higher = processed first)"),
            "delay": number("Delay in milliseconds before processing"),
            "attempts": number("Max retry attempts (default: 3)"),
        }, ("queue", "name", "data"), add_job),
        Tool("bunqueue_add_jobs_bulk", "Add multiple jobs to a queue in a single operation.", {
            "queue": string("Queue name"),
            "jobs": array(obj({"name": string(), "data": record(), "priority": number(), "delay": number()},
                              ("name", "data")), "Array of jobs to add"),
        }, ("queue", "jobs"), add_jobs_bulk),
        Tool("bunqueue_get_job", "Get a job by ID. Returns job details including state, progress, and data.",
             job_only, ("jobId",), get_job),
        Tool("bunqueue_get_job_state",
             "Get the current state of a job (waiting, delayed, active, completed, failed).",
             job_only, ("jobId",), get_job_state),
        Tool("bunqueue_get_job_result", "Get the result of a completed job.", job_only, ("jobId",), get_job_result),
        Tool("bunqueue_cancel_job", "Cancel a waiting or delayed job.", {"jobId": string("Job ID to cancel")},
             ("jobId",), flag("Cancel")),
        Tool("bunqueue_promote_job", "Promote a delayed job to waiting state for immediate processing.",
             {"jobId": string("Job ID to promote")}, ("jobId",), flag("Promote")),
        Tool("bunqueue_update_progress", "Update job progress (0-100).", {
            "jobId": JOB_ID,
            "progress": number("Progress value (0-100)", minimum=0, maximum=100),
            "message": string("Optional progress message"),
        }, ("jobId", "progress"), update_progress),
        Tool("bunqueue_get_children_values",
             "Get return values from all child jobs of a parent job. Used with FlowProducer workflows.",
             {"parentJobId": string("Parent job ID")}, ("parentJobId",), get_children_values),
        Tool("bunqueue_get_job_by_custom_id",
             "Look up a job by its custom ID (set via jobId option during creation).",
             {"customId": string("Custom job ID")}, ("customId",), get_job_by_custom_id),
        Tool("bunqueue_wait_for_job",
             "Wait for a job to complete within a timeout. Returns true if completed, false if timed out.", {
                 "jobId": string("Job ID to wait for"),
                 "timeoutMs": number("Maximum wait time in milliseconds", minimum=100, maximum=30000),
             }, ("jobId", "timeoutMs"), wait_for_job),
        Tool("bunqueue_update_job_data", "Update the payload data of a job.",
             {"jobId": JOB_ID, "data": record("New job payload data")}, ("jobId", "data"), update_job_data),
        Tool("bunqueue_change_job_priority", "Change the priority of a waiting job. Higher priority = processed first.",
             {"jobId": JOB_ID, "priority": number("New priority value")}, ("jobId", "priority"),
             flag("ChangePriority", "priority")),
        Tool("bunqueue_move_to_delayed", "Move a job to delayed state with a specific delay in milliseconds.",
             {"jobId": JOB_ID, "delay": number("Delay in milliseconds", minimum=0)}, ("jobId", "delay"),
             flag("MoveToDelayed", "delay")),
        Tool("bunqueue_discard_job", "Discard a job permanently, removing it from the queue.",
             {"jobId": string("Job ID to discard")}, ("jobId",), flag("Discard")),
        Tool("bunqueue_get_progress", "Get the progress and progress message of a job.", job_only, ("jobId",),
             get_progress),
        Tool("bunqueue_change_delay", "Change the delay of a delayed job.",
             {"jobId": JOB_ID, "delay": number("New delay in milliseconds", minimum=0)}, ("jobId", "delay"),
             flag("ChangeDelay", "delay")),
    ]
