"""Batch mode: jobs are collected until ``size`` of them (or ``timeout`` ms after the first) and handed to
``processor(jobs)`` together; its list of results gives each job its own. Each job's slot waits for its
batch, so a worker needs ``concurrency >= size`` for full batches, as in the TS client."""
from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

DEFAULT_BATCH_TIMEOUT_MS = 5000.0

BatchProcessor = Callable[[list[Any]], Any]


class _Waiting:
    __slots__ = ("done", "error", "job", "result")

    def __init__(self, job: Any) -> None:
        self.job = job
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None


class BatchAccumulator:
    def __init__(self, config: Mapping[str, Any]) -> None:
        self._size = int(config["size"])
        self._timeout_s = float(config.get("timeout") or DEFAULT_BATCH_TIMEOUT_MS) / 1000
        self._processor: BatchProcessor = config["processor"]
        self._lock = threading.Lock()
        self._pending: list[_Waiting] = []
        self._timer: threading.Timer | None = None

    def build_processor(self) -> Callable[[Any], Any]:
        """The per-job processor: adds the job to the open batch and waits for that batch's outcome."""

        def process(job: Any) -> Any:
            waiting = _Waiting(job)
            with self._lock:
                self._pending.append(waiting)
                if len(self._pending) >= self._size:
                    self._dispatch_locked()
                elif self._timer is None:
                    self._timer = threading.Timer(self._timeout_s, self.flush)
                    self._timer.daemon = True
                    self._timer.start()
            waiting.done.wait()
            if waiting.error is not None:
                raise waiting.error
            return waiting.result

        return process

    def flush(self) -> None:
        with self._lock:
            self._dispatch_locked()

    def _dispatch_locked(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending = self._pending, []
        if batch:
            # The batch runs on a thread of its own: the job thread that filled it holds the lock here.
            threading.Thread(target=self._run, args=(batch,), daemon=True).start()

    def _run(self, batch: list[_Waiting]) -> None:
        try:
            results = self._processor([w.job for w in batch])
        except Exception as error:  # noqa: BLE001 - the whole batch fails with its processor's error
            for waiting in batch:
                waiting.error = error
                waiting.done.set()
            return
        results = list(results or [])
        for index, waiting in enumerate(batch):
            waiting.result = results[index] if index < len(results) else None
            waiting.done.set()

    def destroy(self) -> None:
        """Stop the timer and hand the jobs collected so far to the processor."""
        self.flush()
