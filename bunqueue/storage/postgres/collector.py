"""Group commit: requests of one kind share a statement, the database's latency setting the batch size.

A caller appends its request and awaits a future. One flusher task per collector takes everything pending,
runs one statement for all of it and settles each future; whatever arrived meanwhile is the next batch.
No timer holds a request back: an idle collector flushes a lone request at once. The flusher is the only
task, started with the first request and parked on an event while nothing is pending, so a request costs
a list append and a future, never a task of its own.

A ``balanced`` collector evens its flushes out. Taking everything pending locks a steady load into
alternating large and small flushes: the requests answered by a large flush come back while the small
one runs, and those answered by the small one while the next large one runs. The broker prepares the
requests of one flush while the database writes the other, so each waits on the other for the difference.
A balanced collector takes, of a backlog larger than its last flush, the midpoint between the two: the
flushes of a steady load converge to equal halves, and a burst is still taken half at a time at least.
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

Request = TypeVar("Request")
Outcome = TypeVar("Outcome")

# Runs one batch; returns one outcome per request, in order. An outcome that is an exception is raised to
# that request's caller alone; an exception raised by the flush itself reaches every caller of the batch.
Flush = Callable[[list[Request]], Awaitable[Sequence[Outcome | BaseException]]]


class CollectorClosed(Exception):
    """The collector was closed while the request waited."""


class Collector(Generic[Request, Outcome]):
    __slots__ = ("_flush", "_requests", "_futures", "_ready", "_task", "_closed", "_last", "balanced", "max_batch")

    def __init__(self, flush: Flush[Request, Outcome], max_batch: int = 10_000, balanced: bool = False) -> None:
        self._flush = flush
        self._requests: list[Request] = []
        self._futures: list[asyncio.Future[Outcome]] = []
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        # A flush takes at most this many requests; the rest wait for the next one.
        self.max_batch = max_batch
        self.balanced = balanced
        # How many requests the last flush took.
        self._last = 0

    def submit(self, request: Request) -> asyncio.Future[Outcome]:
        """Queue ``request`` for the next flush; its outcome arrives on the future."""
        if self._closed:
            raise CollectorClosed("collector closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Outcome] = loop.create_future()
        self._requests.append(request)
        self._futures.append(future)
        if self._task is None:
            self._task = loop.create_task(self._run())
        self._ready.set()
        return future

    @property
    def pending(self) -> int:
        return len(self._requests)

    async def _run(self) -> None:
        while not self._closed:
            if not self._requests:
                self._ready.clear()
                await self._ready.wait()
                continue
            cut = self.max_batch
            if self.balanced and len(self._requests) > self._last > 0:
                cut = min(cut, (len(self._requests) + self._last + 1) // 2)
            requests, self._requests = self._requests[:cut], self._requests[cut:]
            self._last = len(requests)
            futures, self._futures = self._futures[:cut], self._futures[cut:]
            try:
                outcomes = await self._flush(requests)
            except Exception as exc:
                for future in futures:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for future, outcome in zip(futures, outcomes):
                # A caller that gave up (cancelled) simply does not read its outcome.
                if future.done():
                    continue
                if isinstance(outcome, BaseException):
                    future.set_exception(outcome)
                else:
                    future.set_result(outcome)

    async def close(self) -> None:
        """Stop the flusher once its current flush is done; requests still pending are refused."""
        self._closed = True
        self._ready.set()
        if self._task is not None:
            await self._task
            self._task = None
        for future in self._futures:
            if not future.done():
                future.set_exception(CollectorClosed("collector closed"))
        self._requests.clear()
        self._futures.clear()
