# cython: freethreading_compatible = False
"""Batch admission for PUSHB: a request's job maps built, and its plain jobs queued, in compiled loops."""
from bunqueue._core.jobs cimport Job
from bunqueue._core.jobfactory cimport JobFactory
from bunqueue._core.readyqueue cimport ReadyQueue

from bunqueue import errors
from bunqueue._core.jobs import NO_DATA
from bunqueue._core.jobfactory import data_too_large
from bunqueue.errors import CommandError


def build_batch(JobFactory factory, list items, str queue, double now, bint check_size):
    """The validated jobs of a PUSHB's ``jobs`` array, in order; the first bad map raises a CommandError
    that names its position. ``check_size``: also refuse job data over the JSON size limit."""
    cdef list jobs = []
    cdef Py_ssize_t i
    cdef Job job
    for i in range(len(items)):
        opts = items[i]
        if type(opts) is not dict:
            raise CommandError(errors.batch_item(i, errors.must_be_object("job")))
        try:
            job = factory.build(<dict>opts, queue, now, True)
            if check_size and job.data is not NO_DATA and data_too_large(job.data):
                raise CommandError(errors.JOB_DATA_TOO_LARGE)
        except CommandError as exc:
            raise CommandError(errors.batch_item(i, exc.message)) from None
        jobs.append(job)
    return jobs


def needing_checks(list jobs):
    """Positions of the jobs a batch checks against the broker before admitting any: those with a custom
    id, a unique key, dependencies, a repeat, a group or a parent."""
    cdef list out = []
    cdef Py_ssize_t i
    cdef Job job
    for i in range(len(jobs)):
        job = <Job?>jobs[i]
        if (job.custom_id is not None or job.unique_key is not None or job.pending_deps is not None
                or job.repeat is not None or job.group_id is not None or job.parent_id is not None):
            out.append(i)
    return out


def admit_ready(list jobs, Py_ssize_t start, dict index, ReadyQueue ready, double now, int ready_state,
                dict waiting, dict prioritized, object job_added, list ids):
    """Admit ``jobs[start:]`` in order up to the first that is not plain, and return (where it stopped,
    how many of the admitted jobs have a priority).

    A plain job is ready at once and has no custom id, unique key, dependencies or group: it goes into
    ``index`` and ``ready``, takes ``ready_state``, a timeline of the entry ``prioritized`` or ``waiting``
    that it shares with the others (``Job.note`` copies it before it changes), and is passed to
    ``job_added`` (None: a store that keeps nothing, spared a call per job); its id is appended to
    ``ids``. The caller admits the job it stopped at through the full path, and counts and wakes for the
    ones admitted here.
    """
    cdef Py_ssize_t i
    cdef Py_ssize_t n_prioritized = 0
    cdef Job job
    cdef list waiting_timeline = [waiting]
    cdef list prioritized_timeline = [prioritized]
    for i in range(start, len(jobs)):
        job = <Job?>jobs[i]
        if (job.custom_id is not None or job.unique_key is not None or job.pending_deps is not None
                or job.group_id is not None or job.run_at > now):
            return i, n_prioritized
        index[job.id] = job
        ready.add(job.id, job.priority, job.lifo, job.run_at, job.seq)
        job.state = ready_state
        if job.priority > 0:
            n_prioritized += 1
            job.timeline = prioritized_timeline
        else:
            job.timeline = waiting_timeline
        job.timeline_shared = True
        if job_added is not None:
            job_added(job)
        ids.append(job.id)
    return len(jobs), n_prioritized
