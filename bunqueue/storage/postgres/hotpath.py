"""The PostgreSQL engine's hot path: push, claim, ack, fail and lease expiry, each batched across callers.

Every kind of request goes through a ``Collector``: concurrent callers share one statement per flush
(``statements``), so a burst of requests costs one round trip and one commit. Claims are collected per
queue, as one claim statement serves one queue. Errors a caller can cause are ``CommandError`` with the
memory engine's texts; the other requests of the same flush are not affected by them. The claim statement
takes ungrouped jobs; grouped ones come from ``groupclaim`` (lane order and group limits), after them.

Not here yet, and kept for the engine around this: dependencies (``dependsOn``) and flows, delayed-job
promotion, retry backoff (a failed attempt with attempts left goes straight back to ready), queue
limits, removeOnComplete/removeOnFail, the DLQ (an expired lease always returns its job to ready, the
attempt it cost counted; the max-attempts check happens at the next FAIL) and job events.
"""
from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import asyncpg

from bunqueue import errors
from bunqueue._core.groups import NO_LANE, ONE_LANE, GroupClaim
from bunqueue._core.jobs import Job
from bunqueue.broker import states
from bunqueue.errors import CommandError
from bunqueue.storage.postgres import groupclaim, statements
from bunqueue.storage.postgres.collector import Collector
from bunqueue.storage.postgres.jobrows import PushColumns, claimed_job
from bunqueue.storage.postgres.pool import PostgresConfig, connect, create_pool
from bunqueue.storage.postgres.sessions import BrokerSession
from bunqueue.storage.postgres.wakeups import Wakeups
from bunqueue.storage.schema import pack

# (count, owner, lock ttl in ms, whether slots no ungrouped job filled fall to the group lanes) of one pull.
# A queue whose lanes held no ready job is looked at again for a plain pull after a wake-up for it, or after
# this many poll intervals (the safety net for a lost notification); lanes held back, after one.
LANES_EMPTY_POLLS = 20

ClaimRequest = tuple[int, "str | None", int, bool]
Claimed = tuple[list[Job], list[str]]
# (job id, lease token, the value the statement's last array gets: a packed result, or the fail's finality).
SettleRequest = tuple[Any, Any, Any]


class PushLost(Exception):
    """A pushed job was neither inserted nor answered by the job that holds its id or unique key (both
    changed between the insert and the look-up); pushing it again is safe."""


