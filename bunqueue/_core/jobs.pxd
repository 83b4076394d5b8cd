# The per-job path of PUSH and PUSHB: option validation, the job record and its wire form.
#
# It runs once for every job a producer sends, so PUSHB throughput is decided here. Validation is written
# as straight-line typed code over the request dict; the wire form is built once, at admission, as a dict
# in the reference's key order, so that every later PULL packs it with no per-field work.


cdef class Job:
    # The job exactly as the wire shows it (PULL, PULLB, Dlq send it unchanged). The broker mutates it
    # in place on each transition; nothing here is a copy of it except the typed scheduling keys below.
    cdef public dict wire
    cdef public str id
    cdef public str queue
    # Scheduling keys mirrored from `wire` as C values, because the ready queue and the delayed heap
    # read them on every push and pull.
    cdef public double priority
    cdef public double run_at
    cdef public bint lifo
    # Admission order: breaks FIFO ties the way UUIDv7 ids would, and keeps custom ids in push order.
    cdef public unsigned long long seq
    # One of the STATE_* codes of the broker; the public state name is derived from it.
    cdef public int state
    cdef public object group_id
    # The pending-depth cap this push asked for (groupMaxSize), checked once at admission.
    cdef public object group_max_size
    cdef public object unique_key
    cdef public object custom_id
    # Unresolved dependencies (ids), or None when the job was admitted ready.
    cdef public object pending_deps
    # Who holds the job while it is active: the connection key that pulled it, or None (detached or
    # released), so that a closed connection returns exactly its own jobs.
    cdef public object holder
    cdef public double started_at


cdef class JobFactory:
    # The only source of job ids and admission sequence numbers.
    cdef unsigned long long _seq
    cdef object _uuid7

    cpdef Job build(self, dict opts, str queue, double now, bint batch)
    cpdef str new_token(self)
