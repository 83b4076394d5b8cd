"""HTTP handlers: a worker per queue that sends each job to a URL and completes it with the answer.

A handler's URL obeys the webhook URL rules (``bunqueue.webhooks.urls``): no loopback, private or metadata
address unless ``WEBHOOK_ALLOW_PRIVATE`` admits private ones, and names that resolve to refused addresses
are refused at connect time, as for webhooks.
"""
from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from bunqueue.asyncio.worker import Worker
from bunqueue.config import Settings
from bunqueue.mcp.adapter import Adapter, ToolFailure
from bunqueue.webhooks.client import new_session
from bunqueue.webhooks.urls import webhook_url_error

DEFAULT_TIMEOUT_MS = 30_000
#: Methods whose request carries a body (the job's data, or the handler's own body).
BODY_METHODS = ("POST", "PUT")


@dataclass
class Handler:
    url: str
    method: str
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    timeout_ms: float | None = None

    def shown(self) -> dict[str, Any]:
        """The handler as the original lists it: what was given, nothing defaulted."""
        shape: dict[str, Any] = {"url": self.url, "method": self.method}
        if self.headers:
            shape["headers"] = self.headers
        if self.body is not None:
            shape["body"] = self.body
        if self.timeout_ms is not None:
            shape["timeoutMs"] = self.timeout_ms
        return shape


class HandlerRegistry:
    """The handlers of this server, one per queue; a new one on a queue replaces the old."""

    def __init__(self, adapter: Adapter, allow_private: bool | None = None) -> None:
        self.adapter = adapter
        self.allow_private = Settings.load({}).webhook_allow_private if allow_private is None else allow_private
        self.workers: dict[str, tuple[Handler, Worker]] = {}

    async def register(self, queue: str, handler: Handler) -> None:
        refused = webhook_url_error(handler.url, self.allow_private)
        if refused is not None:
            raise ToolFailure(refused)
        await self.unregister(queue)
        worker = Worker(queue, self._processor(handler), connection=self.adapter.transport, concurrency=1,
                        batch_size=1)
        worker.start()
        self.workers[queue] = (handler, worker)

    async def unregister(self, queue: str) -> bool:
        entry = self.workers.pop(queue, None)
        if entry is None:
            return False
        await entry[1].close(0)
        return True

    def list(self) -> list[dict[str, Any]]:
        return [{"queue": queue, "handler": handler.shown(), "active": worker.is_running()}
                for queue, (handler, worker) in self.workers.items()]

    async def close(self) -> None:
        for queue in list(self.workers):
            await self.unregister(queue)

    def _processor(self, handler: Handler) -> Callable[[Any], Awaitable[dict[str, Any]]]:
        timeout_s = (handler.timeout_ms or DEFAULT_TIMEOUT_MS) / 1000
        allow_private = self.allow_private

        async def process(job: Any) -> dict[str, Any]:
            body = None
            if handler.method in BODY_METHODS:
                body = json.dumps(handler.body if handler.body is not None else job.data)
            headers = {"Content-Type": "application/json", **handler.headers}
            async with new_session(timeout_s, allow_private) as session, session.request(
                handler.method, handler.url, data=body, headers=headers, allow_redirects=False,
            ) as response:
                answer: Any = await response.text()
                if "json" in response.headers.get("content-type", ""):
                    answer = json.loads(answer)
                if not response.ok:
                    shown = answer if isinstance(answer, str) else json.dumps(answer, separators=(",", ":"))
                    raise aiohttp.ClientError(f"HTTP {response.status}: {shown}")
                return {"status": response.status, "body": answer}

        return process
