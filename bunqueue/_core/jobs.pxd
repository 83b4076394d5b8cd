# The job record, built by `bunqueue._core.jobfactory` from a push's options.
#
# One lives for every job the broker holds, so its layout decides memory per job. A job is a typed
# record, not a dict: about a fifth of the memory of the 47-key wire dict, and no dict to build at
# admission. `bunqueue._core.packer` writes its wire form (the reference's keys, in the reference's order)
# straight from these fields; `to_dict()` builds the same thing as a dict for the rare paths that need one.


cdef class Job:
    # -- the wire fields, in wire order ----------------------------------------------------------
    cdef readonly str id
    cdef readonly str queue
    cdef public str name
    # The user payload, untouched; NO_DATA when the client sent none (JS `undefined`: key left out).
    cdef public object data
    cdef public double created_at
    cdef public double run_at
    # Times that may be null are NaN when null.
    cdef public double started_at
    cdef public double completed_at
    cdef public long long attempts
    # Both as the client gave them: the base delay (a wire number) and the object form or None.
    cdef public object backoff
    cdef public object backoff_config
    cdef public object depends_on
    cdef public object children_ids
    cdef public long long children_completed
    cdef public object tags
    cdef public object progress
    cdef public object progress_message
    cdef public object stacktrace
    cdef public object repeat
    cdef public bint durable
    cdef public double last_heartbeat
    cdef public long long stall_count
    cdef public double priority
    cdef public bint lifo
    cdef public long long max_attempts
    cdef public bint remove_on_complete
    cdef public bint remove_on_fail
    cdef public object ttl
    cdef public object timeout
    cdef public object unique_key
    cdef public object custom_id
    cdef public object parent_id
    cdef public object group_id
    cdef public object stall_timeout
    cdef public object stack_trace_limit
    cdef public object keep_logs
    cdef public object size_limit
    cdef public bint fail_parent_on_failure
    cdef public bint remove_dependency_on_failure
    cdef public bint continue_parent_on_failure
    cdef public bint ignore_dependency_on_failure
    cdef public object deduplication_ttl
    cdef public bint deduplication_extend
    cdef public bint deduplication_replace
    cdef public object debounce_id
    cdef public object debounce_ttl
    cdef public list timeline

    # -- broker bookkeeping, never on the wire ---------------------------------------------------
    # Admission order: breaks FIFO ties the way UUIDv7 ids would, and keeps custom ids in push order.
    cdef public unsigned long long seq
    # One of the broker's home codes (ready, delayed, active, ...); public state names derive from it.
    cdef public int state
    # Whether ``timeline`` is the list that the plain jobs of one PUSHB share until one of them changes
    # state (``note`` copies it first): a list per job would cost an allocation and the collector's visits.
    cdef bint timeline_shared
    # The pending-depth cap this push asked for (groupMaxSize), checked once at admission.
    cdef public object group_max_size
    # Unresolved dependency ids, or None when the job was admitted ready.
    cdef public object pending_deps
    # While active: the holding client's set of held job ids (so release and completion are O(1)),
    # or None when detached.
    cdef public object holder

    # Adds a timeline entry (the newest TIMELINE_CAP are kept); compiled transitions call it directly.
    cpdef note(self, dict entry)


# A number as msgpackr puts it on the wire: integral int32/uint32 values as integers, the rest as float64.
cpdef object wire_number(double value)
