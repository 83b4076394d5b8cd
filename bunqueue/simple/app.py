"""Bunqueue: the SDK's simple mode, a Queue and a Worker of one queue in one object, with routes,
middleware, batches, in-process retries, a circuit breaker, job TTLs, priority aging, cancellation,
deduplication/debounce defaults, a start-rate limit, triggers and schedulers.

Each job goes through: rate gate -> circuit breaker -> TTL -> cancel signal -> retry -> middleware ->
processor, as in the TS client's Bunqueue.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from bunqueue.client.connectionoptions import DEFAULT_PORT
from bunqueue.sdk.job import Job
from bunqueue.sdk.queue import Queue
from bunqueue.sdk.worker import Worker
from bunqueue.simple.background import PriorityAger, TriggerManager
from bunqueue.simple.batch import BatchAccumulator
from bunqueue.simple.cancellation import CancellationManager, CancelSignal
from bunqueue.simple.circuit_breaker import CLOSED, WorkerCircuitBreaker
from bunqueue.simple.policies import DedupDebounceMerger, RateGate, TtlChecker, job_name
from bunqueue.simple.retry import execute_with_retry

Processor = Callable[[Job], Any]
Middleware = Callable[[Job, Callable[[], Any]], Any]

MODES = ("processor", "routes", "batch")
#: Every option ``Bunqueue`` takes (the SDK's, and ``embedded``/``data_path`` for a broker in this process).
OPTIONS = frozenset({
    *MODES, "retry", "ttl", "deduplication", "debounce", "default_job_options", "host", "port", "token", "tls",
    "concurrency", "batch_size", "poll_timeout_ms", "heartbeat_interval_s", "autorun", "dlq", "rate_limit",
    "limiter", "circuit_breaker", "priority_aging", "embedded", "data_path",
})


def _checked(opts: Mapping[str, Any]) -> None:
    unknown = sorted(set(opts) - OPTIONS)
    if unknown:
        raise TypeError(f"Bunqueue got unknown option(s): {', '.join(unknown)}")
    modes = [mode for mode in MODES if opts.get(mode)]
    if not modes:
        raise ValueError('Bunqueue requires "processor", "routes", or "batch"')
    if len(modes) > 1:
        raise ValueError('Bunqueue: use only one of "processor", "routes", or "batch"')


class Bunqueue:
    """``Bunqueue(name, processor=fn | routes={name: fn} | batch={size, timeout, processor}, **options)``;
    the worker starts at once unless ``autorun=False``. ``queue`` and ``worker`` are the objects inside."""

    def __init__(self, name: str, **opts: Any) -> None:
        _checked(opts)
        self.name = name
        self._middlewares: list[Middleware] = []
        self._retry: Mapping[str, Any] | None = opts.get("retry")
        self._ttl = TtlChecker(opts["ttl"]) if opts.get("ttl") else None
        self._merger = DedupDebounceMerger(opts.get("deduplication"), opts.get("debounce"))
        self._cancellation = CancellationManager()
        self._default_job_options: dict[str, Any] = dict(opts.get("default_job_options") or {})
        self._batch = BatchAccumulator(opts["batch"]) if opts.get("batch") else None
        self._base: Processor
        if self._batch is not None:
            self._base = self._batch.build_processor()
        elif opts.get("routes"):
            self._base = self._route(dict(opts["routes"]))
        else:
            self._base = opts["processor"]
        where: dict[str, Any] = {
            "host": opts.get("host", "localhost"), "port": opts.get("port", DEFAULT_PORT),
            "token": opts.get("token"), "tls": opts.get("tls"),
        }
        local: dict[str, Any] = {"embedded": bool(opts.get("embedded")), "data_path": opts.get("data_path")}
        self.queue = Queue(name, **where, **local)
        self.worker = Worker(
            name, self._process_job, **where, **local,
            concurrency=opts.get("concurrency", 4), batch_size=opts.get("batch_size", 10),
            poll_timeout_ms=opts.get("poll_timeout_ms", 5000),
            heartbeat_interval_s=opts.get("heartbeat_interval_s", 10.0), autorun=opts.get("autorun", True),
        )
        if opts.get("dlq"):
            self.queue.set_dlq_config(opts["dlq"])
        limiter = opts.get("rate_limit") or opts.get("limiter")
        self._rate_gate = RateGate(limiter) if limiter else None
        self._breaker = WorkerCircuitBreaker(opts["circuit_breaker"], self.worker) if opts.get("circuit_breaker") \
            else None
        self._triggers = TriggerManager(self.queue, self.worker)
        self._ager = PriorityAger(opts["priority_aging"], self.queue) if opts.get("priority_aging") else None
        if self._ager is not None:
            self._ager.start()

    # -- processing -----------------------------------------------------------------------------------

    def _route(self, routes: dict[str, Processor]) -> Processor:
        def by_name(job: Job) -> Any:
            name = job_name(job)
            handler = routes.get(name or "")
            if handler is None:
                raise ValueError(f'No route for job "{name}" in queue "{self.name}"')
            return handler(job)

        return by_name

    def _process_job(self, job: Job) -> Any:
        if self._rate_gate is not None:
            self._rate_gate.acquire(self._rate_gate.group_for(job.data))
        if self._breaker is not None and self._breaker.is_open():
            raise RuntimeError("Circuit breaker is open")
        created = job.created_at or 0
        if self._ttl is not None and self._ttl.is_expired(job_name(job) or "", created):
            raise RuntimeError(f"Job expired (age: {int(time.time() * 1000 - created)}ms)")
        signal = self._cancellation.register(job.id)
        try:
            if self._retry:
                result = execute_with_retry(lambda: self._through_middleware(job, signal), self._retry)
            else:
                result = self._through_middleware(job, signal)
        except Exception:
            if self._breaker is not None:
                self._breaker.on_failure()
            raise
        finally:
            self._cancellation.unregister(job.id)
        if self._breaker is not None:
            self._breaker.on_success()
        return result

    def _through_middleware(self, job: Job, signal: CancelSignal) -> Any:
        chain = list(self._middlewares)

        def step(index: int) -> Any:
            if index == len(chain):
                return self._base(job)
            return chain[index](job, lambda: next_step(index + 1))

        def next_step(index: int) -> Any:
            if signal.aborted:
                raise RuntimeError("Job cancelled")
            return step(index)

        return next_step(0) if chain else self._base(job)

    # -- producing ------------------------------------------------------------------------------------

    def use(self, middleware: Middleware) -> Bunqueue:
        """Add ``middleware(job, next)``: it runs the rest of the chain (and the processor) with
        ``next()``."""
        self._middlewares.append(middleware)
        return self

    def add(self, name: str, data: Any = None, **opts: Any) -> Job:
        merged = self._merger.merge(name, {**self._default_job_options, **opts}, data)
        return self.queue.add(name, data, **merged)

    def add_bulk(self, jobs: list[dict[str, Any]]) -> list[str]:
        entries = []
        for entry in jobs:
            opts = {k: v for k, v in entry.items() if k not in ("name", "data")}
            merged = self._merger.merge(entry["name"], {**self._default_job_options, **opts}, entry.get("data"))
            entries.append({"name": entry["name"], "data": entry.get("data"), **merged})
        return self.queue.add_bulk(entries)

    def get_job(self, job_id: str) -> Job | None:
        return self.queue.get_job(job_id)

    def get_job_counts(self) -> dict[str, int]:
        return self.queue.get_job_counts()

    def count(self) -> int:
        return self.queue.count()

    # -- schedulers -----------------------------------------------------------------------------------

    def cron(self, scheduler_id: str, pattern: str, data: Any = None, **opts: Any) -> None:
        """A scheduler of jobs named ``scheduler_id``; ``opts``: ``timezone``, ``limit``, ``job_opts``."""
        repeat = {"pattern": pattern, "tz": opts.get("timezone"), "limit": opts.get("limit")}
        self.queue.upsert_job_scheduler(scheduler_id, repeat, self._template(scheduler_id, data, opts))

    def every(self, scheduler_id: str, interval_ms: int, data: Any = None, **opts: Any) -> None:
        """A job every ``interval_ms``; ``opts``: ``limit``, ``job_opts``."""
        repeat = {"every": interval_ms, "limit": opts.get("limit")}
        self.queue.upsert_job_scheduler(scheduler_id, repeat, self._template(scheduler_id, data, opts))

    @staticmethod
    def _template(scheduler_id: str, data: Any, opts: Mapping[str, Any]) -> dict[str, Any]:
        return {"name": scheduler_id, "data": data, "opts": opts.get("job_opts")}

    def remove_cron(self, scheduler_id: str) -> None:
        self.queue.remove_job_scheduler(scheduler_id)

    def list_crons(self) -> list[dict[str, Any]]:
        return self.queue.get_job_schedulers()

    # -- cancellation, circuit, triggers, TTLs --------------------------------------------------------

    def cancel(self, job_id: str, grace_period_ms: float = 0) -> None:
        """Abort the signal of a job this app is running (``get_signal(job_id).aborted``)."""
        self._cancellation.cancel(job_id, grace_period_ms)

    def is_cancelled(self, job_id: str) -> bool:
        return self._cancellation.is_cancelled(job_id)

    def get_signal(self, job_id: str) -> CancelSignal | None:
        return self._cancellation.get_signal(job_id)

    def get_circuit_state(self) -> str:
        return self._breaker.current_state if self._breaker is not None else CLOSED

    def reset_circuit(self) -> None:
        if self._breaker is not None:
            self._breaker.reset()

    def trigger(self, rule: dict[str, Any]) -> Bunqueue:
        self._triggers.add(rule)
        return self

    def set_default_ttl(self, ttl_ms: float) -> None:
        if self._ttl is not None:
            self._ttl.set_default_ttl(ttl_ms)

    def set_name_ttl(self, name: str, ttl_ms: float) -> None:
        if self._ttl is not None:
            self._ttl.set_name_ttl(name, ttl_ms)

    # -- events and control ---------------------------------------------------------------------------

    def on(self, event: str, listener: Callable[..., None]) -> Bunqueue:
        self.worker.on(event, listener)
        return self

    def once(self, event: str, listener: Callable[..., None]) -> Bunqueue:
        self.worker.once(event, listener)
        return self

    def off(self, event: str, listener: Callable[..., None]) -> Bunqueue:
        self.worker.off(event, listener)
        return self

    def pause(self) -> None:
        self.queue.pause()
        self.worker.pause()

    def resume(self) -> None:
        self.queue.resume()
        self.worker.resume()

    def close(self, force: bool = False) -> None:
        """Stop everything; the jobs in hand finish first unless ``force``."""
        if self._ager is not None:
            self._ager.destroy()
        if self._breaker is not None:
            self._breaker.destroy()
        if self._batch is not None:
            self._batch.destroy()
        self._cancellation.destroy_all()
        self.worker.close(timeout=0 if force else None)
        self.queue.close()

    def is_running(self) -> bool:
        return self.worker.is_running()

    def is_paused(self) -> bool:
        return self.worker.is_paused()

    def is_closed(self) -> bool:
        return self.worker.is_closed()
