# cython: freethreading_compatible = False
"""Leaving active and completing, compiled: the per-job half of every ACK and ACKB, and the look-up of the
running attempt an ACK or FAIL names.

``TransitionCore.leave_active`` and ``complete_jobs`` are these functions. In the interpreter each job of a
batch paid a descriptor lookup for every field of its record it read (a dozen and more) and the loop's own
bytecode; here the record is typed, its fields are struct reads, and only the broker's components are
reached through Python calls, most of them only when a job has the feature (a unique key, a parent, a
repeat, waiters on its result).
"""
from bunqueue._core.jobs cimport Job
from bunqueue._core.leases cimport LeaseTable, _Lease

from bunqueue import errors
from bunqueue.broker import states
from bunqueue.broker.components import eventnames
from bunqueue.broker.components.records import settle_waiters
from bunqueue.broker.states import COMPLETED, COMPLETED_NAME
from bunqueue.broker.transitions.moves import CHECKED, check_move
from bunqueue.errors import CommandError

cdef int ACTIVE = states.ACTIVE


def active_job(dict jobs not None, LeaseTable leases not None, job_id, token):
    """The running job an ACK or FAIL names, if the token (when it holds a lease) is its lease's (bound as
    the broker's ``active_job``, on its job table and lease table)."""
    cdef Job job = None
    cdef _Lease lease
    if type(job_id) is str:
        job = jobs.get(job_id)
    if job is None or job.state != ACTIVE:
        raise CommandError(errors.not_processing(job_id))
    lease = leases._lease_of_id.get(job_id)
    if lease is not None:
        if token is None:
            raise CommandError(errors.lock_token_required(job_id))
        if token != lease.token:
            raise CommandError(errors.invalid_lock_token(job_id))
    return job


cdef object _leave(core, leases, queues, Job job):
    """The one way out of active: lease, holder, counters, stall and timeout checks, unique key."""
    cdef str job_id = job.id
    leases.release(job_id)
    holder = job.holder
    if holder is not None:
        holder.discard(job_id)
        job.holder = None
    q = queues[job.queue]
    q.n_active -= 1
    del q.active[job_id]
    watch = q.stall_watch
    if watch:
        watch.pop(job_id, None)
    if core.stall_checks:
        core.stalls.forget(job_id)
    if core.timeout_deadlines:
        core.timeouts.forget(job_id)
    # Every way out of active frees the job's unique key, as in the reference (a retry included).
    if job.unique_key is not None:
        core.keys.release(job)
    limited = q.limits
    if limited is not None and limited.concurrency is not None and q.waiters:
        # A concurrency slot opened.
        q.wake(1)
    if job.group_id is not None and q.groups.release(job.group_id, core.clock()) and q.waiters:
        # The group has jobs waiting and one slot fewer taken: a pull may now claim from it.
        q.wake(1)
    return q


def leave_active(core, Job job not None):
    """``job`` leaves active; its queue's state is returned."""
    return _leave(core, core.leases, core.queues, job)


def complete_active(core, Job job not None, result, bint has_result, bint remove):
    """ACK of ``job``'s running attempt (bound as the broker's ``ack``: no Python frame in between)."""
    _complete_jobs(core, [job], [result] if has_result else None, remove, None)


def complete_jobs(core, list jobs not None, list results, bint remove, q):
    """Complete ``jobs`` in order: running attempts, each leaving active first (ACK, ACKB), or, with ``q``,
    jobs that already left it. ``results``: one per job, None when none was sent. What every job of the
    batch reaches is looked up once, and the completions are counted once per queue."""
    _complete_jobs(core, jobs, results, remove, q)


cdef _complete_jobs(core, list jobs, list results, bint remove, q):
    cdef Py_ssize_t i
    cdef Job job
    cdef double now = core.clock()
    cdef bint has_result = results is not None
    cdef dict counted = {}
    cdef str job_id
    records = core.records
    store = core.store
    job_changed = core.job_changed
    events = core.events
    dependents = core.dependents
    retention = core.retention
    keys = core.keys
    leases = core.leases
    queues = core.queues
    completed = records.completed
    # One entry for every job of the batch, as for a pull: entries are never changed once made.
    done = {"state": COMPLETED_NAME, "timestamp": now}
    result = None
    for i in range(len(jobs)):
        job = <Job?>jobs[i]
        queue = _leave(core, leases, queues, job) if q is None else q
        if has_result:
            result = results[i]
        if job.unique_key is not None:
            keys.release(job)
        job_id = job.id
        if records.waiters:
            settle_waiters(records.waiters, job_id, True)
        if remove or job.remove_on_complete:
            if has_result and job.parent_id is not None:
                records.keep_for_parent(job, result)
            records.delete(job)
            records.add_proof(job_id)
        else:
            if CHECKED:
                check_move(job, COMPLETED)
            job.state = COMPLETED
            job.completed_at = now
            job.note(done)
            if job_changed is not None:
                job_changed(job)
            if has_result:
                records.results[job_id] = result
                store.result_stored(job_id, result)
            # QueueState.note_completed, inlined.
            queue.completed[job_id] = None
            queue.n_completed += 1
            completed[job_id] = None
            if retention.age_ms is not None:
                retention.completed(job_id, now)
            if len(completed) > records.max_completed_jobs:
                records.evict_completed()
        counted[job.queue] = counted.get(job.queue, 0) + 1
        if events.wanted:
            events.completed(job, result, has_result)
        if job_id in dependents:
            core.release_dependents(job_id, now)
        if job.parent_id is not None and events.notices and core.flows is not None:
            finished = core.flows.finished_flow(job.parent_id)
            if finished is not None:
                events.notify(eventnames.FLOW_COMPLETED, finished)
        if job.repeat is not None and core.repeats is not None:
            core.repeats.completed(job, now)
        if job.children_ids and core.flows is not None:
            core.flows.forget_parent(job_id)
    counters = core.counters
    for name, n in counted.items():
        counters.on_completed(name, now, n)
