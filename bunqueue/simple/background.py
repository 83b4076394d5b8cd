"""What a simple-mode app does beside processing: priority aging of waiting jobs, and triggers that add a
job when another completes or fails."""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from bunqueue.errors import BunqueueError
from bunqueue.sdk.queue import Queue
from bunqueue.sdk.worker import Worker
from bunqueue.simple.policies import job_name
from bunqueue.simple.retry import option

log = logging.getLogger("bunqueue.client")

DEFAULT_AGING_INTERVAL_MS = 60000.0
DEFAULT_MIN_AGE_MS = 60000.0
DEFAULT_MAX_PRIORITY = 100
DEFAULT_MAX_SCAN = 100


class PriorityAger:
    """Every ``interval`` ms, raises by ``boost`` the priority of jobs waiting longer than ``min_age`` ms
    (up to ``max_priority``), looking at ``max_scan`` waiting and ``max_scan`` prioritized jobs."""

    def __init__(self, config: Mapping[str, Any], queue: Queue) -> None:
        self._config = config
        self._queue = queue
        self._timer: threading.Timer | None = None
        self._stopped = False

    def start(self) -> None:
        if self._stopped:
            return
        interval_ms = float(self._config.get("interval") or DEFAULT_AGING_INTERVAL_MS)
        self._timer = threading.Timer(interval_ms / 1000, self._tick)
        self._timer.daemon = True
        self._timer.start()

    def _tick(self) -> None:
        try:
            self.boost_old_jobs()
        except Exception:  # noqa: BLE001 - the next tick tries again
            log.warning("priority aging failed", exc_info=True)
        self.start()

    def boost_old_jobs(self) -> None:
        min_age = float(option(self._config, "min_age", "minAge") or DEFAULT_MIN_AGE_MS)
        boost = int(self._config.get("boost") or 1)
        top = int(option(self._config, "max_priority", "maxPriority") or DEFAULT_MAX_PRIORITY)
        scan = int(option(self._config, "max_scan", "maxScan") or DEFAULT_MAX_SCAN)
        jobs = self._queue.get_waiting(0, scan) + self._queue.get_jobs("prioritized", 0, scan)
        now = time.time() * 1000
        for job in jobs:
            if now - (job.created_at or now) >= min_age and job.priority < top:
                try:
                    self._queue.change_job_priority(job.id, min(job.priority + boost, top))
                except BunqueueError:  # started or gone meanwhile
                    pass

    def destroy(self) -> None:
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class TriggerManager:
    """Rules ``{on, create, data(result, job), event: "completed" | "failed", condition(result, job),
    opts}``: when a job named ``on`` ends with ``event`` (and ``condition`` holds), add a job named
    ``create`` with ``data(...)``."""

    def __init__(self, queue: Queue, worker: Worker) -> None:
        self._queue = queue
        self._worker = worker
        self._rules: list[Mapping[str, Any]] = []
        self._listening = False

    def add(self, rule: Mapping[str, Any]) -> None:
        self._rules.append(rule)
        if not self._listening:
            self._listening = True
            self._worker.on("completed", lambda job, result: self._fire("completed", job, result))
            self._worker.on("failed", lambda job, error: self._fire("failed", job, error))

    def _fire(self, event: str, job: Any, outcome: Any) -> None:
        name = job_name(job)
        for rule in self._rules:
            if rule["on"] != name or rule.get("event", "completed") != event:
                continue
            condition = rule.get("condition")
            if condition and not condition(outcome, job):
                continue
            try:
                self._queue.add(rule["create"], rule["data"](outcome, job), **(rule.get("opts") or {}))
            except BunqueueError:
                log.warning("trigger %r -> %r could not add its job", rule["on"], rule["create"], exc_info=True)
