"""Crons: Cron, CronDelete, CronList, CronGet in ``bunqueue_crons``, and firing them once across brokers.

A request is checked by the memory engine's own ``parse_definition`` and the cron is the memory engine's
``Cron`` (view, next runs, the options of the jobs it spawns); the row holds its record, with
``next_run_at`` and ``executions`` as columns that win over the record's copies.

Firing has no leader: every broker looks for due crons on a timer (due by the database's clock). For each,
it moves ``next_run_at`` from the value it read, in a transaction that also pushes the job; of two brokers
that read the same run, the second's UPDATE finds ``next_run_at`` moved and changes nothing, so each run
fires once. As in memory, runs missed while nothing could fire them are collapsed into one (and skipped,
unless the cron says ``skipMissedOnRestart: false``, when no broker of the namespace was up at their time),
a cron at its ``maxLimit`` is removed when its next run comes, and a calendar schedule with no run left is
removed after its last.
"""
from __future__ import annotations

import logging
from typing import Any

import asyncpg

from bunqueue import errors, options
from bunqueue._core.jobfactory import JobFactory
from bunqueue._core.jobs import Job
from bunqueue.broker.components import eventnames
from bunqueue.broker.components.eventhub import EventHub
from bunqueue.broker.timers.cronregistry import NO_WORKER, Cron, announcement, parse_definition
from bunqueue.config import Settings
from bunqueue.errors import CommandError
from bunqueue.storage.postgres import statements
from bunqueue.storage.postgres.jobfamily import admitted
from bunqueue.storage.postgres.jobrows import PushColumns
from bunqueue.storage.postgres.ops.family import Family
from bunqueue.storage.postgres.ops.workers import SERVES
from bunqueue.storage.postgres.pgtext import MAX_KEY_CHARS
from bunqueue.storage.postgres.sessions import NOW_MS
from bunqueue.storage.schema import pack, unpack

log = logging.getLogger("bunqueue.cron")

# How often this broker looks for due crons: the latest a run fires after its time.
CRON_SWEEP_S = 0.1

# A new cron starts at $3 (its first run, or now when asked to run immediately); a replaced one keeps its
# executions and its place in the listing and starts at $4. A row the ON CONFLICT branch wrote has xmax set.
_UPSERT = """
INSERT INTO bunqueue_crons (namespace, name, next_run_at, record) VALUES ($1, $2, $3, $5)
ON CONFLICT (namespace, name) DO UPDATE SET next_run_at = $4, record = excluded.record
RETURNING executions, xmax <> 0 AS replaced
"""
_REMOVE = "DELETE FROM bunqueue_crons WHERE namespace = $1 AND name = $2 RETURNING name"
_GET = "SELECT next_run_at, executions, record FROM bunqueue_crons WHERE namespace = $1 AND name = $2"
_LIST = "SELECT next_run_at, executions, record FROM bunqueue_crons WHERE namespace = $1 ORDER BY created_seq"
# Due crons, with since when brokers of the namespace have been running without a break (the oldest live
# session's start): a run due before that was missed while no broker was up, as memory's runs missed across
# a restart.
_DUE = f"""
SELECT next_run_at, executions, record, {NOW_MS} AS now,
       (SELECT min(started_at) FROM bunqueue_broker_sessions WHERE namespace = $1 AND expires_at > {NOW_MS})
           AS up_since
FROM bunqueue_crons WHERE namespace = $1 AND next_run_at <= {NOW_MS} ORDER BY next_run_at
"""
# The fence: only the broker that still finds the run it read moves it.
_ADVANCE = """
UPDATE bunqueue_crons SET next_run_at = $4, executions = executions + $5
WHERE namespace = $1 AND name = $2 AND next_run_at = $3 RETURNING executions
"""
_RETIRE = "DELETE FROM bunqueue_crons WHERE namespace = $1 AND name = $2 AND next_run_at = $3 RETURNING name"


def _cron_of(row: asyncpg.Record) -> Cron:
    cron = Cron(unpack(row["record"]))
    cron.next_run = float(row["next_run_at"])
    cron.executions = row["executions"]
    return cron


