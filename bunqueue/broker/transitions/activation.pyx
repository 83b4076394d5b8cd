# cython: freethreading_compatible = False
"""Activation, compiled: the per-job half of every PULL and PULLB.

The broker's ``pull`` is this function, bound to its ``TransitionCore`` (``Wiring``). As for completion
(``completion.pyx``), the job record is typed, so reading and setting its fields costs no descriptor
lookups, the loop runs without the interpreter, and the lease token comes from the factory's compiled id
source without a Python call.
"""
from bunqueue._core.jobs cimport Job
from bunqueue._core.jobfactory cimport JobFactory
from bunqueue._core.readyqueue cimport ReadyQueue

from bunqueue.broker import states
from bunqueue.broker.components import eventhub, eventnames
from bunqueue.broker.timers import ratelimits
from bunqueue.broker.timers.deadlines import LEASES
from bunqueue.broker.transitions.moves import CHECKED, check_move

cdef int ACTIVE = states.ACTIVE
cdef str ACTIVE_NAME = states.ACTIVE_NAME


def activate(core, q, Py_ssize_t count, session, owner, double lock_ttl, bint detach, claim=None):
    """PULL: up to ``count`` ready jobs become active; with an owner each gets a lease token. Returns the
    jobs and the tokens (None without an owner). ``claim``: the pull's group defaults and lane affinity."""
    cdef list tokens = [] if owner is not None else None
    cdef list out = []
    cdef Job job
    cdef JobFactory factory = core.factory
    cdef double now
    cdef bint watch_was_empty
    cdef dict started = None
    if q.paused:
        return out, tokens
    now = core.clock()
    due = q.delayed.peek_time()
    if due is not None and due <= now:
        core.promote_due(q, now)
    if q.limits is not None:
        count = ratelimits.admit(core.limit_controls, q, count, now)
    cdef dict jobs = core.jobs
    cdef ReadyQueue ready = q.ready
    held = session.held if session is not None and (owner is not None or not detach) else None
    watch = q.stall_watch
    watch_was_empty = watch is not None and not watch
    job_activated = core.job_activated
    leases = core.leases
    active = q.active
    while len(out) < count:
        # Most pulls name no group: the ungrouped heap first, without a call to learn that.
        job_id = ready.pop() if claim is None else None
        if job_id is None:
            job_id = q.pop_ready(now, claim)
            if job_id is None:
                if q.groups.retry_at:
                    # Every lane with jobs is held back by a window or deadline: wake long-pollers then.
                    core.groups.wait(q.name, q.groups.retry_at)
                break
        job = <Job>jobs[job_id]
        # QueueState.took, inlined: this runs once for every pulled job.
        if job.priority > 0:
            q.n_prioritized -= 1
        else:
            q.n_waiting -= 1
        ttl = job.ttl
        if ttl is not None and now > job.created_at + ttl:
            # Past its ttl: dropped when a pull meets it, never delivered, no DLQ.
            if job.group_id is not None:
                q.groups.unclaim(job.group_id, now)
            core.remove(job)
            if core.events.notices:
                core.events.notify(eventnames.JOB_EXPIRED, {
                    "queue": q.name, "jobId": job_id, "ttl": ttl, "age": now - job.created_at})
            continue
        if CHECKED:
            check_move(job, ACTIVE)
        job.state = ACTIVE
        job.started_at = now
        job.last_heartbeat = now
        # One entry for every job of this pull: entries are never changed once made.
        if started is None:
            started = {"state": ACTIVE_NAME, "timestamp": now}
        job.note(started)
        active[job_id] = None
        if job.stall_timeout is None:
            if watch is not None:
                watch[job_id] = None
        elif watch is not None:
            core.stalls.watch_job(job, now)
        if job.timeout:
            core.timeouts.started(job, now)
        if tokens is not None:
            token = factory.new_token()
            leases.grant(job_id, token, owner, now, lock_ttl)
            tokens.append(token)
        if held is not None:
            held.add(job_id)
            job.holder = held
        if job_activated is not None:
            job_activated(job)
        out.append(job)
    if out:
        q.n_active += len(out)
        if tokens:
            core.alarms.arm(LEASES, now + lock_ttl)
        _announce(core, q, out, now, watch_was_empty, watch)
    return out, tokens


cdef _announce(core, q, list out, double now, bint watch_was_empty, watch):
    """What a pull tells besides its reply: counters, events, rate limits, the stall watch."""
    core.counters.on_pulled(q.name, len(out))
    events = core.events
    if events.wanted:
        for job in out:
            events.emit(q.name, eventhub.PULLED, (<Job>job).id)
    if len(out) > 1 and events.notices:
        events.notify(eventnames.BATCH_PULLED, {"queue": q.name, "count": len(out)})
    if q.limits is not None:
        ratelimits.took(q, len(out))
    if watch_was_empty and watch:
        core.stalls.watch_queue(q, now)
