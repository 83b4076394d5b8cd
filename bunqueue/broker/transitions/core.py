"""The moves every transition shares: admission, activation, completion, requeueing and removal.

The state diagram is in the package docstring (``bunqueue.broker.transitions``).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from bunqueue._core.admission import admit_ready
from bunqueue._core.jobfactory import JobFactory
from bunqueue._core.jobs import Job
from bunqueue._core.leases import LeaseTable
from bunqueue.broker import states
from bunqueue.broker.components import eventhub, eventnames
from bunqueue.broker.components.deadletters import DeadLetters
from bunqueue.broker.components.dependencies import Dependencies
from bunqueue.broker.components.flowpolicy import FlowPolicies
from bunqueue.broker.components.queues import Queues, QueueState
from bunqueue.broker.components.records import JobRecords
from bunqueue.broker.components.repeatchain import RepeatChain
from bunqueue.broker.components.uniquekeys import PENDING, UniqueKeys
from bunqueue.broker.session import Session
from bunqueue.broker.timers import ratelimits
from bunqueue.broker.timers.cronregistry import is_spawned
from bunqueue.broker.timers.deadlines import Alarms
from bunqueue.broker.timers.groupcontrols import GroupControls
from bunqueue.broker.timers.retention import CompletedRetention
from bunqueue.broker.timers.stalls import StallDetector
from bunqueue.broker.timers.timeouts import JobTimeouts
from bunqueue.broker.transitions.admission import admit
from bunqueue.broker.transitions.completion import complete_jobs, leave_active
from bunqueue.broker.transitions.moves import CHECKED, check_move
from bunqueue.monitoring.counters import Counters
from bunqueue.storage import Store, notice_hook

QUEUED = (states.READY, states.DELAYED)
# job:deduplicated's strategy: the owner's key ttl extended, or the push simply answered with the owner.
DEDUP_EXTEND = "extend"
DEDUP_DEFAULT = "default"


class TransitionCore:
    # Slots: the compiled transitions read a dozen of these per job, each then a slot read rather than a
    # lookup in the instance's dict.
    __slots__ = (
        "alarms", "clock", "counters", "dependents", "deps", "dlq", "events", "factory", "flows", "groups",
        "job_activated", "job_added", "job_changed", "jobs", "keys", "leases", "limit_controls", "queues",
        "records", "repeats", "retention", "stall_checks", "stalls", "store", "timeout_deadlines", "timeouts",
    )

    def __init__(
        self,
        *,
        records: JobRecords,
        queues: Queues,
        keys: UniqueKeys,
        deps: Dependencies,
        dlq: DeadLetters,
        leases: LeaseTable,
        factory: JobFactory,
        stalls: StallDetector,
        timeouts: JobTimeouts,
        retention: CompletedRetention,
        limit_controls: ratelimits.QueueLimitControls,
        groups: GroupControls,
        events: eventhub.EventHub,
        store: Store,
        alarms: Alarms,
        counters: Counters,
        clock: Callable[[], float],
    ) -> None:
        self.records = records
        self.jobs = records.jobs
        self.queues = queues
        self.keys = keys
        self.deps = deps
        self.dependents = deps.dependents
        self.dlq = dlq
        self.leases = leases
        self.factory = factory
        self.stalls = stalls
        self.timeouts = timeouts
        self.retention = retention
        self.limit_controls = limit_controls
        self.groups = groups
        self.events = events
        self.store = store
        # The notices of the hot paths, None for a store that keeps nothing: each job is spared a call.
        self.job_added = notice_hook(store, "job_added")
        self.job_activated = notice_hook(store, "job_activated")
        self.job_changed = notice_hook(store, "job_changed")
        self.alarms = alarms
        self.counters = counters
        self.clock = clock
        # Pushes the successor of a repeating job after its ACK (set by the broker, which owns PUSH).
        self.repeats: RepeatChain | None = None
        # Applies a child's failure policy to its parent (set by the broker; see components.flowpolicy).
        self.flows: FlowPolicies | None = None
        # The per-job deadline heaps, bound here so that leaving active checks them cheaply.
        self.stall_checks = stalls.exact
        self.timeout_deadlines = timeouts.deadlines

    # -- into the queue ------------------------------------------------------------------------------

    def enqueue(self, q: QueueState, job: Job, now: float) -> None:
        """Ready or delayed by the job's run time; long-pollers are told."""
        if job.run_at > now:
            if CHECKED:
                check_move(job, states.DELAYED)
            job.state = states.DELAYED
            q.add_delayed(job)
            if q.waiters:
                # Long-pollers sleep until the earliest run time they knew of: let them look again.
                q.wake(len(q.waiters))
        else:
            if CHECKED:
                check_move(job, states.READY)
            job.state = states.READY
            q.add_ready(job)
            if q.waiters:
                q.wake(1)

    def requeue(self, q: QueueState, job: Job, run_at: float, now: float) -> None:
        """A job that left its heap (or active) goes back at a new run time."""
        job.run_at = run_at
        self.enqueue(q, job, now)
        self.store.job_changed(job)

    def admit(self, job: Job, now: float, q: QueueState | None = None) -> str:
        """A validated new job enters (``Wiring.push``); the id the push answers (compiled:
        ``admission.admit``)."""
        job_id: str = admit(self, job, now, q)
        return job_id

    def admit_batch(self, jobs: list[Job], now: float, q: QueueState) -> list[str]:
        """PUSHB's jobs of one queue, each admitted in order as ``admit`` would; the ids the push answers.

        Runs of plain jobs (ready at once; no custom id, unique key, dependencies or group) are queued by
        one compiled loop and share their first timeline entry; any other job takes ``admit``.
        """
        hub = self.events
        ids: list[str] = []
        waiting = {"state": states.WAITING, "timestamp": now}
        prioritized = {"state": states.PRIORITIZED, "timestamp": now}
        job_added = self.job_added
        start = 0
        end = len(jobs)
        while start < end:
            stop, n_prioritized = admit_ready(
                jobs, start, self.jobs, q.ready, now, states.READY, waiting, prioritized, job_added, ids
            )
            admitted = stop - start
            if admitted:
                q.n_prioritized += n_prioritized
                q.n_waiting += admitted - n_prioritized
                self.counters.on_pushed(q.name, admitted)
                if hub.wanted:
                    hub.emit_many(q.name, eventhub.PUSHED, ids[len(ids) - admitted:])
                if q.waiters:
                    q.wake(admitted)
            if stop < end:
                ids.append(self.admit(jobs[stop], now, q))
                stop += 1
            start = stop
        return ids

    def wait_for_dependencies(self, q: QueueState, job: Job) -> bool:
        """A job with dependencies (admitted, or read back at start-up) waits for those that have not
        completed; False when none remain."""
        self.deps.prune(job)
        if job.pending_deps is None:
            return False
        if CHECKED:
            check_move(job, states.WAITING_CHILDREN)
        job.state = states.WAITING_CHILDREN
        q.park(job.id)
        self.deps.wait_for(job)
        return True

    def promote_due(self, q: QueueState, now: float) -> None:
        """Every delayed job of ``q`` whose run time has passed becomes ready."""
        jobs = self.jobs
        for job_id in q.pop_due(now):
            job = jobs[job_id]
            if CHECKED:
                check_move(job, states.READY)
            job.state = states.READY
            q.add_promoted(job)

    def _claim_key(self, job: Job, now: float) -> str | None:
        """The owner's id when the push is a no-op for its unique key, else None (the key is the job's)."""
        keys = self.keys
        owner_id = keys.owner_of(job.queue, job.unique_key, now)
        if owner_id is not None:
            if job.deduplication_replace:
                owner = self.jobs[owner_id]
                if owner.state in PENDING:
                    # A replaced owner that never started goes entirely, as if it had never been pushed.
                    self.take_out(owner)
                    self.records.delete(owner)
            elif job.deduplication_extend and job.deduplication_ttl:
                keys.extend(job, owner_id, now)
                # Told of an owner still queued only, as the original tells it.
                if self.events.notices and self.jobs[owner_id].state in QUEUED:
                    self._deduplicated(job.queue, owner_id, DEDUP_EXTEND)
                return owner_id
            else:
                self.counters.on_event(job.queue)
                if self.events.wanted:
                    self.events.emit(job.queue, eventhub.DUPLICATED, owner_id)
                if self.events.notices:
                    self._deduplicated(job.queue, owner_id, DEDUP_DEFAULT)
                return owner_id
        keys.take(job, now)
        return None

    def _deduplicated(self, queue: str, owner_id: str, strategy: str) -> None:
        self.events.notify(eventnames.JOB_DEDUPLICATED, {"queue": queue, "jobId": owner_id, "strategy": strategy})

    # -- flows ---------------------------------------------------------------------------------------

    def prepare_member(self, job: Job, now: float) -> None:
        """A PUSHF member's first state and timeline, set before it is stored and published."""
        if job.pending_deps:
            to, initial = states.WAITING_CHILDREN, states.WAITING_CHILDREN_NAME
        elif job.run_at > now:
            to, initial = states.DELAYED, states.DELAYED_NAME
        else:
            to = states.READY
            initial = states.PRIORITIZED if job.priority > 0 else states.WAITING
        if CHECKED:
            check_move(job, to)
        job.state = to
        job.timeline = [{"state": initial, "timestamp": now}]

    def publish_member(self, job: Job) -> None:
        """A prepared PUSHF member becomes visible (with a durable store, after its graph committed)."""
        q = self.queues.of(job.queue)
        self.jobs[job.id] = job
        if job.state == states.WAITING_CHILDREN:
            q.park(job.id)
            self.deps.wait_for(job)
        elif job.state == states.DELAYED:
            q.add_delayed(job)
            if q.waiters:
                q.wake(len(q.waiters))
        else:
            q.add_ready(job)
            if q.waiters:
                q.wake(1)
        self.counters.on_pushed(job.queue)
        if self.events.wanted:
            self.events.emit(job.queue, eventhub.PUSHED, job.id)

    def hold_for_children(self, job: Job) -> None:
        """A queued parent that gained an unfinished child waits for it (a legacy UpdateParent link)."""
        q = self.queues[job.queue]
        if job.state in QUEUED:
            q.remove_queued(job)
            if CHECKED:
                check_move(job, states.WAITING_CHILDREN)
            job.state = states.WAITING_CHILDREN
            q.park(job.id)
        if job.timeline[-1]["state"] != states.WAITING_CHILDREN_NAME:
            job.note({"state": states.WAITING_CHILDREN_NAME, "timestamp": self.clock()})
        self.deps.wait_for(job)
        self.store.job_changed(job)

    def park_active(self, job: Job, pending: set[str] | None, now: float) -> None:
        """MoveToWaitingChildren: an active job waits for its unfinished children (``pending``)."""
        q = self.stop_running(job)
        if CHECKED:
            check_move(job, states.WAITING_CHILDREN)
        job.state = states.WAITING_CHILDREN
        job.note({"state": states.WAITING_CHILDREN_NAME, "timestamp": now})
        q.park(job.id)
        job.pending_deps = pending
        self.deps.wait_for(job)
        self.store.job_changed(job)

    def release_parent(self, job: Job, now: float) -> None:
        """A waiting-children parent whose remaining children no longer hold it runs now."""
        self.deps.unregister(job)
        q = self.queues[job.queue]
        q.unpark(job.id)
        job.run_at = now
        self.enqueue(q, job, now)
        self.store.job_changed(job)

    # -- active ----------------------------------------------------------------------------------------

    def leave_active(self, job: Job) -> QueueState:
        """The one way out of active: lease, holder, counters, stall and timeout checks, unique key
        (compiled: ``completion.leave_active``)."""
        q: QueueState = leave_active(self, job)
        return q

    def stop_running(self, job: Job) -> QueueState:
        """Out of active with no attempt charged (moved, released): it has not started its next attempt."""
        q = self.leave_active(job)
        job.started_at = math.nan
        return q

    def release_held(self, session: Session, now: float) -> int:
        """Requeue what a closed client held, without charging an attempt.

        A job whose lease was renewed is left to lease expiry: its worker may be heartbeating it from
        another connection.
        """
        released = 0
        jobs = self.jobs
        leases = self.leases
        for job_id in list(session.held):
            job = jobs.get(job_id)
            if job is None or job.state != states.ACTIVE:
                continue
            if job_id in leases and leases.renewals(job_id) > 0:
                job.holder = None
                continue
            q = self.stop_running(job)
            released += 1
            if is_spawned(job):
                self.drop_spawned(job)
                continue
            self.enqueue(q, job, now)
            self.store.job_changed(job)
        session.held.clear()
        return released

    # -- completion ----------------------------------------------------------------------------------

    def complete(self, q: QueueState, job: Job, result: Any, has_result: bool, remove: bool) -> None:
        """Complete a job that already left active (for a late ACK, its queue)."""
        complete_jobs(self, [job], [result] if has_result else None, remove, q)

    def complete_jobs(self, jobs: list[Job], results: list[Any] | None, remove: bool, q: QueueState | None) -> None:
        """Complete ``jobs`` in order: running attempts, each leaving active first (ACK, ACKB), or, with ``q``,
        jobs that already left it. ``results``: one per job, None when none was sent.

        This is the ACK hot path, compiled (``completion.complete_jobs``): what every job of a batch reaches
        is looked up once, and the completions are counted once per queue.
        """
        complete_jobs(self, jobs, results, remove, q)

    def release_dependents(self, job_id: str, now: float) -> None:
        """The jobs whose last dependency was ``job_id`` are queued."""
        for parked in self.deps.released_by(job_id):
            self.promote_dependent(parked, now)
            if self.events.notices:
                self.events.notify(eventnames.JOB_DEPENDENCIES_RESOLVED, {"jobId": parked.id, "queue": parked.queue})

    def promote_dependent(self, job: Job, now: float) -> None:
        """A parked job whose last dependency completed is queued; its timeline records the state it
        entered, as the reference's dependency promotion does (a policy release records none)."""
        q = self.queues.of(job.queue)
        q.unpark(job.id)
        self.enqueue(q, job, now)
        entered = states.state_name(job.state, job.priority, job.run_at, now)
        if job.timeline[-1]["state"] != entered:
            job.note({"state": entered, "timestamp": now})
        self.store.job_changed(job)

    def restart(self, job: Job, now: float) -> None:
        """A finished job (DLQ, completed) begins again from waiting: fresh attempts, its identity
        claimed anew."""
        job.attempts = 0
        job.stall_count = 0
        job.started_at = math.nan
        job.run_at = now
        job.last_heartbeat = now
        job.note({"state": states.WAITING, "timestamp": now})
        if job.unique_key is not None:
            self.keys.take(job, now)
        self.enqueue(self.queues.of(job.queue), job, now)
        self.store.job_changed(job)

    def requeue_completed(self, q: QueueState, job: Job, now: float) -> bool:
        """RetryCompleted of one job: back to waiting, its result and history gone; False when its unique key
        is taken."""
        if self.keys.taken_by_another(job, now):
            return False
        job_id = job.id
        self.forget_completed(q, job_id)
        self.records.results.pop(job_id, None)
        self.store.result_removed(job_id)
        self.records.failures.pop(job_id, None)
        self.dlq.generations.pop(job_id, None)
        job.completed_at = math.nan
        job.progress = 0
        job.progress_message = None
        self.restart(job, now)
        return True

    # -- removal -------------------------------------------------------------------------------------

    def take_out(self, job: Job) -> bool:
        """Remove a queued or waiting-children job from its queue (counters included); False otherwise."""
        q = self.queues[job.queue]
        if job.state in QUEUED:
            return q.remove_queued(job)
        if job.state == states.WAITING_CHILDREN:
            q.unpark(job.id)
            self.deps.unregister(job)
            return True
        return False

    def remove(self, job: Job) -> None:
        """The job leaves the broker (it is already out of its queue's heaps and sets)."""
        if job.unique_key is not None:
            self.keys.release(job)
        self.records.delete(job)

    def drop_spawned(self, job: Job) -> None:
        """A cron's job whose attempt was lost without a FAIL (a closed connection, an expired lease, a
        stall, a restart) is deleted rather than requeued: the cron pushes a fresh run on schedule, and a
        reconnecting worker must not get a stale one at once. It has already left active."""
        self.records.delete(job)

    def forget_completed(self, q: QueueState, job_id: str) -> None:
        """A completed job leaves the completed jobs kept in memory (retried, cleaned, obliterated,
        replaced by a push of its custom id)."""
        self.records.completed.pop(job_id, None)
        q.forget_completed(job_id)

    def forget(self, job: Job) -> None:
        """Retire a finished generation whose custom id is being reused."""
        self.timeouts.retired.forget(job.id)
        if job.state == states.COMPLETED:
            self.forget_completed(self.queues.of(job.queue), job.id)
        elif job.state == states.FAILED:
            self.dlq.remove(job.queue, job.id)
            self.store.dlq_removed(job.queue, job.id)
        self.records.delete(job)
