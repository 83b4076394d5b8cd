"""The PostgreSQL engine's hot path: push, claim, ack, fail and lease expiry, each batched across callers.

Every kind of request goes through a ``Collector``: concurrent callers share one statement per flush
(``statements``), so a burst of requests costs one round trip and one commit. Claims are collected per
queue, as one claim statement serves one queue. Errors a caller can cause are ``CommandError`` with the
memory engine's texts; the other requests of the same flush are not affected by them. The claim statement
takes ungrouped jobs; grouped ones come from ``groupclaim`` (lane order and group limits), after them.

An ack is one statement; a fail and a lease-expiry sweep are a read of the running rows (locked) and one
write, as their outcome is decided in Python exactly as the memory engine decides it (``attempts``: backoff,
failure history, timeline, the DLQ or removal, stalls). Due delayed jobs are claimed with the ready ones and
promoted by ``promote_due``. Queue pause and limits are the claim statement's (see ``statements.CLAIM``). A
push whose jobs depend on others parks them with their edges in the insert's transaction, and an ack
releases what waited for it (``dependencies``). Grouped jobs have a claim of their own (``groupclaim``),
made for the slots the plain claim left empty.

Not here yet, and kept for the engine around this: job timeouts and the stall detector's own timing (a
lapsed lease is the only stall). Job events are told by the job family (``jobevents``) from what the
statements return.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import asyncpg

from bunqueue import errors
from bunqueue._core.groups import NO_LANE, ONE_LANE, GroupClaim
from bunqueue._core.jobs import Job
from bunqueue.broker import states
from bunqueue.broker.clock import now_ms
from bunqueue.errors import CommandError
from bunqueue.storage.postgres import copypush, dependencies, groupclaim, statements
from bunqueue.storage.postgres.attempts import Losses, Lost, Stall
from bunqueue.storage.postgres.collector import Collector
from bunqueue.storage.postgres.jobrows import PushColumns, claimed_job
from bunqueue.storage.postgres.pool import PostgresConfig, connect, create_pool
from bunqueue.storage.postgres.sessions import BrokerSession, session_lease_ms
from bunqueue.storage.postgres.wakeups import Wakeups
from bunqueue.storage.schema import pack

log = logging.getLogger("bunqueue.postgres")

# (count, owner, lock ttl in ms, whether slots no ungrouped job filled fall to the group lanes) of one pull.
# A queue whose lanes held no ready job is looked at again for a plain pull after a wake-up for it, or after
# this many poll intervals (the safety net for a lost notification); lanes held back, after one.
LANES_EMPTY_POLLS = 20

ClaimRequest = tuple[int, "str | None", int, bool]
Claimed = tuple[list[Job], list[str]]
# (job id, lease token, what the ack or fail carries: (packed result, remove) or (error, stack, final, remove)).
SettleRequest = tuple[Any, Any, Any]
# Runs one batch of settle requests (each job named once): the outcome of each job it settled, by id.
SettleRun = Callable[[asyncpg.Connection, list[SettleRequest]], Awaitable[dict[str, Any]]]
# How many lapsed leases one sweep takes (the rest wait for the next).
EXPIRY_BATCH = 5000
# How many times a pushed row whose holder finished between the insert and its look-up is pushed again.
PUSH_RETRIES = 5
# What a FAIL left: the job's state (None: deleted), its queue and its record as it was (MessagePack).
Failed = tuple["int | None", str, bytes]


class PushLost(Exception):
    """A pushed job was neither inserted nor answered by the job that holds its id or unique key (both
    changed between the insert and the look-up); pushing it again is safe."""


class HotPath:
    """One broker's hot path on ``pool``, claiming under ``session``; ``wakeups`` wakes its pullers."""

    def __init__(self, pool: asyncpg.Pool, session: BrokerSession, wakeups: Wakeups, poll_interval_ms: int) -> None:
        self.pool = pool
        self.session = session
        # A lost session is followed by a new one, so the broker claims again once the database is back.
        session.on_lost = self._session_lost
        self._succession: asyncio.Task[None] | None = None
        self.wakeups = wakeups
        # Told the jobs (ids, queues) whose last dependency an ACK's completion released, when there are some.
        self.on_resolved: Callable[[list[str], list[str]], None] | None = None
        self.namespace = session.namespace
        self.poll_interval_s = poll_interval_ms / 1000
        self._pushes: Collector[Sequence[Job], list[str]] = Collector(self._flush_pushes, balanced=True)
        # Queues a COPY made jobs ready in, whose wake-up is still to be sent (``_announce``).
        self._announced: set[str] = set()
        self._announcer: asyncio.Task[None] | None = None
        self._acks: Collector[SettleRequest, Any] = Collector(self._flush_acks)
        self._fails: Collector[SettleRequest, Any] = Collector(self._flush_fails)
        self._claims: dict[str, Collector[ClaimRequest, Claimed]] = {}
        # Queues last seen with a concurrency or rate limit: claimed under the queue's lock.
        self.limited_queues: set[str] = set()
        # Queue -> loop time its rate limit's bucket next holds a whole token, after a claim that left none.
        self.token_due: dict[str, float] = {}
        # Queues whose group lanes gave a plain pull nothing: (wake-up round of that look, loop time until
        # which it holds). A plain claim that comes up short looks at them again only after either changes.
        self._lanes_idle: dict[str, tuple[int, float]] = {}

    @classmethod
    async def open(cls, config: PostgresConfig, heartbeat_ms: int | None = None) -> HotPath:
        """Pool, registered session (renewed in the background) and listening connection for ``config``."""
        pool = await create_pool(config)
        lease_ms = session_lease_ms(config.lease_duration_ms)
        session = BrokerSession(pool, config.namespace, config.broker_id, lease_ms, heartbeat_ms)
        wakeups = Wakeups(config.namespace)
        try:
            await session.register()
            session.start()
            await wakeups.listen(lambda: connect(config))
        except BaseException:
            await session.close()
            await pool.close()
            raise
        return cls(pool, session, wakeups, config.poll_interval_ms)

    async def close(self) -> None:
        await self._pushes.close()
        if self._announcer is not None:
            await asyncio.gather(self._announcer, return_exceptions=True)
        await self._acks.close()
        await self._fails.close()
        for claims in self._claims.values():
            await claims.close()
        if self._succession is not None:
            self._succession.cancel()
            await asyncio.gather(self._succession, return_exceptions=True)
        await self.wakeups.close()
        await self.session.close()
        await self.pool.close()

    def _session_lost(self, reason: str) -> None:
        if self._succession is None:
            self._succession = asyncio.get_running_loop().create_task(self._succeed(self.session))

    async def _succeed(self, lost: BrokerSession) -> None:
        self.session = await lost.successor()
        self._succession = None

    # -- push ----------------------------------------------------------------------------------------------

    async def push(self, job: Job) -> str:
        """Admit one built job (``JobFactory.build``); the id the push answers."""
        # A tuple: a refusal names no position, as PUSH's does not.
        return (await self._pushes.submit((job,)))[0]

    async def push_many(self, jobs: list[Job]) -> list[str]:
        """PUSHB: the ids, in order. A job whose custom id or unique key is live answers that job's id."""
        return await self._pushes.submit(copypush.prepared(self.namespace, jobs, now_ms()))

    async def _flush_pushes(self, batches: list[Sequence[Job]]) -> list[list[str] | BaseException]:
        if sum(map(len, batches)) >= copypush.COPY_MIN_JOBS:
            data = copypush.copy_data(self.namespace, batches, now_ms())
            if data is not None:
                try:
                    return await self._copy_pushes(batches, data)
                except asyncpg.UniqueViolationError:
                    pass  # a generated id met a stored custom one: the INSERT answers the collision
        return await self._insert_pushes(batches)

    async def _copy_pushes(
        self, batches: list[Sequence[Job]], data: bytes
    ) -> list[list[str] | BaseException]:
        async with self.pool.acquire() as conn:
            await copypush.copy_jobs(conn, data)
        queues = {job.queue for jobs in batches for job in jobs}
        for queue in queues:
            self.wakeups.wake(queue)
        self._announce(queues)
        return [[job.id for job in jobs] for jobs in batches]

    def _announce(self, queues: set[str]) -> None:
        """Wake the other brokers' pullers of ``queues`` (after a COPY, which sends no wake-up of its own),
        without holding the push's answer for that round trip."""
        self._announced |= queues
        if self._announcer is None:
            self._announcer = asyncio.get_running_loop().create_task(self._send_announced())

    async def _send_announced(self) -> None:
        try:
            while self._announced:
                queues, self._announced = list(self._announced), set()
                try:
                    await self.pool.execute(statements.NOTIFY_QUEUES, self.namespace, queues)
                except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                    # The jobs are in; another broker's pullers find them at their next poll.
                    log.warning("queue wake-ups were not sent to the other brokers (%d queue%s): %s",
                                len(queues), "" if len(queues) == 1 else "s", exc)
        finally:
            self._announcer = None

    async def _insert_pushes(self, batches: list[Sequence[Job]]) -> list[list[str] | BaseException]:
        # A request whose jobs wait for others is checked and parked in the insert's transaction; its
        # refusal (a missing dependency) leaves the other requests of the flush alone.
        dependent = dependencies.dependent_batches(batches)
        refused: dict[int, CommandError] = {}
        async with self.pool.acquire() as conn:
            if dependent:
                async with conn.transaction():
                    admission = await dependencies.check(conn, self.namespace, batches, dependent)
                    refused = admission.refused
                    admitted = [jobs for i, jobs in enumerate(batches) if i not in refused]
                    columns = _columns(admitted)
                    inserted = await self._insert(conn, columns)
                    await dependencies.park(conn, self.namespace, admission, inserted, now_ms())
            else:
                admitted = batches
                columns = _columns(batches)
                inserted = await self._insert(conn, columns)
            left_out = [i for i, job_id in enumerate(columns.ids) if job_id not in inserted]
            holders = await self._holders(conn, columns, left_out) if left_out else {}
            if len(holders) < len(left_out) and not dependent:
                await self._push_again(conn, columns, left_out, inserted, holders)
        for queue in set(columns.queues):
            self.wakeups.wake(queue)
        answers = iter(_answers(admitted, columns, inserted, holders))
        return [refused[i] if i in refused else next(answers) for i in range(len(batches))]

    async def _push_again(
        self, conn: asyncpg.Connection, columns: PushColumns, left_out: list[int], inserted: set[str],
        holders: dict[int, str],
    ) -> None:
        """Rows left out whose holder was gone by the look-up (it finished in between): pushed again, up to
        ``PUSH_RETRIES`` times, adding to ``inserted`` and ``holders``."""
        for _ in range(PUSH_RETRIES):
            lost = [i for i in left_out if i not in holders]
            if not lost:
                return
            inserted |= await self._insert(conn, columns.rows(lost))
            left_out = [i for i in lost if columns.ids[i] not in inserted]
            holders.update(await self._holders(conn, columns, left_out) if left_out else {})

    async def _insert(self, conn: asyncpg.Connection, columns: PushColumns) -> set[str]:
        """Insert the rows of ``columns``; the ids that went in."""
        custom_ids = [custom for custom in columns.custom_ids if custom is not None]
        if custom_ids and not conn.is_in_transaction():
            async with conn.transaction():
                return await self._insert(conn, columns)
        if custom_ids:
            await conn.execute(statements.FORGET_FINISHED, self.namespace, custom_ids)
        rows = await conn.fetch(statements.PUSH, self.namespace, *columns.arrays())
        return {row[0] for row in rows}

    async def _holders(self, conn: asyncpg.Connection, columns: PushColumns, left_out: list[int]) -> dict[int, str]:
        """For each row left out, the live job that holds its custom id or else its (queue, unique key)."""
        ids = [columns.custom_ids[i] for i in left_out if columns.custom_ids[i] is not None]
        keyed = [i for i in left_out if columns.unique_keys[i] is not None]
        rows = await conn.fetch(
            statements.HOLDERS, self.namespace, ids,
            [columns.queues[i] for i in keyed], [columns.unique_keys[i] for i in keyed],
        )
        live = {row["id"] for row in rows}
        owners = {(row["queue"], row["unique_key"]): row["id"] for row in rows if row["unique_key"] is not None}
        found: dict[int, str] = {}
        for i in left_out:
            custom = columns.custom_ids[i]
            owner = owners.get((columns.queues[i], columns.unique_keys[i]))
            if custom is not None and custom in live:
                found[i] = custom
            elif owner is not None:
                found[i] = owner
        return found

    # -- claim ---------------------------------------------------------------------------------------------

    async def claim(
        self, queue: str, count: int, owner: str | None, lock_ttl_ms: int, claim: GroupClaim | None = None
    ) -> Claimed:
        """Up to ``count`` ready jobs of ``queue``, each leased for ``lock_ttl_ms``; their tokens. Ungrouped
        jobs first, best first; then grouped ones as ``claim`` (a pull's ``group``) allows: its lanes and
        its defaults, as the memory engine's ``QueueState.pop_ready``."""
        ttl = int(lock_ttl_ms)
        if claim is not None and claim.lanes == ONE_LANE:
            return (await self._claim_groups(queue, [(count, owner, ttl, True)], claim))[0][0]
        collector = self._claims.get(queue)
        if collector is None:
            collector = self._claims[queue] = Collector(lambda requests: self._flush_claims(queue, requests))
        jobs, tokens = await collector.submit((count, owner, ttl, claim is None))
        if claim is None or claim.lanes == NO_LANE or len(jobs) == count:
            return jobs, tokens
        more, more_tokens = (await self._claim_groups(queue, [(count - len(jobs), owner, ttl, True)], claim))[0][0]
        return jobs + more, tokens + more_tokens

    async def claim_wait(
        self, queue: str, count: int, owner: str | None, lock_ttl_ms: int, timeout_ms: float,
        claim: GroupClaim | None = None,
    ) -> Claimed:
        """A long-poll: claim, and while nothing is ready sleep until a wake-up or the poll interval."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while True:
            woken = self.wakeups.waiter(queue)
            claimed = await self.claim(queue, count, owner, lock_ttl_ms, claim)
            left = deadline - loop.time()
            if claimed[0] or left <= 0:
                self.wakeups.forget(queue, woken)
                return claimed
            wait = min(self.poll_interval_s, left)
            # Every pull the rate limit holds on this queue looks again when the bucket next holds a token.
            due = self.token_due.get(queue)
            if due is not None and due > loop.time():
                # Held back by the rate limit: no notification tells when its bucket refills.
                wait = min(wait, due - loop.time())
            await self.wakeups.sleep(queue, woken, wait)

    async def _flush_claims(self, queue: str, requests: list[ClaimRequest]) -> list[Claimed]:
        if not self.session.valid:
            return [([], []) for _ in requests]
        owners, ttls = _slots(requests)
        rows = await self._claim_rows(queue, owners, ttls)
        out = _hand_out(rows, requests)
        short = [i for i, request in enumerate(requests) if request[3] and len(out[i][0]) < request[0]]
        if short and self._lanes_may_give(queue):
            rest = [(requests[i][0] - len(out[i][0]), *requests[i][1:]) for i in short]
            round_before = self.wakeups.rounds.get(queue, 0)
            more, lanes_ready = await self._claim_groups(queue, rest, None)
            # Lanes a queue with limits held back are looked at every time: its rate bucket refills with time,
            # which no wake-up tells.
            if not any(jobs for jobs, _tokens in more) and not (lanes_ready and queue in self.limited_queues):
                polls = 1 if lanes_ready else LANES_EMPTY_POLLS
                until = asyncio.get_running_loop().time() + polls * self.poll_interval_s
                self._lanes_idle[queue] = (round_before, until)
            for i, (jobs, tokens) in zip(short, more):
                out[i][0].extend(jobs)
                out[i][1].extend(tokens)
        return out

    async def _claim_rows(self, queue: str, owners: list[str | None], ttls: list[int]) -> list[asyncpg.Record]:
        """The claim statement's rows by slot (1..n, no gap: the k-th best job took slot k). A queue with
        limits is claimed under its lock (``statements.QUEUE_LOCK``); the statement's slot-0 row says the
        queue's limits came or went since this broker last claimed it, and the claim is made the other way."""
        limited = queue in self.limited_queues
        while True:
            args = (self.namespace, queue, self.session.broker_id, self.session.token, owners, ttls, limited)
            if limited:
                async with self.pool.acquire() as conn, conn.transaction():
                    await conn.execute(statements.QUEUE_LOCK, self.namespace, queue)
                    rows = await conn.fetch(statements.CLAIM, *args)
            else:
                rows = await self.pool.fetch(statements.CLAIM, *args)
            rows.sort(key=lambda row: row[0])
            if rows and rows[0][0] == -1:
                self.token_due[queue] = asyncio.get_running_loop().time() + rows[0][9] / 1000
                del rows[0]
            else:
                self.token_due.pop(queue, None)
            if not rows or rows[0][0] != 0:
                return rows
            if limited:
                self.limited_queues.discard(queue)
                return rows[1:]
            self.limited_queues.add(queue)
            limited = True

    def _lanes_may_give(self, queue: str) -> bool:
        """False while the queue's lanes gave nothing and neither a wake-up nor their time has come since."""
        idle = self._lanes_idle.get(queue)
        if idle is None:
            return True
        round_then, until = idle
        if round_then == self.wakeups.rounds.get(queue, 0) and asyncio.get_running_loop().time() < until:
            return False
        del self._lanes_idle[queue]
        return True

    async def _claim_groups(
        self, queue: str, requests: list[ClaimRequest], claim: GroupClaim | None
    ) -> tuple[list[Claimed], bool]:
        """Grouped jobs for ``requests`` under ``claim``'s defaults (``groupclaim``), in one transaction that
        holds the queue's group claim lock; and whether any group had ready jobs."""
        if not self.session.valid:
            return [([], []) for _ in requests], True
        owners, ttls = _slots(requests)
        concurrency, limit_max, limit_duration, affinity = (
            (0, 0, 0, None) if claim is None
            else (claim.concurrency, claim.limit_max, claim.limit_duration, claim.affinity)
        )
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute(statements.QUEUE_LOCK, self.namespace, queue)
            rows = await conn.fetch(
                groupclaim.CLAIM, self.namespace, queue, self.session.broker_id, self.session.token, owners, ttls,
                concurrency, limit_max, limit_duration, affinity,
            )
        taken = [row for row in rows if row[0] != 0]
        return _hand_out(taken, requests), len(taken) < len(rows)

    # -- ack, fail -----------------------------------------------------------------------------------------

    async def ack(
        self, job_id: Any, token: Any, result: Any = None, has_result: bool = False, remove: bool = False
    ) -> str:
        """Complete the running attempt ``token`` holds, keeping ``result`` when there is one; the job is
        deleted instead when ``remove`` or its removeOnComplete says so. The job's queue."""
        queue: str = await self._acks.submit((job_id, token, (pack(result) if has_result else None, remove)))
        return queue

    async def fail(
        self, job_id: Any, token: Any, final: bool = False, error: Any = None, stack: Any = None,
        remove: bool = False,
    ) -> Any:
        """End the running attempt as failed: ``Failed`` (its state after: READY or DELAYED to retry, FAILED in
        the DLQ, None when it was deleted by removeOnFail or ``remove``), or ``LATE`` when a token names an
        attempt already lost whose job waits in its queue again (the retry counted the failure)."""
        return await self._fails.submit((job_id, token, (error, stack, final, remove)))

    async def _flush_acks(self, requests: list[SettleRequest]) -> list[Any]:
        return await self._settle(self._run_acks, requests, False)

    async def _flush_fails(self, requests: list[SettleRequest]) -> list[Any]:
        return await self._settle(self._run_fails, requests, True)

    async def _run_acks(self, conn: asyncpg.Connection, requests: list[SettleRequest]) -> dict[str, Any]:
        rows = await conn.fetch(
            statements.ACK, self.namespace, [r[0] for r in requests], [r[1] for r in requests],
            [r[2][0] for r in requests], [r[2][1] for r in requests],
        )
        for queue in {row[2] for row in rows if row[3]}:
            self.wakeups.wake(queue)
        if self.on_resolved is not None:
            for row in rows:
                if row[4] is not None:
                    self.on_resolved(row[4], row[5])
                    break
        return {row[0]: row[2] for row in rows}

    async def _run_fails(self, conn: asyncpg.Connection, requests: list[SettleRequest]) -> dict[str, Any]:
        """Read the running rows, decide each loss as the memory engine does, write them all: one read and one
        write in one transaction."""
        details = {job_id: detail for job_id, _token, detail in requests}
        losses = Losses()
        async with conn.transaction():
            rows = await conn.fetch(
                statements.LOSE_READ, self.namespace, [r[0] for r in requests], [r[1] for r in requests]
            )
            for row in rows:
                error, stack, final, remove = details[row["id"]]
                losses.failed(Lost(row), error, stack, final, remove)
            freed = await self._lose(conn, losses) if rows else None
        states_after = self._settled(losses, freed)
        return {row["id"]: (states_after.get(row["id"]), row["queue"], row["record"]) for row in rows}

    async def _lose(self, conn: asyncpg.Connection, losses: Losses) -> list[str] | None:
        """Write ``losses`` (``statements.LOSE``); the queues whose held-back pulls their ends woke."""
        freed: list[str] | None = await conn.fetchval(statements.LOSE, self.namespace, *losses.arrays())
        return freed

    def _settled(self, losses: Losses, freed: list[str] | None) -> dict[str, int | None]:
        """Wake this broker's pulls of the queues ``losses`` made work claimable in, or that ``freed`` names."""
        outcome: dict[str, int | None] = dict.fromkeys(losses.removed)
        for job_id, queue, state in zip(losses.ids, losses.queues, losses.states):
            outcome[job_id] = state
            if state == states.READY:
                self.wakeups.wake(queue)
        for queue in freed or ():
            self.wakeups.wake(queue)
        return outcome

    async def _settle(self, run: SettleRun, requests: list[SettleRequest], failing: bool) -> list[Any]:
        """Run ``run`` (an ack or fail statement) for every request that can match; each request's outcome,
        in order, or the reason it was refused (a FAIL that came late: ``LATE``).

        Each run names a job once: a second request for the same job is run after the first is settled, and
        judged as if it had come second. A token that is not a string is sent as one no lease holds.
        """
        outcomes: list[Any] = [_REFUSED] * len(requests)
        pending = [i for i, request in enumerate(requests) if type(request[0]) is str]
        async with self.pool.acquire() as conn:
            while pending:
                batch: list[int] = []
                later: list[int] = []
                named: set[str] = set()
                for i in pending:
                    (later if requests[i][0] in named else batch).append(i)
                    named.add(requests[i][0])
                done = await run(conn, [_sendable(requests[i]) for i in batch])
                for i in batch:
                    outcomes[i] = done.get(requests[i][0], _REFUSED)
                pending = later
            refused = [request[0] for request, outcome in zip(requests, outcomes)
                       if outcome is _REFUSED and type(request[0]) is str]
            found = {row["id"]: row for row in await conn.fetch(statements.SETTLE_REFUSED, self.namespace, refused)} \
                if refused else {}
        return [
            outcome if outcome is not _REFUSED else _refused(_found(found, job_id), job_id, token, failing)
            for (job_id, token, _value), outcome in zip(requests, outcomes)
        ]

    async def first_refusal(self, pairs: list[tuple[str, Any]]) -> CommandError | None:
        """The refusal an ack of the first (job id, token) pair that holds no running lease would get, in
        order; None when every pair holds one. A job named twice holds no lease the second time."""
        named = [job_id for job_id, _ in pairs if type(job_id) is str]
        rows = await self.pool.fetch(statements.SETTLE_REFUSED, self.namespace, named) if named else []
        found = {row["id"]: row for row in rows}
        seen: set[str] = set()
        for job_id, token in pairs:
            row = _found(found, job_id)
            if row is not None and job_id in seen:
                row = None
            if row is None or not (_holds(row, token) or _requeued_after_loss(row)):
                return CommandError(_refusal(row, job_id, token))
            seen.add(job_id)
        return None

    # -- leases --------------------------------------------------------------------------------------------

    async def expire_leases(self, stalled: list[Stall] | None = None) -> list[tuple[str, str]]:
        """Every lapsed lease of the namespace loses its attempt (as the memory engine's lease expiry: back to
        its queue at once, or the DLQ when attempts or the queue's maxStalls run out): the (job id, queue)
        pairs it took; ``stalled`` gains the stalls to tell."""
        losses = Losses()
        async with self.pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(statements.EXPIRE_READ, self.namespace, EXPIRY_BATCH)
            for row in rows:
                losses.lapsed(Lost(row))
            freed = await self._lose(conn, losses) if rows else None
        self._settled(losses, freed)
        if stalled is not None:
            stalled.extend(losses.stalled)
        return [(row["id"], row["queue"]) for row in rows]

    async def promote_due(self) -> list[str]:
        """Delayed jobs whose time has come become ready: the queues that gained some."""
        queues = [row[0] for row in await self.pool.fetch(statements.PROMOTE_DUE, self.namespace)]
        for queue in queues:
            self.wakeups.wake(queue)
        return queues


