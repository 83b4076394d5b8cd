"""Job: a read view of the job record the server sent, and the operations on that job."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bunqueue.client.options import compact
from bunqueue.client.transport import Transport


def children_values(reply: dict[str, Any]) -> dict[str, Any]:
    """GetChildrenValues and its siblings answer ``{values}``, some servers ``{data: {values}}``."""
    data = reply.get("data")
    if isinstance(data, dict) and "values" in data:
        return dict(data.get("values") or {})
    return dict(reply.get("values") or {})


def _int_or_none(value: Any) -> int | None:
    return int(value) if value is not None else None


class JobView:
    """The fields of a job record, read from ``raw`` (the record as the server sent it)."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw

    @property
    def id(self) -> str:
        return str(self.raw.get("id"))

    @property
    def queue(self) -> str:
        return str(self.raw.get("queue"))

    @property
    def data(self) -> Any:
        return self.raw.get("data")

    @property
    def name(self) -> str | None:
        name = self.raw.get("name")
        return str(name) if name is not None else None

    @property
    def priority(self) -> int:
        return int(self.raw.get("priority") or 0)

    @property
    def attempts(self) -> int:
        return int(self.raw.get("attempts") or 0)

    @property
    def max_attempts(self) -> int:
        return int(self.raw.get("maxAttempts") or 0)

    @property
    def created_at(self) -> int | None:
        return _int_or_none(self.raw.get("createdAt"))

    @property
    def started_at(self) -> int | None:
        return _int_or_none(self.raw.get("startedAt"))

    @property
    def completed_at(self) -> int | None:
        return _int_or_none(self.raw.get("completedAt"))

    @property
    def custom_id(self) -> str | None:
        value = self.raw.get("customId")
        return str(value) if value is not None else None

    @property
    def tags(self) -> list[str]:
        return list(self.raw.get("tags") or [])

    @property
    def group_id(self) -> str | None:
        value = self.raw.get("groupId")
        return str(value) if value is not None else None

    @property
    def parent_id(self) -> str | None:
        value = self.raw.get("parentId")
        return str(value) if value is not None else None

    @property
    def children_ids(self) -> list[str]:
        return [str(c) for c in self.raw.get("childrenIds") or []]

    @property
    def depends_on(self) -> list[str]:
        return [str(c) for c in self.raw.get("dependsOn") or []]

    @property
    def progress(self) -> int:
        return int(self.raw.get("progress") or 0)

    @property
    def stacktrace(self) -> list[str] | None:
        value = self.raw.get("stacktrace")
        return list(value) if value else None

    @property
    def state(self) -> str | None:
        value = self.raw.get("state")
        return str(value) if value is not None else None

    @property
    def returnvalue(self) -> Any:
        return self.raw.get("returnvalue")

    @property
    def failed_reason(self) -> str | None:
        value = self.raw.get("failedReason")
        return str(value) if value is not None else None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r}, queue={self.queue!r}, name={self.name!r})"


class Job(JobView):
    """A job from a query, or one a Worker holds (then ``token`` is its lock token)."""

    def __init__(
        self,
        raw: dict[str, Any],
        transport: Transport | None = None,
        token: str | None = None,
        on_progress: Callable[[Job, Any], object] | None = None,
    ) -> None:
        super().__init__(raw)
        self.token = token
        self._transport = transport
        self._on_progress = on_progress

    async def _call(self, command: dict[str, Any]) -> dict[str, Any]:
        if self._transport is None:
            raise RuntimeError("this Job is not bound to a connection")
        return await self._transport.call(compact(command))

    async def update_progress(self, progress: Any, message: str | None = None) -> None:
        """Report progress (a number from 0 to 100, or any value); a Worker emits ``progress``."""
        await self._call({"cmd": "Progress", "id": self.id, "progress": progress, "message": message})
        self.raw["progress"] = progress
        if self._on_progress is not None:
            self._on_progress(self, progress)

    async def log(self, message: str, level: str | None = None) -> None:
        await self._call({"cmd": "AddLog", "id": self.id, "message": message, "level": level})

    async def heartbeat(self) -> None:
        """Renew this job's lock."""
        await self._call({"cmd": "JobHeartbeat", "id": self.id, "token": self.token})

    async def extend_lock(self, duration_ms: int) -> None:
        await self._call({"cmd": "ExtendLock", "id": self.id, "token": self.token, "duration": duration_ms})

    async def get_state(self) -> str:
        return str((await self._call({"cmd": "GetState", "id": self.id})).get("state"))

    async def get_children_values(self) -> dict[str, Any]:
        return children_values(await self._call({"cmd": "GetChildrenValues", "id": self.id}))

    async def remove(self) -> None:
        await self._call({"cmd": "Cancel", "id": self.id})

    async def discard(self) -> None:
        await self._call({"cmd": "Discard", "id": self.id})

    async def promote(self) -> None:
        await self._call({"cmd": "Promote", "id": self.id})

    async def retry(self) -> None:
        """A failed job back to waiting."""
        await self._call({"cmd": "MoveToWait", "id": self.id})

    async def update_data(self, data: Any) -> None:
        await self._call({"cmd": "Update", "id": self.id, "data": data})

    async def change_priority(self, priority: int, lifo: bool | None = None) -> None:
        await self._call({"cmd": "ChangePriority", "id": self.id, "priority": priority, "lifo": lifo})

    async def change_delay(self, delay_ms: int) -> None:
        await self._call({"cmd": "ChangeDelay", "id": self.id, "delay": delay_ms})

    async def move_to_delayed(self, delay_ms: int) -> None:
        await self._call({"cmd": "MoveToDelayed", "id": self.id, "delay": delay_ms})
