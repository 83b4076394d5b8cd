"""Worker: pulls jobs of one queue and runs a processor on each, ``concurrency`` at a time.

The processor is a coroutine function (run as a task on the loop) or a plain function (run on a pool of
``concurrency`` threads). Its return value completes the job; an exception fails it (retried by the
server while attempts remain; an ``UnrecoverableError`` fails it for good). Events: ``ready``,
``active(job)``, ``progress(job, progress)``, ``completed(job, result)``, ``failed(job, error)``,
``drained``, ``error(error)``, ``cancelled({jobId, reason})``, ``closed``.
"""
from __future__ import annotations

import asyncio
import inspect
import os
import socket
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bunqueue.asyncio.acks import AckBatcher
from bunqueue.asyncio.base import loop_running, open_transport
from bunqueue.asyncio.emitter import EventEmitter
from bunqueue.asyncio.job import Job
from bunqueue.asyncio.queue import MAX_STACK_LINES, stack_lines
from bunqueue.client.connectionoptions import DEFAULT_PORT, ConnectionOptions, TlsOption
from bunqueue.client.options import compact
from bunqueue.client.transport import RECONNECT_BACKOFF_S, Transport
from bunqueue.errors import BunqueueError, UnrecoverableError

MAX_POLL_TIMEOUT_MS = 30000
#: A long-poll is cut in pieces of at most this long, so ``close`` never waits for a whole one.
POLL_SLICE_MS = 1000
MAX_BATCH = 1000

Processor = Callable[[Any], Any]
#: Builds the job object handed to the processor and the listeners: (raw record, lock token) -> job.
JobFactory = Callable[[dict[str, Any], str | None], Any]


