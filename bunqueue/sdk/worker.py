"""The synchronous Worker: the asyncio Worker on the client's background loop, running a plain function
on ``concurrency`` threads; listeners are called on a thread of their own."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from bunqueue.asyncio import worker as aio
from bunqueue.client.connectionoptions import DEFAULT_PORT, TlsOption
from bunqueue.sdk.blocking import Bridged, ThreadedEmitter, run
from bunqueue.sdk.job import Job
from bunqueue.sdk.sharedconnection import Connection
from bunqueue.sdk.telemetry import TelemetryHandler

Processor = Callable[[Job], Any]
R = TypeVar("R")


async def _on_loop(fn: Callable[..., R], *args: Any) -> R:
    return fn(*args)


class _Bridged(Bridged, aio.Worker):
    """The asyncio Worker, whose events go to the synchronous one's listeners, with synchronous Jobs."""

    _job_type = Job


class Worker(ThreadedEmitter):
    """Consumes one queue. With ``autorun=True`` (the default) it starts in the background at once;
    ``run()`` blocks until ``close()``."""

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
        on_telemetry: TelemetryHandler | None = None,
        embedded: bool = False,
        data_path: str | None = None,
    ) -> None:
        super().__init__()
        self._aio = _Bridged(
            queue, processor, host=host, port=port, token=token, tls=tls, concurrency=concurrency,
            batch_size=batch_size, poll_timeout_ms=poll_timeout_ms, lock_ttl_ms=lock_ttl_ms,
            heartbeat_interval_s=heartbeat_interval_s, autorun=False, name=name, ack_batch=ack_batch,
            on_telemetry=on_telemetry, embedded=embedded, data_path=data_path,
        )
        self._aio.outer = self
        self.queue = self._aio.queue
        self.processor = processor
        self.concurrency = self._aio.concurrency
        self.batch_size = self._aio.batch_size
        self.poll_timeout_ms = self._aio.poll_timeout_ms
        self.lock_ttl_ms = lock_ttl_ms
        self.heartbeat_interval_s = heartbeat_interval_s
        self.worker_id = self._aio.worker_id
        self.name = self._aio.name
        self.connection = Connection.over(self._aio.transport)
        if autorun:
            self.start()

    def on(self, event: str, listener: Callable[..., Any]) -> Worker:
        """As EventEmitter.on; a ``ready`` listener added after the worker is ready is called at once."""
        if event == "ready" and self._aio._ready.is_set():
            self._dispatch(event, listener, ())
        super().on(event, listener)
        return self

    async def _start(self) -> None:
        self._aio.start()

    def start(self) -> None:
        """Run the worker in the background."""
        run(self._start())

    def run(self) -> None:
        """Block until the worker is closed (starting it if needed)."""
        run(self._aio.run())

    # The asyncio Worker's state belongs to the loop thread: changes are made there, and are in effect
    # when these return (a processor's thread may pause its own worker, as a circuit breaker does).
    def pause(self) -> None:
        run(_on_loop(self._aio.pause))

    def resume(self) -> None:
        run(_on_loop(self._aio.resume))

    def is_running(self) -> bool:
        return self._aio.is_running()

    def is_paused(self) -> bool:
        return self._aio.is_paused()

    def is_closed(self) -> bool:
        return self._aio.is_closed()

    def wait_until_ready(self, timeout: float = 10.0) -> None:
        try:
            run(self._aio.wait_until_ready(timeout))
        except TimeoutError:
            raise TimeoutError("worker did not become ready in time") from None

    def close(self, timeout: float | None = None) -> bool:
        """Stop pulling, finish the jobs in hand and deliver their events. False when ``timeout`` ran out
        first (the worker goes on closing)."""
        done = run(self._aio.close(timeout))
        if done:
            self._settle_listeners()
        return done

    stop = close

    def cancel_job(self, job_id: str, reason: str | None = None) -> bool:
        return run(_on_loop(self._aio.cancel_job, job_id, reason))

    def cancel_all_jobs(self, reason: str | None = None) -> None:
        run(_on_loop(self._aio.cancel_all_jobs, reason))

    def is_job_cancelled(self, job_id: str) -> bool:
        return self._aio.is_job_cancelled(job_id)

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
