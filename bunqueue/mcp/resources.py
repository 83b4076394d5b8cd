"""The five resources: JSON views of the broker for an agent's context."""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from bunqueue.mcp import shapes
from bunqueue.mcp.adapter import Adapter
from bunqueue.mcp.tools.monitor_tools import stats
from bunqueue.mcp.tools.queue_tools import job_counts, list_queues
from bunqueue.mcp.tools.service_tools import list_crons, list_webhooks, list_workers

MIME_JSON = "application/json"


@dataclass(frozen=True)
class Resource:
    name: str
    uri: str
    description: str
    read: Callable[[], Awaitable[Any]]

    async def text(self) -> str:
        """The resource's JSON; a failure reads as ``{"error", "isError": true}``, as in the original."""
        try:
            return shapes.text(await self.read(), pretty=True)
        except Exception as exc:  # noqa: BLE001 - any failure is the resource's answer, never a crash
            return shapes.text({"error": str(exc), "isError": True})


def resources(adapter: Adapter) -> list[Resource]:
    async def queues() -> list[dict[str, Any]]:
        return [{"name": name, **await job_counts(adapter, name)} for name in await list_queues(adapter)]

    return [
        Resource("stats", "bunqueue://stats", "Overall queue server statistics", lambda: stats(adapter)),
        Resource("queues", "bunqueue://queues", "All queues with job counts per state", queues),
        Resource("crons", "bunqueue://crons", "All scheduled cron jobs", lambda: list_crons(adapter)),
        Resource("workers", "bunqueue://workers", "Active workers and their status", lambda: list_workers(adapter)),
        Resource("webhooks", "bunqueue://webhooks", "Registered webhooks", lambda: list_webhooks(adapter)),
    ]
