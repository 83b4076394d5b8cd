"""The PostgreSQL server: the same listeners over ``PostgresEngine``, whose state lives in the database.

The engine is opened (database reached, schema migrated, session registered) before any port opens, so a
start that cannot reach PostgreSQL fails with the engine's one line and never listens.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
from typing import cast

from bunqueue.broker.engine import Engine
from bunqueue.config import Settings
from bunqueue.server.runner import CommandRunner
from bunqueue.server.serving import Serving, tune_collector
from bunqueue.storage import MemoryStore
from bunqueue.storage.postgres.dispatch import build_handlers
from bunqueue.storage.postgres.engine import PostgresEngine


class PostgresServer(Serving):
    def __init__(self, settings: Settings, engine: PostgresEngine, runner: CommandRunner,
                 threads: concurrent.futures.Executor) -> None:
        super().__init__(settings, runner, engine.events)
        self.engine = engine
        self.threads = threads

    @classmethod
    async def open(cls, settings: Settings) -> PostgresServer:
        engine = await PostgresEngine.open(settings)
        # Replies wait for their statement's commit, never for a store's: the store is the memory one.
        runner = CommandRunner(cast(Engine, engine), MemoryStore(), settings.tokens)
        runner.handlers, threads = build_handlers(
            engine, asyncio.get_running_loop(), engine.config.statement_timeout_ms
        )
        return cls(settings, engine, runner, threads)

    async def start(self) -> None:
        tune_collector()
        self.handle_signals(asyncio.get_running_loop())
        self.engine.start()
        await self.listen()

    async def shutdown(self) -> None:
        """Stop accepting and close every connection; the leases this broker granted stay in the database,
        for their workers to finish on another broker or to lapse."""
        self.stop_accepting()
        await self.close_listeners()
        self.threads.shutdown(wait=False, cancel_futures=True)
        await self.engine.close()