_REFUSED = object()
# A FAIL of an attempt already lost (its job waits in its queue again): answered as already finalized.
LATE = object()


def _found(rows: dict[str, asyncpg.Record], job_id: Any) -> asyncpg.Record | None:
    """The row of ``job_id``; None for an id that is not a string (a list or map names no job)."""
    return rows.get(job_id) if type(job_id) is str else None


def _holds(row: asyncpg.Record, token: Any) -> bool:
    """The row runs under ``token``'s lease, or under none (a pull without an owner)."""
    return bool(row["state"] == states.ACTIVE and (row["lease_token"] is None or row["lease_token"] == token))


def _requeued_after_loss(row: asyncpg.Record) -> bool:
    """Back in its queue after an attempt that did not finish (``broker.ops.jobs.requeued_after_loss``)."""
    return bool((row["state"] == states.READY or row["state"] == states.DELAYED) and row["attempts"] > 0)


def _refused(row: asyncpg.Record | None, job_id: Any, token: Any, failing: bool) -> Any:
    if failing and token and row is not None and _requeued_after_loss(row):
        return LATE
    return CommandError(_refusal(row, job_id, token))


def _sendable(request: SettleRequest) -> SettleRequest:
    job_id, token, value = request
    return (job_id, token if token is None or type(token) is str else "", value)


