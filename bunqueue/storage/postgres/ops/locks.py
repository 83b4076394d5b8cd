"""Lease renewal and job heartbeats in PostgreSQL: ExtendLock(s), JobHeartbeat(B).

A lease is named by (job id, token) alone, so any broker renews a lease another broker granted: the
worker may reconnect anywhere. The new expiry is read from the database's clock, which every broker's
lease sweep judges by. A command that names many jobs renews them all in one statement, and renewals
arriving from many connections at once share one too (a ``Collector``: group commit, as on the hot path).

As in memory, a job pulled without an owner holds no lease (its row has no ``worker_id``): nothing renews
it, and a heartbeat without a token still counts as hearing from it.
"""
from __future__ import annotations

from typing import Any

from bunqueue.broker import states
from bunqueue.storage.postgres.collector import Collector
from bunqueue.storage.postgres.ops.family import Family
from bunqueue.storage.postgres.pgtext import bigint_sql
from bunqueue.storage.postgres.sessions import NOW_MS
from bunqueue.storage.postgres.statements import requests_cte

# Every request of a batch at once: ($2 ids, $3 tokens, $4 durations, $5 renews). A request that renews
# needs a lease whose token is its own (or no token at all); one that does not only needs a running job.
# Each renewed row answers its lease's token, so a job named twice in a batch is judged per request.
RENEW = f"""
WITH clock AS (SELECT {NOW_MS} AS now),
{requests_cte("$2::text[], $3::text[], $4::float8[], $5::bool[]", "id, token, ttl, renew")}
UPDATE bunqueue_jobs j
SET last_heartbeat = clock.now,
    lease_ttl = CASE WHEN a.renew THEN coalesce(a.ttl, j.lease_ttl) ELSE j.lease_ttl END,
    lease_expires_at = CASE WHEN a.renew THEN {bigint_sql("clock.now + coalesce(a.ttl, j.lease_ttl)")}
                            ELSE j.lease_expires_at END
FROM req a, clock
-- The state in a CASE, no index condition (``statements.requests_cte``): one primary-key probe per request.
WHERE j.namespace = a.namespace AND j.id = a.id
  AND CASE j.state WHEN {states.ACTIVE}
      THEN NOT a.renew OR (j.worker_id IS NOT NULL AND j.lease_token IS NOT NULL
                           AND (a.token IS NULL OR a.token = j.lease_token))
      ELSE false END
RETURNING j.id, j.lease_token, j.worker_id IS NOT NULL AS leased
"""

# (job id, token or None, duration or None, whether the lease is renewed).
Renewal = tuple[Any, Any, "float | None", bool]


class LocksFamily(Family):
    # Made at the first renewal, closed with the engine (``close_locks``).
    _renewals: Collector[list[Renewal], list[bool]] | None = None

    async def extend_lock(self, job_id: Any, token: Any, duration: float | None, now: float | None = None) -> bool:
        """Renew the lease of ``job_id`` to now + duration (its current ttl when None); False without one."""
        return (await self._renew([(job_id, token, duration, True)]))[0]

    async def extend_locks(self, renewals: list[tuple[Any, Any, float | None]], now: float) -> int:
        """ExtendLocks: how many of the (id, token, duration) leases were renewed."""
        return sum(await self._renew([(job_id, token, duration, True) for job_id, token, duration in renewals]))

    async def job_heartbeat(self, job_id: Any, token: Any, duration: float | None, now: float) -> bool:
        """A running job is alive; with a token its lease is renewed too (by ``duration`` if given)."""
        return (await self._renew([(job_id, token, duration, bool(token))]))[0]

    async def job_heartbeats(self, beats: list[tuple[Any, Any]], now: float) -> int:
        """JobHeartbeatB: how many of the (id, token) jobs were running (and, with a token, held by it)."""
        return sum(await self._renew([(job_id, token, None, bool(token)) for job_id, token in beats]))

    async def close_locks(self) -> None:
        if self._renewals is not None:
            await self._renewals.close()

    async def _renew(self, requests: list[Renewal]) -> list[bool]:
        """Whether each request succeeded, in order, renewed along with whatever else is pending."""
        renewals = self._renewals
        if renewals is None:
            renewals = self._renewals = Collector(self._flush_renewals)
        return await renewals.submit(requests)

    async def _flush_renewals(self, batches: list[list[Renewal]]) -> list[list[bool]]:
        done = await self._renew_now([request for batch in batches for request in batch])
        out: list[list[bool]] = []
        at = 0
        for batch in batches:
            out.append(done[at:at + len(batch)])
            at += len(batch)
        return out

    async def _renew_now(self, requests: list[Renewal]) -> list[bool]:
        """Whether each request succeeded, in order: one statement for all of them, or one per repeat when
        a job is named more than once (each later request judged after the earlier, as in memory)."""
        out = [False] * len(requests)
        rounds: list[list[int]] = []
        seen: dict[str, int] = {}
        for i, (job_id, token, _duration, _renew) in enumerate(requests):
            if type(job_id) is not str or (token and type(token) is not str):
                continue
            k = seen[job_id] = seen.get(job_id, -1) + 1
            if k == len(rounds):
                rounds.append([])
            rounds[k].append(i)
        for positions in rounds:
            sent = [requests[i] for i in positions]
            rows = await self.pool.fetch(
                RENEW, self.namespace, [job_id for job_id, *_ in sent], [token or None for _, token, _, _ in sent],
                [duration for _, _, duration, _ in sent], [renew for *_, renew in sent],
            )
            running = {row["id"]: row for row in rows}
            for i, (job_id, token, _duration, renew) in zip(positions, sent):
                row = running.get(job_id)
                held = row is not None and row["leased"] and (not token or token == row["lease_token"])
                out[i] = row is not None and (not renew or held)
        return out