class HotPath:
    """One broker's hot path on ``pool``, claiming under ``session``; ``wakeups`` wakes its pullers."""

    def __init__(self, pool: asyncpg.Pool, session: BrokerSession, wakeups: Wakeups, poll_interval_ms: int) -> None:
        self.pool = pool
        self.session = session
        self.wakeups = wakeups
        self.namespace = session.namespace
        self.poll_interval_s = poll_interval_ms / 1000
        self._pushes: Collector[list[Job], list[str]] = Collector(self._flush_pushes)
        self._acks: Collector[SettleRequest, Any] = Collector(self._flush_acks)
        self._fails: Collector[SettleRequest, Any] = Collector(self._flush_fails)
        self._claims: dict[str, Collector[ClaimRequest, Claimed]] = {}
        # Queues whose group lanes gave a plain pull nothing: (wake-up round of that look, loop time until
        # which it holds). A plain claim that comes up short looks at them again only after either changes.
        self._lanes_idle: dict[str, tuple[int, float]] = {}

    @classmethod
    async def open(cls, config: PostgresConfig, heartbeat_ms: int | None = None) -> HotPath:
        """Pool, registered session (renewed in the background) and listening connection for ``config``."""
        pool = await create_pool(config)
        session = BrokerSession(pool, config.namespace, config.broker_id, config.lease_duration_ms, heartbeat_ms)
        wakeups = Wakeups(config.namespace)
        try:
            await session.register()
            session.start()
            await wakeups.listen(await connect(config))
        except BaseException:
            await session.close()
            await pool.close()
            raise
        return cls(pool, session, wakeups, config.poll_interval_ms)

    async def close(self) -> None:
        await self._pushes.close()
        await self._acks.close()
        await self._fails.close()
        for claims in self._claims.values():
            await claims.close()
        await self.wakeups.close()
        await self.session.close()
        await self.pool.close()

    # -- push ----------------------------------------------------------------------------------------------

    async def push(self, job: Job) -> str:
        """Admit one built job (``JobFactory.build``); the id the push answers."""
        return (await self._pushes.submit([job]))[0]

    async def push_many(self, jobs: list[Job]) -> list[str]:
        """PUSHB: the ids, in order. A job whose custom id or unique key is live answers that job's id."""
        return await self._pushes.submit(jobs)

    async def _flush_pushes(self, batches: list[list[Job]]) -> list[list[str] | BaseException]:
        columns = PushColumns()
        for jobs in batches:
            for job in jobs:
                columns.add(job)
        custom_ids = [custom for custom in columns.custom_ids if custom is not None]
        async with self.pool.acquire() as conn:
            if custom_ids:
                async with conn.transaction():
                    await conn.execute(statements.FORGET_FINISHED, self.namespace, custom_ids)
                    rows = await conn.fetch(statements.PUSH, self.namespace, *columns.arrays())
            else:
                rows = await conn.fetch(statements.PUSH, self.namespace, *columns.arrays())
            inserted = {row[0] for row in rows}
            left_out = [i for i, job_id in enumerate(columns.ids) if job_id not in inserted]
            holders = await self._holders(conn, columns, left_out) if left_out else {}
        for queue in set(columns.queues):
            self.wakeups.wake(queue)
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
            await self.wakeups.sleep(queue, woken, min(self.poll_interval_s, left))

    async def _flush_claims(self, queue: str, requests: list[ClaimRequest]) -> list[Claimed]:
        if not self.session.valid:
            return [([], []) for _ in requests]
        owners, ttls = _slots(requests)
        rows = await self.pool.fetch(
            statements.CLAIM, self.namespace, queue, self.session.broker_id, self.session.token, owners, ttls
        )
        out = _hand_out(rows, requests)
        short = [i for i, request in enumerate(requests) if request[3] and len(out[i][0]) < request[0]]
        if short and self._lanes_may_give(queue):
            rest = [(requests[i][0] - len(out[i][0]), *requests[i][1:]) for i in short]
            round_before = self.wakeups.rounds.get(queue, 0)
            more, lanes_ready = await self._claim_groups(queue, rest, None)
            if not any(jobs for jobs, _tokens in more):
                polls = 1 if lanes_ready else LANES_EMPTY_POLLS
                until = asyncio.get_running_loop().time() + polls * self.poll_interval_s
                self._lanes_idle[queue] = (round_before, until)
            for i, (jobs, tokens) in zip(short, more):
                out[i][0].extend(jobs)
                out[i][1].extend(tokens)
        return out

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
            await conn.execute(groupclaim.LOCK, self.namespace, queue)
            rows = await conn.fetch(
                groupclaim.CLAIM, self.namespace, queue, self.session.broker_id, self.session.token, owners, ttls,
                concurrency, limit_max, limit_duration, affinity,
            )
        taken = [row for row in rows if row[0] != 0]
        return _hand_out(taken, requests), len(taken) < len(rows)

    # -- ack, fail -----------------------------------------------------------------------------------------

    async def ack(self, job_id: Any, token: Any, result: Any = None, has_result: bool = False) -> None:
        """Complete the running attempt ``token`` holds, keeping ``result`` when there is one."""
        await self._acks.submit((job_id, token, pack(result) if has_result else None))

    async def fail(self, job_id: Any, token: Any, final: bool = False) -> int:
        """End the running attempt as failed; the job's state after it (READY to retry, or FAILED)."""
        state: int = await self._fails.submit((job_id, token, final))
        return state

    async def _flush_acks(self, requests: list[SettleRequest]) -> list[None | CommandError]:
        return [row if isinstance(row, CommandError) else None for row in await self._settle(statements.ACK, requests)]

    async def _flush_fails(self, requests: list[SettleRequest]) -> list[int | CommandError]:
        out: list[int | CommandError] = []
        for row in await self._settle(statements.FAIL, requests):
            if isinstance(row, CommandError):
                out.append(row)
                continue
            _id, _token, state, queue = row
            if state == states.READY:
                self.wakeups.wake(queue)
            out.append(state)
        return out

    async def _settle(self, statement: str, requests: list[SettleRequest]) -> list[Sequence[Any] | CommandError]:
        """Run an ack or fail statement for every request that can match; the rows it changed, in request
        order, and for the rest the reason they were refused.

        Two requests for one job in a batch are both sent: the statement changes the row once, for the one
        whose token matches, and the other is judged afterwards, as if it had come second.
        """
        sendable = [request for request in requests if type(request[0]) is str and type(request[1]) is str]
        outcomes: list[Sequence[Any] | CommandError | None] = []
        async with self.pool.acquire() as conn:
            rows = await conn.fetch(
                statement, self.namespace, *(list(column) for column in zip(*sendable))
            ) if sendable else []
            done = {(row[0], row[1]): row for row in rows}
            for job_id, token, _value in requests:
                outcomes.append(done.pop((job_id, token), None) if type(job_id) is str and type(token) is str else None)
            named = [request[0] for request, row in zip(requests, outcomes) if row is None and type(request[0]) is str]
            found = {row["id"]: row for row in await conn.fetch(statements.SETTLE_REFUSED, self.namespace, named)} \
                if named else {}
        return [
            row if row is not None else CommandError(_refusal(found.get(job_id), job_id, token))
            for (job_id, token, _value), row in zip(requests, outcomes)
        ]

    async def first_refusal(self, pairs: list[tuple[str, Any]]) -> CommandError | None:
        """The refusal an ack of the first (job id, token) pair that holds no running lease would get, in
        order; None when every pair holds one. A job named twice holds no lease the second time."""
        rows = await self.pool.fetch(statements.SETTLE_REFUSED, self.namespace, [job_id for job_id, _ in pairs])
        found = {row["id"]: row for row in rows}
        seen: set[str] = set()
        for job_id, token in pairs:
            row = found.get(job_id)
            if job_id in seen or row is None or row["state"] != states.ACTIVE or row["lease_token"] != token:
                return CommandError(_refusal(None if job_id in seen else row, job_id, token))
            seen.add(job_id)
        return None

    # -- leases --------------------------------------------------------------------------------------------

    async def expire_leases(self) -> list[tuple[str, str]]:
        """Every lapsed lease of the namespace back to ready: the (job id, queue) pairs it returned."""
        rows = await self.pool.fetch(statements.EXPIRE_LEASES, self.namespace)
        for queue in {row["queue"] for row in rows}:
            self.wakeups.wake(queue)
        return [(row["id"], row["queue"]) for row in rows]


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
