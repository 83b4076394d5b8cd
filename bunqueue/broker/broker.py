"""The broker: job commands as state changes over the compiled core. No sockets, no awaits.

Every method runs to completion without yielding, so each transition is atomic with respect to every
other command: the event loop is the lock.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from functools import partial
from typing import Any

from bunqueue import errors
from bunqueue._core.jobs import NO_DATA, Job, JobFactory, data_too_large, wire_number
from bunqueue._core.leases import LeaseTable
from bunqueue.broker import dedup, events, limits, locks, states
from bunqueue.broker.clock import now_ms
from bunqueue.broker.completion import settle_waiters
from bunqueue.broker.deadlines import LEASES, RATE_LIMITS, STALLS, TIMEOUTS, WORKERS, Alarm, Handler, no_alarm
from bunqueue.broker.dlq import DeadLetters, dead_letter
from bunqueue.broker.queue import QueueState
from bunqueue.broker.retry import retry_delay
from bunqueue.broker.session import Session
from bunqueue.broker.stalls import StallDetector
from bunqueue.broker.timeouts import JobTimeouts
from bunqueue.broker.workers import WorkerRegistry
from bunqueue.errors import CommandError
from bunqueue.monitoring.counters import Counters
from bunqueue.storage import MemoryStore, Store

TIMELINE_CAP = 20
DEFAULT_MAX_STALLS = 3


def _timeline(job: Job, entry: dict[str, Any]) -> None:
    timeline = job.timeline
    timeline.append(entry)
    if len(timeline) > TIMELINE_CAP:
        del timeline[0]


class Broker:
    def __init__(self, *, max_completed_jobs: int = 50000, store: Store | None = None) -> None:
        # Told of every persistent change, after the in-memory state has changed (see storage.base).
        self.store: Store = store if store is not None else MemoryStore()
        self.jobs: dict[str, Job] = {}
        self.queues: dict[str, QueueState] = {}
        self.factory = JobFactory()
        self.leases = LeaseTable()
        self.dlq = DeadLetters(self.queues)
        self.results: dict[str, Any] = {}
        self.max_completed_jobs = max(1, max_completed_jobs)
        # Completed jobs in completion order, for FIFO eviction of the in-memory copies.
        self.completed: OrderedDict[str, None] = OrderedDict()
        # Ids known to have completed though their record is gone (removeOnComplete, eviction): they still
        # satisfy a dependsOn.
        self.completion_proofs: OrderedDict[str, None] = OrderedDict()
        self.dependents: dict[str, set[str]] = {}
        self.unique_keys: dict[tuple[str, str], tuple[str, float | None]] = {}
        # Failure history per job (the DLQ entry's ``attempts``).
        self.failures: dict[str, list[dict[str, Any]]] = {}
        # Job logs (AddLog), per job id, least recently written first.
        self.logs: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
        # WaitJob futures per job id: settled True when the job completes, False when it is removed.
        self.job_waiters: dict[str, list[Any]] = {}
        # Called with (kind, epoch ms) whenever a kind of deadline may come due earlier than anything armed
        # (see broker.deadlines); the server keeps one loop timer per kind.
        self.wake_at: Alarm = no_alarm
        self.events = events.EventHub()
        # Running totals for Stats, Metrics, Prometheus and the dashboards (see monitoring.counters).
        self.counters = Counters()
        self.stalls = StallDetector(self)
        self.timeouts = JobTimeouts(self)
        self.workers = WorkerRegistry(self)
        self.rate_wakeups = limits.RateLimitWakeups(self)
        # The per-job deadline heaps, bound here so that leaving active checks them cheaply.
        self._stall_checks = self.stalls.exact
        self._timeout_deadlines = self.timeouts.deadlines

    def deadline_handlers(self) -> dict[str, Handler]:
        """What settles each kind of deadline; each returns that kind's next deadline."""
        return {
            LEASES: partial(locks.settle_leases, self),
            TIMEOUTS: self.timeouts.expire,
            STALLS: self.stalls.expire,
            WORKERS: self.workers.expire,
            RATE_LIMITS: self.rate_wakeups.expire,
        }

    # -- queues ------------------------------------------------------------------------------------

    def queue(self, name: str) -> QueueState:
        q = self.queues.get(name)
        if q is None:
            q = self.queues[name] = QueueState(name)
        return q

    def promote_due(self, q: QueueState, now: float) -> None:
        q.promote_due(now, self.jobs, states.READY)

    def _enqueue(self, q: QueueState, job: Job, now: float) -> None:
        if job.run_at > now:
            job.state = states.DELAYED
            q.add_delayed(job)
            if q.waiters:
                # Long-pollers sleep until the earliest run time they knew of: let them look again.
                self.wake(q, len(q.waiters))
        else:
            job.state = states.READY
            q.add_ready(job)
            if q.waiters:
                self.wake(q, 1)

    @staticmethod
    def wake(q: QueueState, n: int) -> None:
        waiters = q.waiters
        while n > 0 and waiters:
            fut = waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                n -= 1

    # -- push --------------------------------------------------------------------------------------

    def push(self, queue: str, opts: dict[str, Any], check_size: bool = False) -> str:
        now = now_ms()
        job = self._build(opts, queue, now, False, check_size)
        self._check_dependencies(job, ())
        if job.group_id is not None:
            self._check_group_caps([job])
        if job.unique_key is not None:
            dedup.preflight(self, job, now)
        counters = self.counters
        before = counters.pushed
        job_id = self._admit(job, now)
        if counters.pushed != before:
            counters.queue(queue).events += 1
        return job_id

    def push_many(self, queue: str, items: Any, check_size: bool = False) -> list[str]:
        """All-or-nothing admission: every job is validated before any is visible."""
        if type(items) is not list:
            raise CommandError(errors.must_be_array("jobs"))
        now = now_ms()
        build = self._build
        jobs: list[Job] = []
        for i, opts in enumerate(items):
            if type(opts) is not dict:
                raise CommandError(errors.batch_item(i, errors.must_be_object("job")))
            try:
                jobs.append(build(opts, queue, now, True, check_size))
            except CommandError as exc:
                raise CommandError(errors.batch_item(i, exc.message)) from None
        batch_ids = {job.custom_id for job in jobs if job.custom_id is not None}
        for i, job in enumerate(jobs):
            if job.pending_deps is not None:
                try:
                    self._check_dependencies(job, batch_ids)
                except CommandError as exc:
                    raise CommandError(errors.batch_item(i, exc.message)) from None
        self._check_group_caps(jobs)
        for i, job in enumerate(jobs):
            if job.unique_key is not None:
                try:
                    dedup.preflight(self, job, now)
                except CommandError as exc:
                    raise CommandError(errors.batch_item(i, exc.message)) from None
        admit = self._admit
        q = self.queue(queue)
        counters = self.counters
        before = counters.pushed
        ids = [admit(job, now, q) for job in jobs]
        counters.queue(queue).events += counters.pushed - before
        return ids

    def _build(self, opts: dict[str, Any], queue: str, now: float, batch: bool, check_size: bool) -> Job:
        job = self.factory.build(opts, queue, now, batch)
        if check_size and job.data is not NO_DATA and data_too_large(job.data):
            raise CommandError(errors.JOB_DATA_TOO_LARGE)
        return job

    def _check_dependencies(self, job: Job, batch_ids: Any) -> None:
        if job.pending_deps is None:
            return
        for dep in job.depends_on:
            if dep not in self.jobs and dep not in self.completion_proofs and dep not in batch_ids:
                raise CommandError(errors.dependency_not_found(dep))
        if job.id in job.pending_deps:
            raise CommandError(errors.dependency_not_found(job.id))

    def _check_group_caps(self, jobs: list[Job]) -> None:
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

    def _admit(self, job: Job, now: float, q: QueueState | None = None) -> str:
        if job.custom_id is not None:
            existing = self.jobs.get(job.custom_id)
            if existing is not None:
                if existing.state in states.LIVE:
                    return existing.id
                self._forget(existing)
        if job.unique_key is not None:
            owner = dedup.claim(self, job, now)
            if owner is not None:
                return owner
        if q is None:
            q = self.queue(job.queue)
        self.jobs[job.id] = job
        deps = job.pending_deps
        if deps is not None:
            self._register_dependencies(q, job)
            deps = job.pending_deps
        if deps:
            initial = states.WAITING_CHILDREN_NAME
        elif job.run_at > now:
            job.state = states.DELAYED
            q.add_delayed(job)
            if q.waiters:
                self.wake(q, len(q.waiters))
            initial = states.DELAYED_NAME
        else:
            job.state = states.READY
            q.add_ready(job)
            if q.waiters:
                self.wake(q, 1)
            initial = states.PRIORITIZED if job.priority > 0 else states.WAITING
        job.timeline = [{"state": initial, "timestamp": now}]
        self.store.job_added(job)
        self.counters.pushed += 1
        if self.events.wanted:
            self.events.emit(job.queue, events.PUSHED, job.id)
        return job.id

    def _register_dependencies(self, q: QueueState, job: Job) -> None:
        """Drop dependencies that already completed; park the job while any remain."""
        deps = job.pending_deps
        proofs = self.completion_proofs
        jobs = self.jobs
        for dep in list(deps):
            done = jobs.get(dep)
            if dep in proofs or (done is not None and done.state == states.COMPLETED):
                deps.discard(dep)
        if not deps:
            job.pending_deps = None
            return
        job.state = states.WAITING_CHILDREN
        q.park(job.id)
        for dep in deps:
            self.dependents.setdefault(dep, set()).add(job.id)

    def _unique_owner(self, queue: str, key: str, now: float) -> str | None:
        return dedup.owner_of(self, queue, key, now)

    def _release_unique_key(self, job: Job) -> None:
        if job.unique_key is not None:
            dedup.release(self, job)

    # -- pull --------------------------------------------------------------------------------------

    def pull(
        self,
        q: QueueState,
        count: int,
        session: Session | None,
        owner: str | None,
        lock_ttl: float,
        detach: bool,
    ) -> tuple[list[Job], list[str] | None]:
        tokens: list[str] | None = [] if owner is not None else None
        if q.paused:
            return [], tokens
        now = now_ms()
        self.promote_due(q, now)
        if q.limits is not None:
            count = limits.admit(self, q, count, now)
        out: list[Job] = []
        jobs = self.jobs
        held = session.held if session is not None and (owner is not None or not detach) else None
        watch = q.stall_watch
        watch_was_empty = watch is not None and not watch
        while len(out) < count:
            job_id = q.pop_ready()
            if job_id is None:
                break
            job = jobs[job_id]
            q.took(job)
            ttl = job.ttl
            if ttl is not None and now > job.created_at + ttl:
                self._discard_expired(q, job)
                continue
            job.state = states.ACTIVE
            job.started_at = now
            job.last_heartbeat = now
            _timeline(job, {"state": states.ACTIVE_NAME, "timestamp": now})
            q.n_active += 1
            q.active[job_id] = None
            if job.stall_timeout is None:
                if watch is not None:
                    watch[job_id] = None
            elif watch is not None:
                self.stalls.watch_job(job, now)
            if job.timeout:
                self.timeouts.started(job, now)
            if tokens is not None:
                token = self.factory.new_token()
                self.leases.grant(job_id, token, owner, now, lock_ttl)
                tokens.append(token)
                self.wake_at(LEASES, now + lock_ttl)
            if held is not None:
                held.add(job_id)
                job.holder = held
            self.store.job_activated(job)
            out.append(job)
        if out:
            self.counters.on_pulled(q.name, len(out))
            if self.events.wanted:
                for job in out:
                    self.events.emit(q.name, events.PULLED, job.id)
            if q.limits is not None:
                limits.took(q, len(out))
            if watch_was_empty and watch:
                self.stalls.watch_queue(q, now)
        return out, tokens

    def _discard_expired(self, q: QueueState, job: Job) -> None:
        """A job past its ttl is dropped when a pull meets it: never delivered, no DLQ."""
        self._release_unique_key(job)
        self._delete(job)

    # -- settle ------------------------------------------------------------------------------------

    def active_job(self, job_id: Any, token: Any) -> Job:
        job = self.jobs.get(job_id) if type(job_id) is str else None
        if job is None or job.state != states.ACTIVE:
            raise CommandError(errors.not_processing(job_id))
        lease_token = self.leases.token(job_id)
        if lease_token is not None:
            if token is None:
                raise CommandError(errors.lock_token_required(job_id))
            if token != lease_token:
                raise CommandError(errors.invalid_lock_token(job_id))
        return job

    def _leave_active(self, job: Job) -> QueueState:
        self.leases.release(job.id)
        holder = job.holder
        if holder is not None:
            holder.discard(job.id)
            job.holder = None
        q = self.queues[job.queue]
        q.n_active -= 1
        job_id = job.id
        del q.active[job_id]
        watch = q.stall_watch
        if watch:
            watch.pop(job_id, None)
        if self._stall_checks:
            self.stalls.forget(job_id)
        if self._timeout_deadlines:
            self.timeouts.forget(job_id)
        # Every way out of active frees the job's unique key, as in the reference (a retry included).
        if job.unique_key is not None:
            dedup.release(self, job)
        limited = q.limits
        if limited is not None and limited.concurrency is not None and q.waiters:
            # A concurrency slot opened.
            self.wake(q, 1)
        return q

    def ack(self, job: Job, result: Any, has_result: bool, remove: bool) -> None:
        q = self._leave_active(job)
        self._complete(q, job, result, has_result, remove)

    def _complete(self, q: QueueState, job: Job, result: Any, has_result: bool, remove: bool) -> None:
        """Complete a job that already left active (or, for a late ACK, its queue)."""
        now = now_ms()
        self._release_unique_key(job)
        job_id = job.id
        if self.job_waiters:
            settle_waiters(self.job_waiters, job_id, True)
        if remove or job.remove_on_complete:
            self._delete(job)
            self._add_proof(job_id)
        else:
            job.state = states.COMPLETED
            job.completed_at = now
            _timeline(job, {"state": states.COMPLETED_NAME, "timestamp": now})
            self.store.job_changed(job)
            if has_result:
                self.results[job_id] = result
                self.store.result_stored(job_id, result)
            # Inline QueueState.note_completed: this is the ACK hot path.
            q.completed[job_id] = None
            q.n_completed += 1
            self.completed[job_id] = None
            if len(self.completed) > self.max_completed_jobs:
                self._evict_completed()
        self.counters.on_completed(job.queue, now)
        if self.events.wanted:
            self.events.completed(job, result, has_result)
        waiting = self.dependents.pop(job_id, None)
        if waiting:
            self._resolve_dependents(job_id, waiting, now)

    def _resolve_dependents(self, dep_id: str, waiting: set[str], now: float) -> None:
        for job_id in waiting:
            job = self.jobs.get(job_id)
            if job is None or job.state != states.WAITING_CHILDREN:
                continue
            job.pending_deps.discard(dep_id)
            if not job.pending_deps:
                job.pending_deps = None
                q = self.queue(job.queue)
                q.unpark(job_id)
                self._enqueue(q, job, now)
                self.store.job_changed(job)

    def fail(
        self, job: Job, error: Any, stack: Any, unrecoverable: bool, remove: bool, reason: str | None = None
    ) -> None:
        """A failed attempt: retried with backoff, or terminal. ``reason`` overrides the recorded one
        (a timeout records "timeout")."""
        now = now_ms()
        q = self._leave_active(job)
        attempts = job.attempts + 1
        job.attempts = attempts
        if stack is not None:
            job.stacktrace = _cap_stack(stack, job.stack_trace_limit)
        terminal = unrecoverable or attempts >= job.max_attempts
        if reason is None:
            reason = "max_attempts_exceeded" if terminal else "explicit_fail"
        self._record_failure(job, attempts, reason, error, now)
        entry: dict[str, Any] = {"state": states.FAILED_NAME, "timestamp": now}
        if error is not None:
            entry["error"] = error
        entry["attempt"] = attempts
        _timeline(job, entry)
        if terminal:
            self._fail_terminally(job, reason, error, now, remove)
        else:
            self._retry(q, job, attempts, now)
            self.counters.on_failed(job.queue, now, False)
        if self.events.wanted:
            self.events.failed(job, error, terminal)

    def _retry(self, q: QueueState, job: Job, attempts: int, now: float) -> None:
        # Back to waiting: the attempt's start time goes, as in the reference (GetJob shows null).
        job.started_at = math.nan
        job.run_at = now + retry_delay(job.backoff, job.backoff_config, attempts)
        _timeline(job, {"state": states.WAITING, "timestamp": now, "attempt": attempts + 1})
        self._enqueue(q, job, now)
        self.store.job_changed(job)

    def _record_failure(self, job: Job, attempt: int, reason: str, error: Any, now: float) -> None:
        started = None if math.isnan(job.started_at) else job.started_at
        self.failures.setdefault(job.id, []).append(
            {
                "attempt": attempt,
                # A job that never ran (a discarded waiting job) reports its creation time.
                "startedAt": job.created_at if started is None else started,
                "failedAt": now,
                "reason": reason,
                "error": error,
                "duration": wire_number(now - started) if started is not None else 0,
            }
        )

    def _fail_terminally(self, job: Job, reason: str, error: Any, now: float, remove: bool) -> None:
        self._release_unique_key(job)
        self.counters.on_failed(job.queue, now, True)
        if remove or job.remove_on_fail:
            self._delete(job)
            return
        dead_letter(self, job, reason, error, now)

    # -- leases and connections --------------------------------------------------------------------

    def release_session(self, session: Session) -> int:
        """Requeue what a closed client held, without charging an attempt.

        A job whose lease was renewed is left to lease expiry: its worker may be heartbeating it from
        another connection.
        """
        self.workers.drop_session(session.key)
        self.events.unsubscribe(session)
        now = now_ms()
        released = 0
        for job_id in list(session.held):
            job = self.jobs.get(job_id)
            if job is None or job.state != states.ACTIVE:
                continue
            if job_id in self.leases and self.leases.renewals(job_id) > 0:
                job.holder = None
                continue
            q = self._leave_active(job)
            job.started_at = math.nan
            self._enqueue(q, job, now)
            self.store.job_changed(job)
            released += 1
        session.held.clear()
        return released

    # -- records -----------------------------------------------------------------------------------

    def _delete(self, job: Job) -> None:
        self._drop_from_memory(job)
        self.store.job_removed(job.id)

    def _drop_from_memory(self, job: Job) -> None:
        job_id = job.id
        self.jobs.pop(job_id, None)
        self.results.pop(job_id, None)
        self.failures.pop(job_id, None)
        self.logs.pop(job_id, None)
        self.dlq.generations.pop(job_id, None)
        if self.job_waiters:
            settle_waiters(self.job_waiters, job_id, False)

    def _forget(self, job: Job) -> None:
        """Retire a finished generation whose custom id is being reused."""
        self.timeouts.retired.forget(job.id)
        if job.state == states.COMPLETED:
            self.completed.pop(job.id, None)
            self.queue(job.queue).forget_completed(job.id)
        elif job.state == states.FAILED:
            self.dlq.remove(job.queue, job.id)
            self.store.dlq_removed(job.queue, job.id)
        self._delete(job)

    def _add_proof(self, job_id: str) -> None:
        proofs = self.completion_proofs
        proofs[job_id] = None
        if len(proofs) > self.max_completed_jobs:
            proofs.popitem(last=False)

    def _evict_completed(self) -> None:
        """Forget the oldest tenth of the completed jobs kept in memory."""
        for _ in range(max(1, self.max_completed_jobs // 10)):
            if not self.completed:
                break
            job_id, _ = self.completed.popitem(last=False)
            job = self.jobs.get(job_id)
            if job is not None:
                # Only the memory copy goes: a durable store keeps the completed row (and its count).
                q = self.queue(job.queue)
                if self.store.persistent:
                    q.completed.pop(job_id, None)
                else:
                    q.forget_completed(job_id)
                self._drop_from_memory(job)
            self._add_proof(job_id)

    def find_job(self, job_id: Any) -> Job | None:
        """A job by id: in memory, or (a completed job evicted from memory) in the durable store."""
        if type(job_id) is not str:
            return None
        job = self.jobs.get(job_id)
        if job is None and self.store.persistent:
            found = self.store.load_job(job_id)
            if found is not None:
                job = found[0]
        return job

    def find_result(self, job_id: Any) -> tuple[bool, Any]:
        """(stored, value) of a job's result, looking in the durable store for evicted jobs."""
        if type(job_id) is not str:
            return False, None
        if job_id in self.results:
            return True, self.results[job_id]
        if self.store.persistent and job_id not in self.jobs:
            found = self.store.load_job(job_id)
            if found is not None and found[2]:
                return True, found[1]
        return False, None

    @property
    def active_count(self) -> int:
        return sum(q.n_active for q in self.queues.values())


def _cap_stack(stack: Any, limit: Any) -> list[str] | None:
    if type(stack) is not list:
        return None
    lines = [line for line in stack[:100] if type(line) is str]
    cap = int(limit) if limit is not None else 10
    if cap <= 0:
        return None
    return lines[:cap]
