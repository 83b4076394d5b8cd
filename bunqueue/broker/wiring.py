"""The in-memory engine's wiring: the one place that builds its components, and the hot path the facade
(``facade.Broker``) inherits.

What lives where:

* ``records`` (``JobRecords``): every job, its result, failure history and logs, the completed jobs kept
  in memory; ``queues`` (``Queues``): each queue's heaps, sets, counters and controls;
* ``keys`` (``UniqueKeys``), ``deps`` (``Dependencies``), ``dlq`` (``DeadLetters``), ``leases``;
* ``transitions`` (``Transitions``): the only code that moves a job between states;
* ``events`` (``EventHub``): subscribers, stream taps and webhooks; ``counters``: the monitoring totals;
* the deadline components, each built from the parts it uses: ``stalls``, ``timeouts``, ``workers``,
  ``limit_controls``, ``groups``, ``crons``, ``retention`` and the DLQ's maintenance; ``deadline_handlers``
  hands them to the server's timers.

No sockets, no awaits: every method runs to completion, so the event loop is the lock.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from bunqueue import errors
from bunqueue._core.admission import build_batch, needing_checks
from bunqueue._core.jobfactory import JobFactory, data_too_large
from bunqueue._core.jobs import NO_DATA, Job
from bunqueue._core.leases import LeaseTable
from bunqueue.broker.clock import now_ms
from bunqueue.broker.components import eventhub, eventnames, repeatchain
from bunqueue.broker.components.deadletters import DeadLetters
from bunqueue.broker.components.dependencies import Dependencies
from bunqueue.broker.components.flowpolicy import FlowPolicies
from bunqueue.broker.components.queues import Queues, QueueState
from bunqueue.broker.components.records import JobRecords
from bunqueue.broker.components.uniquekeys import UniqueKeys
from bunqueue.broker.session import Session
from bunqueue.broker.timers.cronregistry import CronRegistry
from bunqueue.broker.timers.deadlines import (
    CRON,
    DLQ,
    GROUP_LIMITS,
    LEASES,
    RATE_LIMITS,
    RETENTION,
    STALLS,
    TIMEOUTS,
    WORKERS,
    Alarm,
    Alarms,
    Handler,
)
from bunqueue.broker.timers.groupcontrols import GroupControls
from bunqueue.broker.timers.ratelimits import QueueLimitControls
from bunqueue.broker.timers.retention import CompletedRetention
from bunqueue.broker.timers.stalls import StallDetector
from bunqueue.broker.timers.timeouts import JobTimeouts
from bunqueue.broker.timers.workerregistry import WorkerRegistry
from bunqueue.broker.transitions import FAILED, Transitions
from bunqueue.broker.transitions.activation import activate
from bunqueue.broker.transitions.admission import admit
from bunqueue.broker.transitions.completion import active_job, complete_active
from bunqueue.errors import CommandError
from bunqueue.monitoring.counters import Counters
from bunqueue.storage import MemoryStore, Store


class Wiring:
    def __init__(
        self,
        *,
        max_completed_jobs: int = 50000,
        store: Store | None = None,
        clock: Callable[[], float] = now_ms,
    ) -> None:
        # Epoch milliseconds as an integral float; a test passes a fake one.
        self.clock = clock
        # Told of every persistent change, after the in-memory state has changed (see storage.base).
        self.store: Store = store if store is not None else MemoryStore()
        # Set when the server stops: the connections it closes keep their jobs active (see release_session).
        self.stopping = False
        # The server's timers (see timers.deadlines): a no-op until ``wake_at`` is set.
        self.alarms = Alarms()
        self.queues = Queues()
        self.factory = JobFactory()
        self.leases = LeaseTable()
        self.dlq = DeadLetters(self.queues, self.alarms)
        self.records = JobRecords(self.store, self.queues, max_completed_jobs, self.dlq.generations)
        self.jobs = self.records.jobs
        self.keys = UniqueKeys(self.jobs, self.store)
        self.deps = Dependencies(self.records)
        self.events = eventhub.EventHub(clock)
        self.queues.on_created = self.events.queue_created
        # Running totals for Stats, Metrics, Prometheus and the dashboards (see monitoring.counters).
        self.counters = Counters()
        self.stalls = StallDetector(self.jobs, self.queues, self.alarms)
        self.timeouts = JobTimeouts(self.jobs, self.leases, self.alarms, self.records.max_completed_jobs)
        self.workers = WorkerRegistry(clock, self.alarms, self.factory.new_token, self.events)
        self.limit_controls = QueueLimitControls(self.queues, self.store, self.alarms, self.events)
        self.groups = GroupControls(self.queues, self.store, self.alarms, clock)
        self.retention = CompletedRetention(self.records, self.queues, self.store, self.alarms)
        self.records.evicted_to_disk = self.retention.evicted
        self.transitions = t = Transitions(
            records=self.records, queues=self.queues, keys=self.keys, deps=self.deps, dlq=self.dlq,
            leases=self.leases, factory=self.factory, stalls=self.stalls, timeouts=self.timeouts,
            retention=self.retention,
            limit_controls=self.limit_controls, groups=self.groups, events=self.events, store=self.store,
            alarms=self.alarms, counters=self.counters, clock=clock,
        )
        # Flow parents' failure records and the ids of graphs being committed (see components.flowpolicy).
        self.flows = t.flows = FlowPolicies(self.records)
        self.flows.transitions = t
        self.retention.remove = self.remove_completed
        self.crons = CronRegistry(self.store, self.alarms, self.push, self.workers.serves, clock, self.events)
        self.counters.list_crons = self.crons.listing
        # A repeating job's successor goes through PUSH's own path, checks included.
        self.repeats = t.repeats = repeatchain.RepeatChain(self.push)
        # The per-job commands go straight to their transition: no layer in between on the hot path.
        self.pull = partial(activate, t)
        self.ack = partial(complete_active, t)
        # The running job an ACK or FAIL names (its token checked): Job, or CommandError.
        self.active_job = partial(active_job, self.jobs, self.leases)
        self.queue = self.queues.of
        self._admit = partial(admit, t)

    @property
    def wake_at(self) -> Alarm:
        """Called with (kind, epoch ms) whenever a kind of deadline may come due earlier than anything
        armed; the server sets it to its scheduler's ``arm``."""
        return self.alarms.arm

    @wake_at.setter
    def wake_at(self, alarm: Alarm) -> None:
        self.alarms.arm = alarm

    def deadline_handlers(self) -> dict[str, Handler]:
        """What settles each kind of deadline; each returns that kind's next deadline."""
        t = self.transitions
        return {
            LEASES: t.expire_leases,
            TIMEOUTS: t.expire_timeouts,
            STALLS: t.expire_stalls,
            WORKERS: self.workers.expire,
            RATE_LIMITS: self.limit_controls.expire,
            GROUP_LIMITS: self.groups.expire,
            DLQ: t.maintain_dlq,
            CRON: self.crons.fire_due,
            RETENTION: self.retention.expire,
        }

    def pending_deadlines(self) -> Iterator[tuple[str, float]]:
        """The earliest deadline of each kind that has one (for a server arming its timers after a
        recovery filled the heaps)."""
        pending = {
            LEASES: self.leases.next_deadline(),
            TIMEOUTS: self.timeouts.deadlines.peek_time(),
            STALLS: self.stalls.next_check(),
            WORKERS: self.workers.removal.peek_time(),
            RATE_LIMITS: self.limit_controls.due.peek_time(),
            GROUP_LIMITS: self.groups.due.peek_time(),
            DLQ: self.dlq.next_due(),
            CRON: self.crons.next_due(),
            RETENTION: self.retention.deadlines.peek_time(),
        }
        return ((kind, when) for kind, when in pending.items() if when is not None)

    # -- push --------------------------------------------------------------------------------------

    def push(self, queue: str, opts: dict[str, Any], check_size: bool = False) -> str:
        now = self.clock()
        job = self._build(opts, queue, now, False, check_size)
        if job.pending_deps is not None:
            self.deps.check(job, ())
        if job.repeat is not None:
            repeatchain.check(job, opts["repeat"], now)
        if job.group_id is not None:
            self.check_group_caps([job])
        if job.unique_key is not None:
            self.keys.preflight(job, now, self.deps.dependents)
        parent = self.flows.parent_of_push(job) if job.parent_id is not None else None
        job_id = self._admit(job, now)
        if parent is not None and self.jobs.get(job_id) is job:
            self.flows.adopt(parent, job_id, False)
        return job_id

    def push_many(self, queue: str, items: Any, check_size: bool = False) -> list[str]:
        """All-or-nothing admission: every job is validated before any is visible."""
        if type(items) is not list:
            raise CommandError(errors.must_be_array("jobs"))
        now = self.clock()
        jobs = build_batch(self.factory, items, queue, now, check_size)
        positions = needing_checks(jobs)
        parents = self._check_batch(items, jobs, positions, now) if positions else {}
        ids = self.transitions.admit_batch(jobs, now, self.queues.of(queue))
        for i, parent in parents.items():
            if self.jobs.get(ids[i]) is jobs[i]:
                self.flows.adopt(parent, ids[i], False)
        if self.events.notices and len(jobs) > 1:
            self._batch_pushed(queue, jobs, ids)
        return ids

    def _batch_pushed(self, queue: str, jobs: list[Job], ids: list[str]) -> None:
        """batch:pushed, as the original tells a batch of more than one job that admitted any."""
        inserted = sum(1 for job, job_id in zip(jobs, ids) if self.jobs.get(job_id) is job)
        if inserted:
            self.events.notify(eventnames.BATCH_PUSHED, {
                "queue": queue, "total": len(jobs), "inserted": inserted, "duplicates": len(jobs) - inserted})

    def _check_batch(self, items: list[Any], jobs: list[Job], positions: list[int], now: float) -> dict[int, Job]:
        """The checks against the broker of the batch's jobs at ``positions`` (custom ids, dependencies,
        repeats, parents, group caps, unique keys); a failure names the job's position. Returns the
        existing parents that jobs of the batch join, by position."""
        batch_ids = {jobs[i].custom_id for i in positions if jobs[i].custom_id is not None}
        parents: dict[int, Job] = {}
        for i in positions:
            job = jobs[i]
            if job.pending_deps is not None:
                try:
                    self.deps.check(job, batch_ids)
                except CommandError as exc:
                    raise CommandError(errors.batch_item(i, exc.message)) from None
            if job.repeat is not None:
                try:
                    repeatchain.check(job, items[i]["repeat"], now)
                except CommandError as exc:
                    raise CommandError(errors.batch_item(i, exc.message)) from None
            if job.parent_id is not None:
                try:
                    parent = self.flows.parent_of_push(job)
                except CommandError as exc:
                    raise CommandError(errors.batch_item(i, exc.message)) from None
                if parent is not None:
                    parents[i] = parent
        self.check_group_caps([jobs[i] for i in positions])
        for i in positions:
            job = jobs[i]
            if job.unique_key is not None:
                try:
                    self.keys.preflight(job, now, self.deps.dependents)
                except CommandError as exc:
                    raise CommandError(errors.batch_item(i, exc.message)) from None
        return parents

    def _build(self, opts: dict[str, Any], queue: str, now: float, batch: bool, check_size: bool) -> Job:
        job = self.factory.build(opts, queue, now, batch)
        if check_size and job.data is not NO_DATA and data_too_large(job.data):
            raise CommandError(errors.JOB_DATA_TOO_LARGE)
        return job

    def check_group_caps(self, jobs: list[Job]) -> None:
        """groupMaxSize is checked for the batch as a whole: earlier members count toward later caps."""
        added: dict[tuple[str, str], int] = {}
        for job in jobs:
            if job.group_id is None:
                continue
            key = (job.queue, job.group_id)
            before = added.get(key, 0)
            limit = job.group_max_size
            if limit is not None and self.group_depth(job.queue, job.group_id) + before >= limit:
                raise CommandError(errors.group_full(job.group_id, limit))
            added[key] = before + 1

    def group_depth(self, queue: str, group_id: str) -> int:
        q = self.queues.get(queue)
        return q.group_depth(group_id) if q is not None else 0

    def remove_completed(self, job: Job) -> None:
        """A completed job held in memory leaves the broker and the store, as Clean removes it."""
        self.transitions.forget_completed(self.queues.of(job.queue), job.id)
        self.transitions.remove(job)

    def promote_due(self, q: QueueState, now: float) -> None:
        self.transitions.promote_due(q, now)

    # -- settle ------------------------------------------------------------------------------------

    def fail(self, job: Job, error: Any, stack: Any, unrecoverable: bool, remove: bool) -> None:
        """FAIL of the running attempt: retried with backoff, or terminal."""
        self.transitions.lose_attempt(job, FAILED, self.clock(), error, stack, unrecoverable, remove)

    def release_session(self, session: Session) -> int:
        """A client connection closed: its workers and subscription go, its jobs are requeued.

        Not while the server stops: the jobs stay active, and the next start charges them an interrupted
        attempt, as the reference does after a graceful stop.
        """
        self.workers.drop_session(session)
        self.events.unsubscribe(session)
        if self.stopping:
            return 0
        return self.transitions.release_held(session, self.clock())

    # -- records -----------------------------------------------------------------------------------

    def find_job(self, job_id: Any) -> Job | None:
        return self.records.find_job(job_id)

    def find_result(self, job_id: Any) -> tuple[bool, Any]:
        return self.records.find_result(job_id)

    @property
    def active_count(self) -> int:
        return sum(q.n_active for q in self.queues.values())
