"""Queue queries: jobs, states, results, counts, logs, children."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bunqueue.asyncio.job import Job, children_values
from bunqueue.client.options import compact
from bunqueue.client.transport import Transport
from bunqueue.errors import CommandTimeoutError, RemoteCommandError

WAIT_JOB_MAX_MS = 600_000


def _not_found(exc: RemoteCommandError) -> bool:
    return "not found" in str(exc).lower()


class QueueQueryOps:
    name: str
    transport: Transport

    def _job(self, raw: dict[str, Any]) -> Job:
        raise NotImplementedError

    async def _maybe_job(self, command: dict[str, Any]) -> Job | None:
        try:
            reply = await self.transport.call(command)
        except RemoteCommandError as exc:
            if _not_found(exc):
                return None
            raise
        raw = reply.get("job")
        return self._job(raw) if raw else None

    async def get_job(self, job_id: str) -> Job | None:
        return await self._maybe_job({"cmd": "GetJob", "id": job_id})

    async def get_job_by_custom_id(self, custom_id: str) -> Job | None:
        return await self._maybe_job({"cmd": "GetJobByCustomId", "customId": custom_id})

    async def get_jobs(self, state: str | Sequence[str] | None = None, start: int = 0, end: int = 1000) -> list[Job]:
        """Jobs in ``state`` (one or several), from ``start`` up to ``end`` (exclusive)."""
        reply = await self.transport.call(compact({
            "cmd": "GetJobs",
            "queue": self.name,
            "state": list(state) if isinstance(state, (list, tuple)) else state,
            "offset": start,
            "limit": max(end - start, 0),
        }))
        return [self._job(raw) for raw in reply.get("jobs", [])]

    async def get_waiting(self, start: int = 0, end: int = 1000) -> list[Job]:
        return await self.get_jobs("waiting", start, end)

    async def get_delayed(self, start: int = 0, end: int = 1000) -> list[Job]:
        return await self.get_jobs("delayed", start, end)

    async def get_active(self, start: int = 0, end: int = 1000) -> list[Job]:
        return await self.get_jobs("active", start, end)

    async def get_completed(self, start: int = 0, end: int = 1000) -> list[Job]:
        return await self.get_jobs("completed", start, end)

    async def get_failed(self, start: int = 0, end: int = 1000) -> list[Job]:
        return await self.get_jobs("failed", start, end)

    async def get_prioritized(self, start: int = 0, end: int = 1000) -> list[Job]:
        return await self.get_jobs("prioritized", start, end)

    async def get_waiting_children(self, start: int = 0, end: int = 1000) -> list[Job]:
        return await self.get_jobs("waiting-children", start, end)

    # -- state ----------------------------------------------------------------------------------------

    async def get_state(self, job_id: str) -> str:
        return str((await self.transport.call({"cmd": "GetState", "id": job_id})).get("state"))

    async def get_result(self, job_id: str) -> Any:
        return (await self.transport.call({"cmd": "GetResult", "id": job_id})).get("result")

    async def get_progress(self, job_id: str) -> dict[str, Any]:
        reply = await self.transport.call({"cmd": "GetProgress", "id": job_id})
        return {"progress": reply.get("progress"), "message": reply.get("message")}

    async def wait_for_job(self, job_id: str, timeout_ms: int = 30000) -> Any:
        """The job's result once it completes. Raises RemoteCommandError when it failed and
        CommandTimeoutError when it did not complete in time."""
        timeout_ms = max(0, min(timeout_ms, WAIT_JOB_MAX_MS))
        reply = await self.transport.call({"cmd": "WaitJob", "id": job_id, "timeout": timeout_ms},
                                          timeout=timeout_ms / 1000 + 5)
        if reply.get("completed"):
            return reply.get("result")
        try:
            state: str | None = await self.get_state(job_id)
        except RemoteCommandError:
            state = None
        if state == "failed":
            raise RemoteCommandError(f"job {job_id} failed before completion")
        raise CommandTimeoutError(f"waitUntilFinished timed out after {timeout_ms}ms")

    async def wait_job_until_finished(self, job_id: str, queue_events: Any = None, ttl_ms: int | None = None) -> Any:
        """BullMQ's name of ``wait_for_job`` (``queue_events`` is not needed)."""
        return await self.wait_for_job(job_id, ttl_ms if ttl_ms is not None else 30000)

    # -- children -------------------------------------------------------------------------------------

    async def get_children_values(self, job_id: str) -> dict[str, Any]:
        return children_values(await self.transport.call({"cmd": "GetChildrenValues", "id": job_id}))

    async def get_failed_children_values(self, job_id: str) -> dict[str, Any]:
        return children_values(await self.transport.call({"cmd": "GetFailedChildrenValues", "id": job_id}))

    async def get_ignored_children_failures(self, job_id: str) -> dict[str, Any]:
        return children_values(await self.transport.call({"cmd": "GetIgnoredChildrenFailures", "id": job_id}))

    async def remove_child_dependency(self, job_id: str) -> None:
        await self.transport.call({"cmd": "RemoveChildDependency", "id": job_id})

    async def remove_unprocessed_children(self, job_id: str) -> None:
        await self.transport.call({"cmd": "RemoveUnprocessedChildren", "id": job_id})

    async def get_deduplication_job_id(self, deduplication_id: str) -> str | None:
        job = await self.get_job_by_custom_id(deduplication_id)
        return job.id if job else None

    # -- counts ---------------------------------------------------------------------------------------

    async def get_job_counts(self) -> dict[str, int]:
        return dict((await self.transport.call({"cmd": "GetJobCounts", "queue": self.name})).get("counts", {}))

    async def _state_count(self, state: str) -> int:
        return int((await self.get_job_counts()).get(state, 0))

    async def get_waiting_count(self) -> int:
        return await self._state_count("waiting")

    async def get_active_count(self) -> int:
        return await self._state_count("active")

    async def get_completed_count(self) -> int:
        return await self._state_count("completed")

    async def get_failed_count(self) -> int:
        return await self._state_count("failed")

    async def get_delayed_count(self) -> int:
        return await self._state_count("delayed")

    async def get_prioritized_count(self) -> int:
        return await self._state_count("prioritized")

    async def get_waiting_children_count(self) -> int:
        return await self._state_count("waiting-children")

    async def count(self) -> int:
        return int((await self.transport.call({"cmd": "Count", "queue": self.name})).get("count", 0))

    async def get_counts_per_priority(self) -> dict[str, int]:
        reply = await self.transport.call({"cmd": "GetCountsPerPriority", "queue": self.name})
        return dict(reply.get("counts") or reply.get("data") or {})

    # -- logs -----------------------------------------------------------------------------------------

    async def add_job_log(self, job_id: str, message: str, level: str | None = None) -> None:
        await self.transport.call(compact({"cmd": "AddLog", "id": job_id, "message": message, "level": level}))

    async def get_job_logs(self, job_id: str, start: int | None = None, end: int | None = None) -> list[Any]:
        reply = await self.transport.call(compact({"cmd": "GetLogs", "id": job_id, "start": start, "end": end}))
        data = reply.get("data")
        if isinstance(data, dict):
            return list(data.get("logs") or [])
        return list(reply.get("logs") or [])

    async def clear_job_logs(self, job_id: str, keep_logs: int | None = None) -> None:
        await self.transport.call(compact({"cmd": "ClearLogs", "id": job_id, "keepLogs": keep_logs}))
