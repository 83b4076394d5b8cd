"""``PostgresJobs``: the job family (PUSH, PUSHB, PULL, PULLB, ACK, ACKB, FAIL) answered by the PostgreSQL
hot path, as ``bunqueue.broker.engine.AwaitedJobs`` asks.

Requests are validated as the memory engine validates them (``JobFactory.build``, ``build_batch``), then
handed to ``HotPath``, which claims under its ``BrokerSession``: a broker whose session is lost claims
nothing. What ``hotpath`` leaves out (its docstring lists it) is left out here too; see the design note in
``bunqueue.storage.postgres``.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import asyncpg

from bunqueue import errors
from bunqueue._core.admission import build_batch
from bunqueue._core.groups import GroupClaim
from bunqueue._core.jobfactory import JobFactory, data_too_large
from bunqueue._core.jobs import NO_DATA, Job
from bunqueue.broker import states
from bunqueue.broker.clock import now_ms
from bunqueue.broker.components.eventhub import EventHub
from bunqueue.broker.ops.jobs import finalized
from bunqueue.broker.session import Session
from bunqueue.errors import CommandError
from bunqueue.monitoring.counters import Counters
from bunqueue.storage.postgres.attempts import Stall
from bunqueue.storage.postgres.dependencies import FINISHED_PARENTS
from bunqueue.storage.postgres.hotpath import LATE, HotPath
from bunqueue.storage.postgres.jobevents import JobEvents
from bunqueue.storage.postgres.pgtext import MAX_KEY_CHARS

Reply = dict[str, Any]
log = logging.getLogger("bunqueue.postgres")


class PostgresJobs:
    """The job family over ``hot`` (which claims under the broker's session); ``clock`` stamps pushed jobs, and
    ``job_events`` hears every transition committed (by default counted and told to this process only)."""

    awaits_jobs = True

    def __init__(self, hot: HotPath, clock: Callable[[], float] = now_ms, job_events: JobEvents | None = None) -> None:
        self.hot = hot
        self.clock = clock
        self.factory = JobFactory()
        if job_events is None:
            hub = EventHub(clock)
            job_events = JobEvents(Counters(), hub.emit, hub.emit_many, clock)
        self.job_events = job_events
        hot.on_resolved = self.dependencies_resolved
        self.flow_checks: set[asyncio.Task[None]] = set()

    async def push_async(self, queue: str, opts: dict[str, Any], check_size: bool = False) -> str:
        now = self.clock()
        job = self.factory.build(opts, queue, now, False)
        if check_size and job.data is not NO_DATA and data_too_large(job.data):
            raise CommandError(errors.JOB_DATA_TOO_LARGE)
        check_keys(job)
        job_id = await self.hot.push(admitted(job, now))
        self.job_events.pushed([job], [job_id])
        return job_id

    async def push_many_async(self, queue: str, items: Any, check_size: bool = False) -> list[str]:
        if type(items) is not list:
            raise CommandError(errors.must_be_array("jobs"))
        now = self.clock()
        jobs: list[Job] = build_batch(self.factory, items, queue, now, check_size)
        if not jobs:
            return []
        for job in jobs:
            check_keys(job)
        ids = await self.hot.push_many(admitted_batch(jobs, now))
        self.job_events.pushed(jobs, ids)
        return ids

    async def pull_async(
        self, queue: str, count: int, session: Session, owner: str | None, lock_ttl: float, timeout_ms: float,
        claim: GroupClaim | None = None,
    ) -> tuple[list[Job], list[str] | None]:
        ttl = int(lock_ttl)
        if timeout_ms > 0:
            jobs, tokens = await self.hot.claim_wait(queue, count, owner, ttl, timeout_ms, claim)
        else:
            jobs, tokens = await self.hot.claim(queue, count, owner, ttl, claim)
        self.job_events.pulled(queue, jobs)
        # A pull that names no owner holds no tokens (its jobs' leases only lapse), as in memory.
        return jobs, tokens if owner is not None else None

    async def ack_async(self, job_id: Any, token: Any, result: Any, has_result: bool, remove: bool) -> Reply:
        queue = await self.hot.ack(job_id, token, result, has_result, remove)
        self.job_events.completed(queue, job_id, result, has_result)
        await self.flows_told()
        return {"ok": True}

    async def fail_async(
        self, job_id: Any, token: Any, error: Any, stack: Any, unrecoverable: bool, remove: bool
    ) -> Reply:
        outcome = await self.hot.fail(job_id, token, unrecoverable, error, stack, remove)
        if outcome is LATE:
            return finalized()
        state, queue, record = outcome
        self.job_events.failed(queue, job_id, record, error, state)
        if state == states.FAILED:
            await self.failed_for_good(job_id, error)
        return {"ok": True}

    def dependencies_resolved(self, ids: list[str], queues: list[str]) -> None:
        """Completions released ``ids``: told, and when anyone listens, the flows they finished are looked up
        and told after them (a round trip only then)."""
        if self.job_events.dependencies_resolved(ids, queues):
            task = asyncio.ensure_future(self.tell_finished_flows(ids))
            self.flow_checks.add(task)
            task.add_done_callback(self.flow_checks.discard)

    async def flows_told(self) -> None:
        """Wait for the flow:completed look-ups under way, so that an ACK's reply comes after the flows its
        completion finished are told, as in memory: a client that acts on the reply (a Drain, another push)
        is then told of it after them. Only while someone listens and a completion released a dependent;
        the look-ups are not cancelled with a caller that goes away."""
        if self.flow_checks:
            await asyncio.wait(set(self.flow_checks))

    async def tell_finished_flows(self, released: list[str]) -> None:
        try:
            rows = await self.hot.pool.fetch(FINISHED_PARENTS, self.hot.namespace, released)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            log.debug("flow:completed look-up failed: %s", exc)
            return
        self.job_events.flows_completed([(row[0], row[1], row[2]) for row in rows])

    async def expire_leases(self) -> None:
        """The lease-expiry timer: lapsed leases lose their attempts, each told as a ``stalled`` event."""
        stalled: list[Stall] = []
        await self.hot.expire_leases(stalled)
        if stalled:
            self.job_events.stalled(stalled)

    async def failed_for_good(self, job_id: str, error: Any) -> None:
        """``job_id`` failed terminally: the engine's flow family applies a child's policy to its parent
        here (``ops.flows``); the job family alone has nothing more to do."""

    async def ack_batch_async(self, ids: list[Any], tokens: list[Any] | None, results: list[Any] | None) -> Reply:
        """Every position is checked before any job changes, as in memory; a lease lost between the check
        and the acks refuses its position only."""
        pairs = [(job_id, tokens[i] if tokens is not None else None) for i, job_id in enumerate(ids)]
        refusal = await self.hot.first_refusal(pairs)
        if refusal is not None:
            raise refusal
        outcomes = await asyncio.gather(*(
            self.hot.ack(job_id, token, None if results is None else results[i], results is not None)
            for i, (job_id, token) in enumerate(pairs)
        ), return_exceptions=True)
        for i, outcome in enumerate(outcomes):
            if not isinstance(outcome, BaseException):
                self.job_events.completed(outcome, ids[i], None if results is None else results[i], results is not None)
        await self.flows_told()
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        return {"ok": True}


def check_keys(job: Job) -> None:
    """Refuse a custom id or unique key too long for a PostgreSQL index entry (``MAX_KEY_CHARS``)."""
    if job.custom_id is None and job.unique_key is None:
        return
    for field, key in (("jobId", job.custom_id), ("uniqueKey", job.unique_key)):
        if type(key) is str and len(key) > MAX_KEY_CHARS:
            raise CommandError(errors.must_be_at_most_chars(field, MAX_KEY_CHARS))


def _initial_state(job: Job, now: float) -> str:
    if job.run_at > now:
        return states.DELAYED_NAME
    return states.PRIORITIZED if job.priority > 0 else states.WAITING


def admitted(job: Job, now: float) -> Job:
    """``job`` with the first timeline entry the memory engine gives a job it admits."""
    job.timeline = [{"state": _initial_state(job, now), "timestamp": now}]
    return job


def admitted_batch(jobs: list[Job], now: float) -> list[Job]:
    """``admitted`` for a batch's jobs: those that enter in the same state share one timeline, as nothing
    changes a pushed job's timeline before its row is written, and each row holds its own copy."""
    timelines: dict[str, list[dict[str, Any]]] = {}
    for job in jobs:
        initial = _initial_state(job, now)
        timeline = timelines.get(initial)
        if timeline is None:
            timeline = timelines[initial] = [{"state": initial, "timestamp": now}]
        job.timeline = timeline
    return jobs