class Worker(EventEmitter):
    """Consumes one queue. Created inside a running loop with ``autorun=True`` (the default) it starts at
    once; otherwise call ``start()`` or ``await run()``. ``await close()`` stops pulling and finishes the
    jobs in hand."""

    def __init__(
        self,
        queue: str,
        processor: Processor,
        *,
        host: str = "localhost",
        port: int = DEFAULT_PORT,
        token: str | None = None,
        tls: TlsOption = None,
        concurrency: int = 4,
        batch_size: int = 10,
        poll_timeout_ms: int = 5000,
        lock_ttl_ms: int = 30000,
        heartbeat_interval_s: float = 10.0,
        autorun: bool = True,
        name: str | None = None,
        ack_batch: dict[str, Any] | None = None,
        on_telemetry: Callable[[dict[str, Any]], None] | None = None,
        connection: Transport | None = None,
        embedded: bool = False,
        data_path: str | None = None,
        prefix_key: str = "",
        job_factory: JobFactory | None = None,
    ) -> None:
        super().__init__()
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.queue = prefix_key + queue
        self.processor = processor
        self.concurrency = concurrency
        # PULLB takes at most 1000 jobs: a larger batch would fail every poll.
        self.batch_size = max(1, min(batch_size, MAX_BATCH))
        self.poll_timeout_ms = max(0, min(poll_timeout_ms, MAX_POLL_TIMEOUT_MS))
        self.lock_ttl_ms = lock_ttl_ms
        self.heartbeat_interval_s = heartbeat_interval_s
        self.worker_id = f"py-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.name = name or self.worker_id
        self.transport, self._owns_transport = open_transport(ConnectionOptions(
            host, port, token, tls, on_telemetry=on_telemetry, embedded=embedded, data_path=data_path,
        ), connection)
        self._job_factory = job_factory or self._new_job
        self._acks: AckBatcher | None = None
        if ack_batch and ack_batch.get("enabled", True):
            self._acks = AckBatcher(self.transport, int(ack_batch.get("max_size", 50)),
                                    float(ack_batch.get("max_delay_ms", 5)))
        self._coroutine = inspect.iscoroutinefunction(processor)
        self._threads: ThreadPoolExecutor | None = None
        self._active: dict[str, str | None] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._cancelled: dict[str, str | None] = {}
        self._slot_free = asyncio.Event()
        self._resumed = asyncio.Event()
        self._resumed.set()
        self._stopping = asyncio.Event()
        self._ready = asyncio.Event()
        self._run_task: asyncio.Task[None] | None = None
        self._closed = False
        self._busy = False
        self._registered_generation = -1
        self.processed = 0
        self.failed = 0
        if autorun and loop_running():
            self.start()

    #: What ``_new_job`` makes (the synchronous client's Worker makes its own Jobs).
    _job_type: type[Any] = Job

    def _new_job(self, raw: dict[str, Any], token: str | None) -> Any:
        return self._job_type(raw, self.transport, token, on_progress=lambda job, p: self.emit("progress", job, p))

    def on(self, event: str, listener: Callable[..., Any]) -> Worker:
        """As EventEmitter.on; a ``ready`` listener added after the worker is ready is called at once."""
        if event == "ready" and self._ready.is_set():
            self._dispatch(event, listener, ())
        super().on(event, listener)
        return self

    # -- lifecycle ------------------------------------------------------------------------------------

    def start(self) -> None:
        """Run the worker as a task of the running loop."""
        if self._closed or self._run_task is not None:
            return
        self._run_task = asyncio.ensure_future(self._main())

    async def run(self) -> None:
        """Run until ``close``; joins the loop when it already runs."""
        self.start()
        if self._run_task is not None:
            await asyncio.shield(self._run_task)

    async def _main(self) -> None:
        heartbeats: asyncio.Task[None] | None = None
        try:
            if not self._coroutine:
                self._threads = ThreadPoolExecutor(self.concurrency, thread_name_prefix="bunqueue-job")
            await self._register()
            self._ready.set()
            self.emit("ready")
            if self.heartbeat_interval_s > 0:
                heartbeats = asyncio.ensure_future(self._heartbeats())
            failures = 0
            while not self._stopping.is_set():
                try:
                    await self._poll_once()
                    failures = 0
                except (BunqueueError, OSError) as exc:
                    self.emit("error", exc)
                    await self._sleep(RECONNECT_BACKOFF_S[min(failures, len(RECONNECT_BACKOFF_S) - 1)])
                    failures += 1
        finally:
            await self._shutdown(heartbeats)

    async def _sleep(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._stopping.wait(), seconds)
        except TimeoutError:
            pass

    async def _shutdown(self, heartbeats: asyncio.Task[None] | None) -> None:
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        if self._acks is not None:
            await self._acks.drain()
        if heartbeats is not None:
            heartbeats.cancel()
        if self._threads is not None:
            self._threads.shutdown(wait=False)
        await self._safe_call({"cmd": "UnregisterWorker", "workerId": self.worker_id}, report=False)
        if self._owns_transport:
            await self.transport.close()
        self._closed = True
        self.emit("closed")

    def pause(self) -> None:
        """Stop taking new jobs; the ones in hand go on."""
        self._resumed.clear()

    def resume(self) -> None:
        self._resumed.set()

    def is_running(self) -> bool:
        return self._run_task is not None and not self._closed

    def is_paused(self) -> bool:
        return not self._resumed.is_set()

    def is_closed(self) -> bool:
        return self._closed

    async def wait_until_ready(self, timeout: float = 10.0) -> None:
        self.start()
        await asyncio.wait_for(self._ready.wait(), timeout)

    async def close(self, timeout: float | None = None) -> bool:
        """Stop pulling and finish the jobs in hand. False when ``timeout`` ran out first (the worker
        goes on closing)."""
        self._stopping.set()
        self._resumed.set()
        self._slot_free.set()
        task = self._run_task
        if task is None:
            if not self._closed:
                self._closed = True
                if self._owns_transport:
                    await self.transport.close()
                self.emit("closed")
            return True
        done, _ = await asyncio.wait((task,), timeout=timeout)
        return bool(done)

    async def stop(self, timeout: float | None = None) -> bool:
        """Another name of ``close``."""
        return await self.close(timeout)

    async def __aenter__(self) -> Worker:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- cooperative cancellation ---------------------------------------------------------------------

    def cancel_job(self, job_id: str, reason: str | None = None) -> bool:
        """Mark a job this worker holds as cancelled; the processor asks ``is_job_cancelled``."""
        if job_id not in self._active:
            return False
        self._cancelled[job_id] = reason
        self.emit("cancelled", {"jobId": job_id, "reason": reason or "cancelled"})
        return True

    def cancel_all_jobs(self, reason: str | None = None) -> None:
        for job_id in list(self._active):
            self.cancel_job(job_id, reason)

    def is_job_cancelled(self, job_id: str) -> bool:
        return job_id in self._cancelled

    # -- pulling --------------------------------------------------------------------------------------

    async def _poll_once(self) -> None:
        if not self._resumed.is_set():
            await self._resumed.wait()
            return
        free = self.concurrency - len(self._active)
        if free <= 0:
            self._slot_free.clear()
            await self._slot_free.wait()
            return
        if getattr(self.transport, "generation", 0) != self._registered_generation:
            await self._register()
        wait_ms = min(self.poll_timeout_ms, POLL_SLICE_MS)
        reply = await self.transport.call({
            "cmd": "PULLB",
            "queue": self.queue,
            "count": min(free, self.batch_size),
            "timeout": wait_ms,
            "owner": self.worker_id,
            "lockTtl": self.lock_ttl_ms,
        }, timeout=wait_ms / 1000 + 10)
        jobs = reply.get("jobs") or []
        tokens = reply.get("tokens") or [None] * len(jobs)
        if not jobs:
            if self._busy and not self._active:
                self._busy = False
                self.emit("drained")
            return
        self._busy = True
        for raw, token in zip(jobs, tokens):
            self._active[str(raw.get("id"))] = token
            task = asyncio.ensure_future(self._run_job(raw, token))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _process(self, job: Any) -> Any:
        if self._coroutine:
            return await self.processor(job)
        result = await asyncio.get_running_loop().run_in_executor(self._threads, self.processor, job)
        if inspect.isawaitable(result):
            result = await result
        return result

    async def _run_job(self, raw: dict[str, Any], token: str | None) -> None:
        job = self._job_factory(raw, token)
        job_id = str(raw.get("id"))
        self.emit("active", job)
        try:
            result = await self._process(job)
        except Exception as exc:  # noqa: BLE001 - a processor's error fails its job, never the worker
            await self._fail(job, job_id, raw, token, exc)
            return
        if self._acks is not None:
            self._acks.add(job_id, token, result, lambda error: self._acked(job, job_id, result, error))
            return
        acked = await self._safe_call(compact({"cmd": "ACK", "id": job_id, "token": token, "result": result}))
        self._acked(job, job_id, result, None if acked else False)

    def _acked(self, job: Any, job_id: str, result: Any, error: BaseException | None | bool) -> None:
        self._finish(job_id)
        if error is None:
            self.processed += 1
            self.emit("completed", job, result)
        elif isinstance(error, BaseException):
            self.emit("error", error)

    async def _fail(self, job: Any, job_id: str, raw: dict[str, Any], token: str | None, exc: Exception) -> None:
        limit = raw.get("stackTraceLimit")
        limit = limit if isinstance(limit, int) and limit > 0 else MAX_STACK_LINES
        sent = await self._safe_call(compact({
            "cmd": "FAIL",
            "id": job_id,
            "error": str(exc) or type(exc).__name__,
            "token": token,
            "stack": stack_lines(exc, limit),
            "unrecoverable": True if isinstance(exc, UnrecoverableError) else None,
        }))
        self._finish(job_id)
        # Unsent, the job comes back after its lock expires: it has not failed yet.
        if sent:
            self.failed += 1
            self.emit("failed", job, exc)

    def _finish(self, job_id: str) -> None:
        self._active.pop(job_id, None)
        self._cancelled.pop(job_id, None)
        self._slot_free.set()

    # -- registration and heartbeats ------------------------------------------------------------------

    async def _register(self) -> None:
        if await self._safe_call({
            "cmd": "RegisterWorker",
            "name": self.name,
            "queues": [self.queue],
            "concurrency": self.concurrency,
            "workerId": self.worker_id,
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            "startedAt": int(time.time() * 1000),
        }):
            # Registration is state of the connection: a new connection gets it again.
            self._registered_generation = getattr(self.transport, "generation", 0)

    async def _heartbeats(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval_s)
            ids = list(self._active)
            await self._safe_call({"cmd": "Heartbeat", "id": self.worker_id, "activeJobs": len(ids),
                                   "processed": self.processed, "failed": self.failed})
            if ids:
                await self._safe_call({"cmd": "JobHeartbeatB", "ids": ids,
                                       "tokens": [self._active.get(i) for i in ids]})

    async def _safe_call(self, command: dict[str, Any], report: bool = True) -> bool:
        """Send a command; a failure becomes an ``error`` event. True when the server took it."""
        try:
            await self.transport.call(command)
            return True
        except (BunqueueError, OSError) as exc:
            if report:
                self.emit("error", exc)
            return False
