"""QueueEvents: one queue's events as the TS client names them, to listeners and to ``async for``.

Over TCP the events come on a connection of their own (``SubscribeEvents``), which subscribes again after
a reconnect (the events published while it was away are not replayed); embedded, from the engine
directly. Names and payloads: ``waiting {jobId}``, ``active {jobId}``, ``progress {jobId, data}``,
``completed {jobId, returnvalue}``, ``failed {jobId, failedReason, data}``, ``stalled {jobId}``,
``delayed {jobId, delay}``, ``removed {jobId, prev}``, ``duplicated``, ``retried {jobId, prev}``,
``waiting-children``, ``drained {id}``, ``paused``, ``resumed``.
"""
from __future__ import annotations

import asyncio
from typing import Any

from bunqueue.asyncio.base import loop_running, open_transport
from bunqueue.asyncio.emitter import EventEmitter
from bunqueue.client.connectionoptions import DEFAULT_PORT, ConnectionOptions, TlsOption
from bunqueue.client.transport import Subscription, Transport


def translate(event: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The TS client's name and payload of one wire event; None for a kind it does not report."""
    kind = event.get("eventType")
    job_id = event.get("jobId")
    if kind == "pushed":
        return "waiting", {"jobId": job_id}
    if kind == "pulled":
        return "active", {"jobId": job_id}
    if kind == "completed":
        return "completed", {"jobId": job_id, "returnvalue": event.get("data")}
    if kind == "failed":
        return "failed", {"jobId": job_id, "failedReason": event.get("error") or "Job failed",
                          "data": event.get("data")}
    if kind == "progress":
        progress = event.get("progress")
        return "progress", {"jobId": job_id, "data": progress if progress is not None else event.get("data")}
    if kind == "removed":
        return "removed", {"jobId": job_id, "prev": event.get("prev") or "unknown"}
    if kind == "delayed":
        return "delayed", {"jobId": job_id, "delay": event.get("delay") or 0}
    if kind == "retried":
        return "retried", {"jobId": job_id, "prev": event.get("prev") or "failed"}
    if kind in ("stalled", "duplicated", "waiting-children"):
        return str(kind), {"jobId": job_id}
    if kind == "drained":
        return "drained", {"id": job_id}
    if kind in ("paused", "resumed"):
        return str(kind), {}
    return None

class QueueEvents(EventEmitter):
    """Listen with ``on(name, callback)`` or iterate: ``async for name, payload in events``."""

    def __init__(
        self,
        name: str,
        host: str = "localhost",
        port: int = DEFAULT_PORT,
        token: str | None = None,
        tls: TlsOption = None,
        connection: Transport | None = None,
        prefix_key: str = "",
        *,
        autorun: bool = True,
        embedded: bool = False,
        data_path: str | None = None,
    ) -> None:
        super().__init__()
        self.name = prefix_key + name
        self.transport, self._owns_transport = open_transport(ConnectionOptions(
            host, port, token, tls, embedded=embedded, data_path=data_path,
        ), connection)
        self._subscription: Subscription | None = None
        self._starting: asyncio.Task[None] | None = None
        # Filled only once someone iterates, so a listener-only QueueEvents keeps nothing.
        self._stream: asyncio.Queue[tuple[str, dict[str, Any]] | None] | None = None
        self._closed = False
        if autorun and loop_running():
            self.start()

    def start(self) -> None:
        if self._starting is None and not self._closed:
            self._starting = asyncio.ensure_future(self._subscribe())
            self._starting.add_done_callback(self._started)

    async def _subscribe(self) -> None:
        self._subscription = await self.transport.subscribe(self.name, self._on_wire)

    def _started(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None and self.listener_count("error"):
            self.emit("error", task.exception())

    async def wait_until_ready(self) -> None:
        """Return once the subscription is in place: later events are not missed."""
        self.start()
        assert self._starting is not None
        await asyncio.shield(self._starting)

    def _on_wire(self, event: dict[str, Any]) -> None:
        if self._closed or event.get("queue") != self.name:
            return
        found = translate(event)
        if found is None:
            return
        self.emit(*found)
        if found[0] == "failed" and self.listener_count("error"):
            self.emit("error", RuntimeError(found[1]["failedReason"]), event)
        if self._stream is not None:
            self._stream.put_nowait(found)

    def __aiter__(self) -> QueueEvents:
        if self._stream is None:
            self._stream = asyncio.Queue()
        return self

    async def __anext__(self) -> tuple[str, dict[str, Any]]:
        if self._stream is None:
            self._stream = asyncio.Queue()
        item = await self._stream.get()
        if item is None:
            raise StopAsyncIteration
        return item

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._starting is not None and not self._starting.done():
            self._starting.cancel()
        if self._subscription is not None:
            await self._subscription.close()
        if self._owns_transport:
            await self.transport.close()
        if self._stream is not None:
            self._stream.put_nowait(None)

    async def __aenter__(self) -> QueueEvents:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
