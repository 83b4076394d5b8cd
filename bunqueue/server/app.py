"""The running server: listeners, the broker's timers, graceful shutdown."""
from __future__ import annotations

import asyncio
import gc
import logging
import signal
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from bunqueue._core.packer import ReplyPacker
from bunqueue.backup.config import BackupConfig
from bunqueue.backup.manager import BackupManager
from bunqueue.broker import states
from bunqueue.broker.clock import now_ms
from bunqueue.broker.components import eventnames
from bunqueue.broker.facade import Broker
from bunqueue.broker.recovery import restore
from bunqueue.config import Settings
from bunqueue.monitoring import alerts
from bunqueue.monitoring.alerts import ThresholdAlerts
from bunqueue.server.runner import CommandRunner
from bunqueue.server.scheduler import DeadlineScheduler
from bunqueue.server.tcp import BrokerProtocol
from bunqueue.server.tls import server_context
from bunqueue.storage import MemoryStore, Store
from bunqueue.storage.bunimport import open_for_start
from bunqueue.storage.sqlite import SQLiteStore
from bunqueue.webhooks.delivery import DRAIN_LIMIT_MS, WebhookDelivery

if TYPE_CHECKING:
    from bunqueue.server.http.listener import HttpListener

log = logging.getLogger("bunqueue")


def tune_collector() -> None:
    """Collect young objects every 50,000 allocations instead of every 700.

    A busy broker allocates a few containers per job and keeps hundreds of thousands of them alive, but
    makes no reference cycles of its own: at the default rate the cyclic collector spends much of the
    push path re-scanning queued jobs. Objects alive at start-up are frozen out of collection entirely.
    """
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


def _open_store(settings: Settings) -> Store:
    """The store the settings select; one this build lacks is an error, never a silent memory store."""
    if settings.storage == "sqlite" and settings.data_path:
        return SQLiteStore(settings.data_path, settings.sqlite_synchronous)
    if settings.storage == "memory":
        return MemoryStore()
    if settings.storage == "postgres":
        # Never served: start() checks the PostgreSQL server and schema, then stops (refuse_postgres).
        return MemoryStore()
    raise ValueError(f"no {settings.storage} store in this build")


class BrokerServer:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.store = _open_store(settings)
        self.broker = Broker(max_completed_jobs=settings.max_completed_jobs, store=self.store)
        self.broker.workers.timeout_ms = settings.worker_timeout_ms
        self.broker.retention.age_ms = settings.completed_retention_ms
        self.broker.counters.max_prometheus_queues = settings.metrics_max_queues
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
        if isinstance(self.store, SQLiteStore):
            self.backups = BackupManager(BackupConfig.from_settings(settings), self.store, self.broker.events)
            self.broker.counters.backup_metrics = self.backups.telemetry.snapshot
        self.runner = CommandRunner(self.broker, self.store, settings.tokens)
        self.connections: set[BrokerProtocol] = set()
        # One packer for every connection: packing is synchronous, so they never interleave.
        self.packer = ReplyPacker()
        self.tcp_server: asyncio.base_events.Server | None = None
        self.http: HttpListener | None = None
        # One loop timer per kind of broker deadline (leases, timeouts, stalls, workers, rate limits, DLQ).
        self.deadlines: DeadlineScheduler | None = None
        self.stopping: asyncio.Event | None = None
        self.alerts = ThresholdAlerts(self.broker, settings)
        # The periodic checks and the statistics line: their next run, by name.
        self.periodic: dict[str, asyncio.TimerHandle] = {}

    async def start(self) -> None:
        if self.settings.storage == "postgres":
            await self.refuse_postgres()
        loop = asyncio.get_running_loop()
        tune_collector()
        self.stopping = asyncio.Event()
        # Signals are handled before the port opens: whoever sees the port may stop the server at once.
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop, sig)
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
        tls = self.settings.tls_files
        ssl_context = server_context(*tls) if tls else None
        # HTTP first: a client that sees the TCP port open may use the HTTP port at once.
        if self.settings.http_port:
            from bunqueue.server.http.listener import HttpListener

            self.http = HttpListener(self.settings, self.runner, lambda: len(self.connections))
            await self.http.start(ssl_context)
        self.tcp_server = await loop.create_server(
            self.new_connection,
            self.settings.host,
            self.settings.tcp_port,
            reuse_address=True,
            backlog=1024,
            ssl=ssl_context,
        )

    async def refuse_postgres(self) -> None:
        """The PostgreSQL mode's checks (server reachable, schema migrated), then the stop until its engine lands."""
        from bunqueue.storage.postgres.errors import ENGINE_UNAVAILABLE, StartupFailed
        from bunqueue.storage.postgres.pool import PostgresConfig
        from bunqueue.storage.postgres.startup import prepare_database

        await prepare_database(PostgresConfig.from_settings(self.settings))
        raise StartupFailed(ENGINE_UNAVAILABLE)

    def repeat(self, name: str, seconds: float, action: Callable[[], None]) -> None:
        """Run ``action`` every ``seconds`` until shutdown; a failure is logged and the next run still comes."""
        loop = asyncio.get_running_loop()

        def tick() -> None:
            self.periodic[name] = loop.call_later(seconds, tick)
            try:
                action()
            except Exception:
                log.exception("the periodic %s run failed", name)

        self.periodic[name] = loop.call_later(seconds, tick)

    def log_stats(self) -> None:
        alerts.stats_log.info(alerts.stats_line(self.broker, len(self.connections)))

    def new_connection(self) -> BrokerProtocol:
        return BrokerProtocol(self.runner, self.settings, self.packer, self.connections)

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
        log.info(
            "recovered %d jobs from %s in %.2f s (%s)",
            len(snapshot.jobs), self.settings.data_path, time.perf_counter() - started,
            ", ".join(f"{n} {name}" for name, n in counts.items() if n),
        )

    @property
    def tcp_address(self) -> tuple[str, int]:
        assert self.tcp_server is not None
        host, port = self.tcp_server.sockets[0].getsockname()[:2]
        return host, port

    def request_stop(self, sig: signal.Signals | None = None) -> None:
        if self.stopping is None:
            return
        # A signal's stop is told to the open streams (server:shutdown), once, as the original tells it.
        if sig is not None and not self.stopping.is_set() and self.broker.events.notices:
            self.broker.events.notify(eventnames.SERVER_SHUTDOWN, {"signal": sig.name})
        self.stopping.set()

    async def serve_until_stopped(self) -> None:
        assert self.stopping is not None
        await self.stopping.wait()
        log.info("shutting down")
        await self.shutdown()

    async def shutdown(self) -> None:
        """Stop accepting, let workers finish their active jobs (bounded), then close every connection."""
        if self.tcp_server is not None:
            self.tcp_server.close()
        deadline = now_ms() + self.settings.shutdown_timeout_ms
        while self.broker.active_count and self.connections and now_ms() < deadline:
            await asyncio.sleep(0.1)
        self.broker.stopping = True
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.close()
        if self.tcp_server is not None:
            await self.tcp_server.wait_closed()
        if self.http is not None:
            await self.http.close()
        if self.deadlines is not None:
            self.deadlines.cancel()
        for handle in self.periodic.values():
            handle.cancel()
        if self.backups is not None:
            await self.backups.stop()
        await self.webhook_delivery.close(min(DRAIN_LIMIT_MS, max(0.0, deadline - now_ms())))
        await self.store.close()
