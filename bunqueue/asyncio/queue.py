"""Queue: adds jobs to one named queue and controls it. Queries and administration are in the mixins
``QueueQueryOps`` and ``QueueAdminOps``."""
from __future__ import annotations

import traceback
from collections.abc import Sequence
from typing import Any

from bunqueue.asyncio.base import TransportUser
from bunqueue.asyncio.job import Job
from bunqueue.asyncio.queue_admin import QueueAdminOps
from bunqueue.asyncio.queue_query import QueueQueryOps
from bunqueue.client.connectionoptions import DEFAULT_PORT, ConnectionOptions, TlsOption
from bunqueue.client.options import bulk_entry, compact, job_fields
from bunqueue.client.telemetry import TelemetryHandler
from bunqueue.client.transport import Transport
from bunqueue.errors import UnrecoverableError

# A failed job keeps this many of the last traceback lines (the server keeps the first
# ``stackTraceLimit``, 10 by default, of what it is sent; a Python traceback ends with the raise site).
MAX_STACK_LINES = 10


def stack_lines(error: BaseException, limit: int = MAX_STACK_LINES) -> list[str]:
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return text.splitlines()[-limit:]


class Queue(QueueQueryOps, QueueAdminOps, TransportUser):
    """Producer and management client of one queue; ``async with Queue(...) as q`` closes it."""

    def __init__(
        self,
        name: str,
        host: str = "localhost",
        port: int = DEFAULT_PORT,
        token: str | None = None,
        tls: TlsOption = None,
        connection: Transport | None = None,
        command_timeout: float = 10.0,
        prefix_key: str = "",
        *,
        embedded: bool = False,
        data_path: str | None = None,
        pool_size: int = 1,
        on_telemetry: TelemetryHandler | None = None,
    ) -> None:
        self.name = prefix_key + name
        self._open(ConnectionOptions(
            host, port, token, tls, command_timeout=command_timeout, pool_size=pool_size, on_telemetry=on_telemetry,
            embedded=embedded, data_path=data_path,
        ), connection)

    def _job(self, raw: dict[str, Any]) -> Job:
        return Job(raw, self.transport)

    def _named(self, name: str, data: Any) -> dict[str, Any]:
        """The name and data fields of a job as this API sends them."""
        return {"name": name, "data": data}

    # -- produce --------------------------------------------------------------------------------------

    async def add(self, name: str, data: Any = None, **options: Any) -> Job:
        """Add a job; ``options`` are job options (``priority``, ``delay``, ``attempts``, ``backoff``,
        ``job_id``, ``deduplication``, ...). Returns a Job carrying the new id."""
        fields = {**self._named(name, data), **job_fields(options)}
        reply = await self.transport.call({"cmd": "PUSH", "queue": self.name, **fields})
        return self._job({"id": reply.get("id"), "queue": self.name, **fields})

    async def add_bulk(self, jobs: Sequence[dict[str, Any]]) -> list[str]:
        """Add many jobs in one command; each entry is ``{"name", "data", **options}``."""
        entries = []
        for entry in jobs:
            options = dict(entry)
            name = options.pop("name")
            data = options.pop("data", None)
            entries.append({**self._named(name, data), **bulk_entry(options)})
        reply = await self.transport.call({"cmd": "PUSHB", "queue": self.name, "jobs": entries})
        return [str(job_id) for job_id in reply.get("ids", [])]

    # -- control --------------------------------------------------------------------------------------

    async def _count(self, command: dict[str, Any]) -> int:
        return int((await self.transport.call(compact(command))).get("count", 0))

    async def pause(self) -> None:
        await self.transport.call({"cmd": "Pause", "queue": self.name})

    async def resume(self) -> None:
        await self.transport.call({"cmd": "Resume", "queue": self.name})

    async def is_paused(self) -> bool:
        return bool((await self.transport.call({"cmd": "IsPaused", "queue": self.name})).get("paused"))

    async def drain(self) -> int:
        """Remove every waiting and delayed job; how many went."""
        return await self._count({"cmd": "Drain", "queue": self.name})

    async def obliterate(self) -> None:
        await self.transport.call({"cmd": "Obliterate", "queue": self.name})

    async def clean(self, grace_ms: int, limit: int | None = None, state: str | None = None) -> int:
        return await self._count({"cmd": "Clean", "queue": self.name, "grace": grace_ms, "state": state,
                                  "limit": limit})

    async def remove(self, job_id: str) -> None:
        await self.transport.call({"cmd": "Cancel", "id": job_id})

    async def cancel(self, job_id: str) -> None:
        """Another name of ``remove``."""
        await self.remove(job_id)

    async def discard(self, job_id: str) -> None:
        await self.transport.call({"cmd": "Discard", "id": job_id})

    async def promote_job(self, job_id: str) -> None:
        await self.transport.call({"cmd": "Promote", "id": job_id})

    async def promote_jobs(self, count: int | None = None) -> int:
        return await self._count({"cmd": "PromoteJobs", "queue": self.name, "count": count})

    async def retry_job(self, job_id: str) -> None:
        """A failed job back to waiting."""
        await self.transport.call({"cmd": "MoveToWait", "id": job_id})

    async def retry_jobs(self, state: str = "failed", count: int | None = None) -> int:
        if state == "failed":
            return await self._count({"cmd": "RetryDlq", "queue": self.name, "count": count})
        if state == "completed":
            return await self._count({"cmd": "RetryCompleted", "queue": self.name})
        raise ValueError("state must be 'failed' or 'completed'")

    async def retry_completed(self, job_id: str | None = None) -> int:
        return await self._count({"cmd": "RetryCompleted", "queue": self.name, "id": job_id})

    # -- one job's state ----------------------------------------------------------------------------

    async def update_job_progress(self, job_id: str, progress: Any, message: str | None = None) -> None:
        await self.transport.call(compact({"cmd": "Progress", "id": job_id, "progress": progress,
                                           "message": message}))

    async def update_job_data(self, job_id: str, data: Any) -> None:
        await self.transport.call({"cmd": "Update", "id": job_id, "data": data})

    async def change_job_priority(self, job_id: str, priority: int, lifo: bool | None = None) -> None:
        await self.transport.call(compact({"cmd": "ChangePriority", "id": job_id, "priority": priority,
                                           "lifo": lifo}))

    async def change_job_delay(self, job_id: str, delay_ms: int) -> None:
        await self.transport.call({"cmd": "ChangeDelay", "id": job_id, "delay": delay_ms})

    async def move_job_to_wait(self, job_id: str) -> None:
        await self.transport.call({"cmd": "MoveToWait", "id": job_id})

    async def move_job_to_delayed(self, job_id: str, delay_ms: int) -> None:
        await self.transport.call({"cmd": "MoveToDelayed", "id": job_id, "delay": delay_ms})

    async def extend_job_lock(self, job_id: str, token: str, duration_ms: int) -> None:
        await self.transport.call({"cmd": "ExtendLock", "id": job_id, "token": token, "duration": duration_ms})

    async def move_job_to_completed(self, job_id: str, result: Any = None, token: str | None = None) -> None:
        await self.transport.call(compact({"cmd": "ACK", "id": job_id, "result": result, "token": token}))

    async def move_job_to_failed(self, job_id: str, error: BaseException | str, token: str | None = None) -> None:
        """Fail a job; an exception sends its traceback as the stack, and an UnrecoverableError skips
        the remaining attempts."""
        if isinstance(error, BaseException):
            message = str(error) or type(error).__name__
            stack: list[str] | None = stack_lines(error)
            unrecoverable = True if isinstance(error, UnrecoverableError) else None
        else:
            message, stack, unrecoverable = error, None, None
        await self.transport.call(compact({"cmd": "FAIL", "id": job_id, "error": message, "stack": stack,
                                           "unrecoverable": unrecoverable, "token": token}))

    # -- lifecycle ------------------------------------------------------------------------------------

    async def ping(self) -> bool:
        try:
            reply = await self.transport.call({"cmd": "Ping"})
        except Exception:  # noqa: BLE001 - ping answers yes or no
            return False
        data = reply.get("data")
        return bool(isinstance(data, dict) and data.get("pong"))

    async def wait_until_ready(self) -> None:
        """Connect now (and authenticate) rather than on the first command."""
        await self.transport.call({"cmd": "Ping"})

    async def disconnect(self) -> None:
        await self.close()
