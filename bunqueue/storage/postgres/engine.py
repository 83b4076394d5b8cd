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
from bunqueue.monitoring.snapshot import Totals
from bunqueue.storage.postgres.hotpath import HotPath
from bunqueue.storage.postgres.jobfamily import PostgresJobs
from bunqueue.storage.postgres.ops.groups import GroupsFamily
from bunqueue.storage.postgres.ops.local import LocalFamily
from bunqueue.storage.postgres.pool import PostgresConfig
from bunqueue.storage.postgres.startup import prepare_database

log = logging.getLogger("bunqueue")

# How often this broker returns lapsed leases to work (any broker may: the statement takes them all).
LEASE_SWEEP_S = 0.5
# How often the totals the probes show are read again.
TOTALS_REFRESH_S = 1.0
# How often group rows left with nothing to hold are dropped.
IDLE_GROUPS_S = 60.0


class PostgresEngine(PostgresJobs, GroupsFamily, LocalFamily):
    awaits_jobs = True

    def __init__(self, hot: HotPath, config: PostgresConfig, settings: Settings,
                 clock: Callable[[], float] = now_ms) -> None:
        PostgresJobs.__init__(self, hot, clock)
        self.pool = hot.pool
        self.namespace = hot.namespace
        self.config = config
        self.settings = settings
        self.events = EventHub(clock)
        self.counters = Counters()
        self.last_totals = Totals()
        self.timers: list[asyncio.Task[None]] = []

    @classmethod
    async def open(cls, settings: Settings) -> PostgresEngine:
        """Reach the database, migrate it, register this broker's session: ``StartupFailed`` when any fails."""
        config = PostgresConfig.from_settings(settings)
        await prepare_database(config)
        return cls(await HotPath.open(config), config, settings)

    def start(self) -> None:
        self.every("lease expiry", LEASE_SWEEP_S, self.hot.expire_leases)
        self.every("totals", TOTALS_REFRESH_S, self.refresh_totals)
        self.every("idle groups", IDLE_GROUPS_S, self.forget_idle_groups)

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
        await self.hot.close()
