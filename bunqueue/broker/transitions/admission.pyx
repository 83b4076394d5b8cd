# cython: freethreading_compatible = False
"""Admission of one pushed job, compiled: the per-job half of every PUSH (``TransitionCore.admit``).

In the interpreter a plain push paid a call for each step (admit, enqueue, the queue's ready side, the
counters) and a descriptor lookup for every field of the record it read; here the record is typed and a
plain job (ready at once, no group) goes into its queue's heap in one function. A job with a custom id, a
unique key, dependencies or a run time ahead still takes the broker's own methods for those steps.
"""
from bunqueue._core.jobs cimport Job
from bunqueue._core.readyqueue cimport ReadyQueue

from bunqueue.broker import states
from bunqueue.broker.components import eventhub
from bunqueue.broker.transitions.moves import CHECKED, check_move

cdef int READY = states.READY
cdef int DELAYED = states.DELAYED
cdef frozenset LIVE = states.LIVE
cdef str WAITING = states.WAITING
cdef str PRIORITIZED = states.PRIORITIZED
cdef str DELAYED_NAME = states.DELAYED_NAME
cdef str WAITING_CHILDREN_NAME = states.WAITING_CHILDREN_NAME
cdef str PUSHED = eventhub.PUSHED


def admit(core, Job job not None, double now, q=None):
    """A validated new job enters (``Wiring.push``); the id the push answers: the job's own, or that of
    the live job its custom id or unique key already names."""
    cdef dict jobs = core.jobs
    cdef Job existing
    cdef str initial
    if job.custom_id is not None:
        existing = jobs.get(job.custom_id)
        if existing is not None:
            if existing.state in LIVE:
                return existing.id
            core.forget(existing)
    if job.unique_key is not None:
        owner = core._claim_key(job, now)
        if owner is not None:
            return owner
    if q is None:
        q = core.queues.of(job.queue)
    jobs[job.id] = job
    if job.pending_deps is not None and core.wait_for_dependencies(q, job):
        initial = WAITING_CHILDREN_NAME
    elif job.run_at > now or job.group_id is not None:
        core.enqueue(q, job, now)
        initial = DELAYED_NAME if job.state == DELAYED else PRIORITIZED if job.priority > 0 else WAITING
    else:
        # TransitionCore.enqueue and QueueState.add_ready, inlined for a job ready at once without a group.
        if CHECKED:
            check_move(job, READY)
        job.state = READY
        (<ReadyQueue?>q.ready).add(job.id, job.priority, job.lifo, job.run_at, job.seq)
        if job.priority > 0:
            q.n_prioritized += 1
            initial = PRIORITIZED
        else:
            q.n_waiting += 1
            initial = WAITING
        if q.waiters:
            q.wake(1)
    job.timeline = [{"state": initial, "timestamp": now}]
    job_added = core.job_added
    if job_added is not None:
        job_added(job)
    core.counters.on_pushed(job.queue)
    events = core.events
    if events.wanted:
        events.emit(job.queue, PUSHED, job.id)
    return job.id
