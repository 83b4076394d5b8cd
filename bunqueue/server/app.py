"""The running server: listeners, the broker's timers, graceful shutdown."""
from __future__ import annotations

import asyncio
import logging
import time

from bunqueue.backup.config import BackupConfig
from bunqueue.backup.manager import BackupManager
from bunqueue.broker import states
from bunqueue.broker.clock import now_ms
from bunqueue.broker.facade import Broker
from bunqueue.broker.recovery import restore
from bunqueue.config import Settings
from bunqueue.monitoring import alerts
from bunqueue.monitoring.alerts import ThresholdAlerts
from bunqueue.server.runner import CommandRunner
from bunqueue.server.scheduler import DeadlineScheduler
from bunqueue.server.serving import Serving, tune_collector
from bunqueue.storage import MemoryStore, Store
from bunqueue.storage.bunimport import open_for_start
from bunqueue.storage.sqlite import SQLiteStore
from bunqueue.webhooks.delivery import DRAIN_LIMIT_MS, WebhookDelivery

log = logging.getLogger("bunqueue")


def _open_store(settings: Settings) -> Store:
    """The store the settings select; one this build lacks is an error, never a silent memory store."""
    if settings.storage == "sqlite" and settings.data_path:
        return SQLiteStore(settings.data_path, settings.sqlite_synchronous)
    if settings.storage == "memory":
        return MemoryStore()
    raise ValueError(f"no {settings.storage} store in this build")


async def open_server(settings: Settings) -> Serving:
    """The server the settings select, its engine opened; ``start`` it to listen."""
    if settings.storage == "postgres":
        from bunqueue.server.postgres import PostgresServer

        return await PostgresServer.open(settings)
    return BrokerServer(settings)


class BrokerServer(Serving):
    """The memory and SQLite server: the in-memory engine, its store, timers, backups and webhooks."""

    def __init__(self, settings: Settings) -> None:
        store = _open_store(settings)
        self.store = store
        self.broker = Broker(max_completed_jobs=settings.max_completed_jobs, store=store)
        self.broker.workers.timeout_ms = settings.worker_timeout_ms
        self.broker.retention.age_ms = settings.completed_retention_ms
        self.broker.counters.max_prometheus_queues = settings.metrics_max_queues
        super().__init__(settings, CommandRunner(self.broker, store, settings.tokens), self.broker.events)
        hooks = self.broker.events.webhooks
        hooks.allow_private = settings.webhook_allow_private
        hooks.outbox_limit = settings.webhook_queue_size
        self.webhook_delivery = WebhookDelivery(
            hooks,
            timeout_ms=settings.webhook_timeout_ms,
            max_attempts=settings.webhook_max_retries,
            retry_delay_ms=settings.webhook_retry_delay_ms,
            concurrency=settings.webhook_concurrency,
        )
        self.backups: BackupManager | None = None
        if isinstance(store, SQLiteStore):
            self.backups = BackupManager(BackupConfig.from_settings(settings), store, self.broker.events)
            self.broker.counters.backup_metrics = self.backups.telemetry.snapshot
        # One loop timer per kind of broker deadline (leases, timeouts, stalls, workers, rate limits, DLQ).
        self.deadlines: DeadlineScheduler | None = None
        self.alerts = ThresholdAlerts(self.broker, settings)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        tune_collector()
        self.handle_signals(loop)
        self.recover(loop)
        self.deadlines = DeadlineScheduler(loop, self.broker.deadline_handlers())
        self.broker.wake_at = self.deadlines.arm
        for kind, due in self.broker.pending_deadlines():
            self.deadlines.arm(kind, due)
        if self.backups is not None:
            self.backups.start(loop)
        self.repeat("alerts", alerts.CHECK_INTERVAL_S, lambda: self.alerts.run(now_ms()))
        if self.settings.stats_interval_ms > 0:
            self.repeat("stats", self.settings.stats_interval_ms / 1000, self.log_stats)
        await self.listen()

    def log_stats(self) -> None:
        alerts.stats_log.info(alerts.stats_line(self.broker, len(self.connections)))

    def recover(self, loop: asyncio.AbstractEventLoop) -> None:
        """Read what the store kept and put every job back before the port opens."""
        started = time.perf_counter()
        if isinstance(self.store, SQLiteStore):
            # Before the store creates its tables: a file of the Bun original is converted first.
            open_for_start(self.store.path)
        snapshot = self.store.open(states.COMPLETED, self.settings.max_completed_jobs)
        self.store.start(loop)
        if snapshot is None:
            return
        counts = restore(self.broker, snapshot)
        kinds = ", ".join(f"{n} {name}" for name, n in counts.items() if n)
        log.info(
            "recovered %d jobs from %s in %.2f s%s",
            len(snapshot.jobs), self.settings.data_path, time.perf_counter() - started, f" ({kinds})" if kinds else "",
        )

    async def shutdown(self) -> None:
        """Stop accepting, let workers finish their active jobs (bounded), then close every connection."""
        self.stop_accepting()
        deadline = now_ms() + self.settings.shutdown_timeout_ms
        while self.broker.active_count and self.connections and now_ms() < deadline:
            await asyncio.sleep(0.1)
        self.broker.stopping = True
        await self.close_listeners()
        if self.deadlines is not None:
            self.deadlines.cancel()
        if self.backups is not None:
            await self.backups.stop()
        await self.webhook_delivery.close(min(DRAIN_LIMIT_MS, max(0.0, deadline - now_ms())))
        await self.store.close()