def _columns(batches: list[Sequence[Job]]) -> PushColumns:
    columns = PushColumns()
    for jobs in batches:
        for job in jobs:
            columns.add(job)
    return columns


def _answers(
    batches: list[Sequence[Job]], columns: PushColumns, inserted: set[str], holders: dict[int, str]
) -> list[list[str] | BaseException]:
    """Each request's ids: its own where its row went in, else the holder's."""
    out: list[list[str] | BaseException] = []
    at = 0
    for jobs in batches:
        ids: list[str] = []
        lost: str | None = None
        for i in range(at, at + len(jobs)):
            job_id = columns.ids[i]
            answer = job_id if job_id in inserted else holders.get(i)
            if answer is None:
                lost = job_id
                break
            ids.append(answer)
        at += len(jobs)
        out.append(PushLost(f"job {lost} was not admitted") if lost is not None else ids)
    return out


def _slots(requests: list[ClaimRequest]) -> tuple[list[str | None], list[int]]:
    """The claim statements' per-slot arrays: each pull's owner and lock ttl, once per job it asks for."""
    owners: list[str | None] = []
    ttls: list[int] = []
    for count, owner, ttl, _falls in requests:
        owners.extend([owner] * count)
        ttls.extend([ttl] * count)
    return owners, ttls


def _hand_out(rows: list[asyncpg.Record], requests: list[ClaimRequest]) -> list[Claimed]:
    """Each pull its run of slots, in arrival order. Slots run 1..len(rows) with no gap: the k-th job
    taken is slot k."""
    rows.sort(key=lambda row: row[0])
    out: list[Claimed] = []
    at = 0
    for request in requests:
        taken = rows[at:at + request[0]]
        at += request[0]
        out.append(([claimed_job(row) for row in taken], [row[2] for row in taken]))
    return out


def _refusal(row: asyncpg.Record | None, job_id: Any, token: Any) -> str:
    """The memory engine's refusal of an ack or fail: the job is not running, or the token is not its lease's."""
    if row is None or row["state"] != states.ACTIVE:
        return errors.not_processing(job_id)
    if token is None:
        return errors.lock_token_required(job_id)
    return errors.invalid_lock_token(job_id)