class CronFamily(Family):
    events: EventHub
    factory: JobFactory
    settings: Settings

    async def upsert_cron(self, definition: dict[str, Any]) -> dict[str, Any]:
        """Add or replace the cron the request defines (checked as in memory); its view."""
        now = self.clock()
        cron = Cron(parse_definition(definition, now))
        if len(cron.name) > MAX_KEY_CHARS:
            raise CommandError(errors.must_be_at_most_chars("name", MAX_KEY_CHARS))
        following = cron.first_run(now)
        assert following is not None  # parse_definition checked that a future run exists
        first = now if options.flag(definition, "immediately") else following
        row = await self.pool.fetchrow(
            _UPSERT, self.namespace, cron.name, int(first), int(following), pack(cron.record()))
        assert row is not None
        cron.executions = row["executions"]
        cron.next_run = following if row["replaced"] else first
        if self.events.notices:
            name = eventnames.CRON_UPDATED if row["replaced"] else eventnames.CRON_CREATED
            self.events.notify(name, announcement(cron))
        return cron.view()

    async def remove_cron(self, name: Any) -> bool:
        if type(name) is not str or await self.pool.fetchval(_REMOVE, self.namespace, name) is None:
            return False
        if self.events.notices:
            self.events.notify(eventnames.CRON_DELETED, {"name": name})
        return True

    async def list_crons(self) -> list[dict[str, Any]]:
        return [_cron_of(row).view() for row in await self.pool.fetch(_LIST, self.namespace)]

    async def cron_view(self, name: Any) -> dict[str, Any]:
        row = await self.pool.fetchrow(_GET, self.namespace, name) if type(name) is str else None
        if row is None:
            raise CommandError(errors.CRON_NOT_FOUND)
        return _cron_of(row).view()

    # -- firing ----------------------------------------------------------------------------------------

    async def fire_due_crons(self) -> None:
        """Fire every cron due by the database's clock whose run no other broker fired first."""
        for row in await self.pool.fetch(_DUE, self.namespace):
            try:
                cron = _cron_of(row)
            except CommandError as exc:
                log.error("stored cron cannot be scheduled: %s", exc.message)
                continue
            now = float(row["now"])
            missed = row["up_since"] is not None and row["next_run_at"] < row["up_since"]
            if missed and (cron.skip_missed_on_restart or cron.skip_if_no_worker):
                await self._skip_missed(cron, row["next_run_at"], now)
            else:
                await self._fire(cron, row["next_run_at"], now)

    async def _skip_missed(self, cron: Cron, scheduled: int, now: float) -> None:
        """A run missed while no broker was up is not fired: the cron moves to its next run, uncounted."""
        async with self.pool.acquire() as conn:
            await self._move(conn, cron, scheduled, cron.first_run(now), False)

    async def _fire(self, cron: Cron, scheduled: int, now: float) -> None:
        if cron.at_limit():
            async with self.pool.acquire() as conn:
                await self._move(conn, cron, scheduled, None, False)
            return
        skip = cron.skip_if_no_worker and not await self.pool.fetchval(
            SERVES, self.namespace, cron.queue, self.settings.worker_timeout_ms)
        job: Job | None = None
        refusal: CommandError | None = None
        if not skip:
            # Built as PUSH builds it; the definition was checked, so a refusal here is rare (and counted).
            pushed_at = self.clock()
            try:
                job = admitted(self.factory.build(cron.job_options_for_push(), cron.queue, pushed_at, False),
                               pushed_at)
            except CommandError as exc:
                refusal = exc
        async with self.pool.acquire() as conn, conn.transaction():
            if not await self._move(conn, cron, scheduled, cron.following(scheduled, now), not skip):
                return
            if job is not None:
                columns = PushColumns()
                columns.add(job)
                await conn.fetch(statements.PUSH, self.namespace, *columns.arrays())
        if job is not None:
            self.hot.wakeups.wake(cron.queue)
        self._tell_fired(cron, skip, refusal)

    async def _move(
        self, conn: asyncpg.Connection, cron: Cron, scheduled: int, following: float | None, counted: bool
    ) -> bool:
        """Move the cron from the run at ``scheduled`` to ``following`` (none left: remove it); False when
        another broker moved it first."""
        key = cron.name
        if following is None:
            return await conn.fetchval(_RETIRE, self.namespace, key, scheduled) is not None
        moved = await conn.fetchval(_ADVANCE, self.namespace, key, scheduled, int(following), int(counted))
        return moved is not None

    def _tell_fired(self, cron: Cron, skipped: bool, refusal: CommandError | None) -> None:
        if refusal is not None:
            # The run stays counted, as in memory.
            log.warning("cron %r could not push its job: %s", cron.name, refusal.message)
        if not self.events.notices:
            return
        data: dict[str, Any] = {"name": cron.name, "queue": cron.queue}
        if skipped:
            self.events.notify(eventnames.CRON_SKIPPED, {**data, "reason": NO_WORKER})
        elif refusal is not None:
            self.events.notify(eventnames.CRON_MISSED, {**data, "error": f"Error: {refusal.message}"})
        else:
            self.events.notify(eventnames.CRON_FIRED, data)
