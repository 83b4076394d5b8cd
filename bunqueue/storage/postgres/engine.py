"""``PostgresEngine``: the engine of a broker in PostgreSQL mode, one mixin per command family.

PostgreSQL is the authority: every family answers from the database (``ops/``), and what a broker keeps in
memory (its listeners, its counters) is its own. The job family is ``PostgresJobs`` over the hot path; the
other families' methods are coroutines named as ``Engine``'s, which the server's handlers reach through
``BlockingEngine`` (see ``dispatch``). The engine's timers (lease expiry, ...) run as tasks from ``start``
to ``close``.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from bunqueue.broker.clock import now_ms
from bunqueue.broker.components.eventhub import EventHub
from bunqueue.config import Settings
from bunqueue.monitoring.counters import Counters
from bunqueue.storage.postgres.broadcast import Broadcast
from bunqueue.storage.postgres.figures import FigureReader
from bunqueue.storage.postgres.hotpath import HotPath
from bunqueue.storage.postgres.jobevents import JobEvents
from bunqueue.storage.postgres.jobfamily import PostgresJobs
from bunqueue.storage.postgres.ops.events import EventsFamily
from bunqueue.storage.postgres.ops.local import LocalFamily
from bunqueue.storage.postgres.ops.monitoring import MonitoringFamily
from bunqueue.storage.postgres.ops.system import SystemFamily
from bunqueue.storage.postgres.pool import PostgresConfig
from bunqueue.storage.postgres.startup import prepare_database

log = logging.getLogger("bunqueue")

# How often this broker returns lapsed leases to work (any broker may: the statement takes them all).
LEASE_SWEEP_S = 0.5


class PostgresEngine(
    PostgresJobs,
    EventsFamily,
    LocalFamily,
    MonitoringFamily,
    SystemFamily,
):
    awaits_jobs = True

    def __init__(self, hot: HotPath, config: PostgresConfig, settings: Settings,
                 clock: Callable[[], float] = now_ms) -> None:
        self.events = EventHub(clock)
        self.counters = Counters()
        self.counters.max_prometheus_queues = settings.metrics_max_queues
        PostgresJobs.__init__(
            self, hot, clock, JobEvents(self.counters, self.publish, clock, self.events.queue_created)
        )
        self.pool = hot.pool
        self.namespace = hot.namespace
        self.config = config
        self.settings = settings
        self.broadcast = Broadcast(hot.pool, hot.namespace, config.broker_id)
        hot.wakeups.on_events = self.heard
        self.figure_reader = FigureReader(hot.pool, hot.namespace)
        self.timers: list[asyncio.Task[None]] = []

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
        self.every("lease expiry", LEASE_SWEEP_S, self.hot.expire_leases)

    def every(self, name: str, seconds: float, action: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        """Run ``action`` every ``seconds`` until ``close``; a failed run (the database away) is logged and
        the next run still comes."""
        async def loop() -> None:
            while True:
                await asyncio.sleep(seconds)
                try:
                    await action()
                except Exception as exc:
                    log.warning("PostgreSQL %s failed: %s", name, exc)

        self.timers.append(asyncio.create_task(loop(), name=f"bunqueue-{name}"))

    async def close(self) -> None:
        for task in self.timers:
            task.cancel()
        await asyncio.gather(*self.timers, return_exceptions=True)
        self.timers.clear()
        await self.broadcast.close()
        await self.hot.close()
