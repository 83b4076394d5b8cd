"""The server's backups: the schedule (the first a minute after start, then every ``S3_BACKUP_INTERVAL``),
one backup at a time, its events and the counters behind the ``bunqueue_backup_*`` metrics.

The snapshot and the upload run on a thread: the loop only waits for pending writes to commit first, so the
backup holds everything acknowledged before it began.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from bunqueue.backup import s3
from bunqueue.backup.config import BackupConfig

if TYPE_CHECKING:
    from bunqueue.broker.components.eventhub import EventHub
    from bunqueue.storage.sqlite import SQLiteStore

log = logging.getLogger("bunqueue.backup")

FIRST_BACKUP_AFTER_S = 60.0
STARTED = "storage:backup-started"
COMPLETED = "storage:backup-completed"
FAILED = "storage:backup-failed"


class BackupTelemetry:
    """The original's backup counters, by their Prometheus names."""

    def __init__(self, enabled: bool, interval_ms: int, retention: int) -> None:
        self.values: dict[str, float] = {
            "bunqueue_backup_enabled": float(enabled),
            "bunqueue_backup_scheduler_running": 0.0,
            "bunqueue_backup_in_progress": 0.0,
            "bunqueue_backup_interval_seconds": interval_ms / 1000,
            "bunqueue_backup_retention": float(retention),
            "bunqueue_backup_attempts_total": 0.0,
            "bunqueue_backup_successes_total": 0.0,
            "bunqueue_backup_failures_total": 0.0,
            "bunqueue_backup_overlap_rejections_total": 0.0,
            "bunqueue_backup_consecutive_failures": 0.0,
            "bunqueue_backup_last_success_timestamp_seconds": 0.0,
            "bunqueue_backup_last_failure_timestamp_seconds": 0.0,
            "bunqueue_backup_last_duration_seconds": 0.0,
            "bunqueue_backup_last_size_bytes": 0.0,
        }

    def try_start(self) -> bool:
        v = self.values
        if v["bunqueue_backup_in_progress"]:
            v["bunqueue_backup_overlap_rejections_total"] += 1
            return False
        v["bunqueue_backup_in_progress"] = 1.0
        v["bunqueue_backup_attempts_total"] += 1
        return True

    def succeeded(self, result: s3.BackupResult, seconds: float) -> None:
        v = self._finish(seconds)
        v["bunqueue_backup_successes_total"] += 1
        v["bunqueue_backup_consecutive_failures"] = 0.0
        v["bunqueue_backup_last_success_timestamp_seconds"] = time.time()
        v["bunqueue_backup_last_size_bytes"] = float(result.compressed_size or result.size)

    def failed(self, seconds: float) -> None:
        v = self._finish(seconds)
        v["bunqueue_backup_failures_total"] += 1
        v["bunqueue_backup_consecutive_failures"] += 1
        v["bunqueue_backup_last_failure_timestamp_seconds"] = time.time()

    def _finish(self, seconds: float) -> dict[str, float]:
        v = self.values
        v["bunqueue_backup_in_progress"] = 0.0
        v["bunqueue_backup_last_duration_seconds"] = max(seconds, 0.0)
        return v

    def snapshot(self) -> dict[str, float]:
        return dict(self.values)


class BackupManager:
    def __init__(self, config: BackupConfig, store: SQLiteStore, events: EventHub) -> None:
        self.config = config
        self.store = store
        self.events = events
        self.telemetry = BackupTelemetry(config.enabled, config.interval_ms, config.retention)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.running: set[asyncio.Task[Any]] = set()

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Schedule backups when they are on and their settings are complete."""
        if not self.config.enabled:
            return
        problems = self.config.errors()
        if problems:
            log.error("S3 backup configuration invalid: %s", "; ".join(problems))
            return
        self.loop = loop
        self.timer = loop.call_later(FIRST_BACKUP_AFTER_S, self._due)
        self.telemetry.values["bunqueue_backup_scheduler_running"] = 1.0

    def _due(self) -> None:
        assert self.loop is not None
        self.timer = self.loop.call_later(self.config.interval_ms / 1000, self._due)
        task = self.loop.create_task(self._scheduled())
        self.running.add(task)
        task.add_done_callback(self.running.discard)

    async def _scheduled(self) -> None:
        try:
            await self.backup()
        except Exception as exc:  # noqa: BLE001 - logged here: a scheduled backup has no one to answer
            log.error("Scheduled backup failed: %s", exc)

    async def stop(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.telemetry.values["bunqueue_backup_scheduler_running"] = 0.0
        if self.running:
            await asyncio.gather(*self.running, return_exceptions=True)

    async def backup(self) -> s3.BackupResult | None:
        """One backup now; None when another is still running."""
        if not self.telemetry.try_start():
            return None
        started = time.monotonic()
        bucket = self.config.bucket
        self.events.notify(STARTED, {"bucket": bucket})
        try:
            await self.store.committed()
            result = await asyncio.to_thread(self._publish)
        except Exception as exc:
            self.telemetry.failed(time.monotonic() - started)
            log.error("Backup failed: %s", exc)
            self.events.notify(FAILED, {"bucket": bucket, "error": str(exc)})
            raise
        self.telemetry.succeeded(result, time.monotonic() - started)
        log.info("backup %s written (%d bytes, %d ms)", result.key, result.size, result.duration_ms)
        self.events.notify(COMPLETED, {"bucket": bucket, "key": result.key})
        return result

    def _publish(self) -> s3.BackupResult:
        client = s3.client(self.config)
        result = s3.perform_backup(self.config, client)
        try:
            s3.cleanup_old_backups(self.config, client)
        except Exception as exc:  # noqa: BLE001 - the backup itself succeeded; old ones go next time
            log.error("Backup cleanup failed: %s", exc)
        return result
