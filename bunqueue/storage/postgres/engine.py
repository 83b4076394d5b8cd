"""``PostgresEngine``: the engine of a broker in PostgreSQL mode, one mixin per command family.

PostgreSQL is the authority: every family answers from the database (``ops/``), and what a broker keeps in
memory (its listeners, its counters) is its own. The job family is ``PostgresJobs`` over the hot path; the
other families' methods are coroutines named as ``Engine``'s, which the server's handlers reach through
``BlockingEngine`` (see ``dispatch``). The engine's timers (lease expiry, ...) run as tasks from ``start``
to ``close``.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from bunqueue.broker.clock import now_ms
from bunqueue.broker.components.eventhub import EventHub
from bunqueue.broker.session import Session
from bunqueue.config import Settings
from bunqueue.monitoring.counters import Counters
from bunqueue.storage.postgres.broadcast import Broadcast
from bunqueue.storage.postgres.figures import FigureReader
from bunqueue.storage.postgres.hotpath import HotPath
from bunqueue.storage.postgres.jobevents import JobEvents
from bunqueue.storage.postgres.jobfamily import PostgresJobs
from bunqueue.storage.postgres.ops.cleanup import CleanupFamily
from bunqueue.storage.postgres.ops.cron import CRON_SWEEP_S, CronFamily
from bunqueue.storage.postgres.ops.dedup import DedupFamily
from bunqueue.storage.postgres.ops.dlq import DlqFamily
from bunqueue.storage.postgres.ops.events import EventsFamily
from bunqueue.storage.postgres.ops.flows import FlowFamily
from bunqueue.storage.postgres.ops.groups import GroupsFamily
from bunqueue.storage.postgres.ops.jobcontrol import JobControlFamily
from bunqueue.storage.postgres.ops.limits import LimitsFamily
from bunqueue.storage.postgres.ops.listing import ListingFamily
from bunqueue.storage.postgres.ops.local import LocalFamily
from bunqueue.storage.postgres.ops.locks import LocksFamily
from bunqueue.storage.postgres.ops.logs import LogsFamily
from bunqueue.storage.postgres.ops.monitoring import MonitoringFamily
from bunqueue.storage.postgres.ops.queries import QueriesFamily
from bunqueue.storage.postgres.ops.queuecontrol import QueueControlFamily
from bunqueue.storage.postgres.ops.stalls import StallsFamily
from bunqueue.storage.postgres.ops.system import SystemFamily
from bunqueue.storage.postgres.ops.webhooks import WEBHOOK_REFRESH_S, WebhooksFamily
from bunqueue.storage.postgres.ops.workers import WORKER_SWEEP_S, WorkersFamily
from bunqueue.storage.postgres.outages import OutageLog
from bunqueue.storage.postgres.pool import PostgresConfig
from bunqueue.storage.postgres.startup import prepare_database

# How often this broker returns lapsed leases to work (any broker may: the statement takes them all).
LEASE_SWEEP_S = 0.5
# How often delayed jobs that came due (retries after their backoff among them) are made claimable (any broker
# may: the statement takes them all).
DUE_SWEEP_S = 0.05
# How often due DLQ entries are retried automatically or expired.
DLQ_MAINTENANCE_S = 1.0
# How often this broker releases dependency edges a completion could not see (``dependencies``).
DEPENDENCY_SWEEP_S = 1.0
# How often group rows left with nothing to hold are dropped.
IDLE_GROUPS_S = 60.0


# The families before the job family, so that a family may take up the job family's hooks (FlowFamily's
# ``failed_for_good``).
class PostgresEngine(
    CleanupFamily,
    CronFamily,
    DedupFamily,
    DlqFamily,
    EventsFamily,
    FlowFamily,
    GroupsFamily,
    JobControlFamily,
    LimitsFamily,
    ListingFamily,
    LocalFamily,
    LocksFamily,
    LogsFamily,
    MonitoringFamily,
    QueriesFamily,
    QueueControlFamily,
    StallsFamily,
    SystemFamily,
    WebhooksFamily,
    WorkersFamily,
    PostgresJobs,
):
    awaits_jobs = True

    def __init__(self, hot: HotPath, config: PostgresConfig, settings: Settings,
                 clock: Callable[[], float] = now_ms) -> None:
        self.events = EventHub(clock)
        self.counters = Counters()
        self.counters.max_prometheus_queues = settings.metrics_max_queues
        PostgresJobs.__init__(
            self, hot, clock, JobEvents(self.counters, self.publish, self.publish_many, clock, self.events)
        )
        self.pool = hot.pool
        self.namespace = hot.namespace
        self.config = config
        self.settings = settings
        self.broadcast = Broadcast(hot.pool, hot.namespace, config.broker_id)
        hot.wakeups.on_events = self.heard
        self.share_system_events()
        self.figure_reader = FigureReader(hot.pool, hot.namespace)
        self.timers: list[asyncio.Task[None]] = []
        # A database away fails every timer: said once for all of them.
        self.timer_outage = OutageLog("timers")
        self.open_webhooks(settings)
        self.worker_sessions = set()
        self.worker_drops = set()

    @classmethod
    async def open(cls, settings: Settings) -> PostgresEngine:
        """Reach the database, migrate it, register this broker's session: ``StartupFailed`` when any fails."""
        config = PostgresConfig.from_settings(settings)
        await prepare_database(config)
        engine = cls(await HotPath.open(config), config, settings)
        try:
            # The queues that exist already: a push into one of them is no queue:created.
            engine.job_events.queues.update((await engine.figures()).queues)
        except BaseException:
            await engine.close()
            raise
        return engine

    def start(self) -> None:
        self.every("dependency release", DEPENDENCY_SWEEP_S, self.release_settled)
        self.every("lease expiry", LEASE_SWEEP_S, self.expire_leases)
        self.every("delayed promotion", DUE_SWEEP_S, self.hot.promote_due)
        self.every("dlq maintenance", DLQ_MAINTENANCE_S, self.maintain_dlq)
        self.every("crons", CRON_SWEEP_S, self.fire_due_crons)
        self.every("webhooks", WEBHOOK_REFRESH_S, self.refresh_webhooks)
        self.every("worker expiry", WORKER_SWEEP_S, self.remove_silent_workers)
        self.every("idle groups", IDLE_GROUPS_S, self.forget_idle_groups)

    def every(self, name: str, seconds: float, action: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        """Run ``action`` every ``seconds`` until ``close``; a failed run (the database away) is logged and
        the next run still comes."""
        outage = self.timer_outage

        async def loop() -> None:
            while True:
                await asyncio.sleep(seconds)
                try:
                    await action()
                except Exception as exc:
                    outage.failed(exc, name)
                else:
                    outage.ran(name)

        self.timers.append(asyncio.create_task(loop(), name=f"bunqueue-{name}"))

    def release_session(self, session: Session) -> int:
        self.drop_session_workers(session)
        return LocalFamily.release_session(self, session)

    async def close(self) -> None:
        for task in self.timers:
            task.cancel()
        await asyncio.gather(*self.timers, return_exceptions=True)
        self.timers.clear()
        await self.close_locks()
        await self.close_webhooks()
        await self.close_workers()
        await self.broadcast.close()
        await self.hot.close()
