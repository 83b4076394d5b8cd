# cython: freethreading_compatible = False
"""A job's record: its fields typed, its wire form (``to_dict``), its storage row (``to_record``) and the
way back from both. Building a record from a push's options is ``jobfactory``'s business."""
cimport cython
from libc.math cimport NAN, isnan

from bunqueue._core.wire cimport is_wire_integer

DEFAULT_BACKOFF = 1000
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_STACK_TRACE_LIMIT = 10
# Bumped when the layout of Job.to_record() changes; a store refuses records it does not know.
RECORD_VERSION = 1
# Timeline entries a job keeps: the newest, as in the reference.
TIMELINE_CAP = 20

cdef tuple _EMPTY = ()


class _NoData:
    """The payload of a job pushed without ``data`` (JS ``undefined``)."""

    __slots__ = ()

    def __repr__(self):
        return "NO_DATA"


NO_DATA = _NoData()


cdef inline double _double_or_nan(object value):
    return NAN if value is None else <double>value


cdef inline object _nullable(double value):
    return None if isnan(value) else wire_number(value)


@cython.no_gc
cdef class Job:
    # Never part of a reference cycle (it points at plain data and at its holder's set of ids), so the
    # cyclic collector need not visit the hundreds of thousands a busy broker holds.

    def to_dict(self):
        """The wire form as a dict, in the reference's key order."""
        out = {"id": self.id, "queue": self.queue, "name": self.name}
        if self.data is not NO_DATA:
            out["data"] = self.data
        out["createdAt"] = wire_number(self.created_at)
        out["runAt"] = wire_number(self.run_at)
        out["startedAt"] = _nullable(self.started_at)
        out["completedAt"] = _nullable(self.completed_at)
        out["attempts"] = self.attempts
        out["backoff"] = self.backoff
        out["backoffConfig"] = self.backoff_config
        out["dependsOn"] = list(self.depends_on)
        out["childrenIds"] = list(self.children_ids)
        out["childrenCompleted"] = self.children_completed
        out["tags"] = list(self.tags)
        out["progress"] = self.progress
        out["progressMessage"] = self.progress_message
        out["stacktrace"] = self.stacktrace
        out["repeat"] = self.repeat
        out["durable"] = self.durable
        out["lastHeartbeat"] = wire_number(self.last_heartbeat)
        out["stallCount"] = self.stall_count
        out["priority"] = wire_number(self.priority)
        out["lifo"] = self.lifo
        out["maxAttempts"] = self.max_attempts
        out["removeOnComplete"] = self.remove_on_complete
        out["removeOnFail"] = self.remove_on_fail
        out["ttl"] = self.ttl
        out["timeout"] = self.timeout
        out["uniqueKey"] = self.unique_key
        out["customId"] = self.custom_id
        out["parentId"] = self.parent_id
        out["groupId"] = self.group_id
        out["stallTimeout"] = self.stall_timeout
        out["stackTraceLimit"] = self.stack_trace_limit
        out["keepLogs"] = self.keep_logs
        out["sizeLimit"] = self.size_limit
        out["failParentOnFailure"] = self.fail_parent_on_failure
        out["removeDependencyOnFailure"] = self.remove_dependency_on_failure
        out["continueParentOnFailure"] = self.continue_parent_on_failure
        out["ignoreDependencyOnFailure"] = self.ignore_dependency_on_failure
        out["deduplicationTtl"] = self.deduplication_ttl
        out["deduplicationExtend"] = self.deduplication_extend
        out["deduplicationReplace"] = self.deduplication_replace
        out["debounceId"] = self.debounce_id
        out["debounceTtl"] = self.debounce_ttl
        out["timeline"] = self.timeline
        return out

    @staticmethod
    def from_wire(dict wire, unsigned long long seq, int state):
        """A job rebuilt from its wire form (what ``to_dict()`` gives, and what the Bun original stores of
        a job), with the bookkeeping the wire form does not carry: admission order and home."""
        cdef Job job = Job.__new__(Job)
        job.id = wire["id"]
        job.queue = wire["queue"]
        job.name = wire["name"]
        job.data = wire.get("data", NO_DATA)
        job.created_at = wire["createdAt"]
        job.run_at = wire["runAt"]
        job.started_at = _double_or_nan(wire.get("startedAt"))
        job.completed_at = _double_or_nan(wire.get("completedAt"))
        job.attempts = wire.get("attempts", 0)
        job.backoff = wire.get("backoff", DEFAULT_BACKOFF)
        job.backoff_config = wire.get("backoffConfig")
        job.depends_on = list(wire.get("dependsOn") or _EMPTY) or _EMPTY
        job.children_ids = list(wire.get("childrenIds") or _EMPTY) or _EMPTY
        job.children_completed = wire.get("childrenCompleted", 0)
        job.tags = list(wire.get("tags") or _EMPTY) or _EMPTY
        job.progress = wire.get("progress", 0)
        job.progress_message = wire.get("progressMessage")
        job.stacktrace = wire.get("stacktrace")
        job.repeat = wire.get("repeat")
        job.durable = wire.get("durable", False)
        job.last_heartbeat = wire.get("lastHeartbeat", job.created_at)
        job.stall_count = wire.get("stallCount", 0)
        job.priority = wire.get("priority", 0)
        job.lifo = wire.get("lifo", False)
        job.max_attempts = wire.get("maxAttempts", DEFAULT_MAX_ATTEMPTS)
        job.remove_on_complete = wire.get("removeOnComplete", False)
        job.remove_on_fail = wire.get("removeOnFail", False)
        job.ttl = wire.get("ttl")
        job.timeout = wire.get("timeout")
        job.unique_key = wire.get("uniqueKey")
        job.custom_id = wire.get("customId")
        job.parent_id = wire.get("parentId")
        job.group_id = wire.get("groupId")
        job.stall_timeout = wire.get("stallTimeout")
        job.stack_trace_limit = wire.get("stackTraceLimit", DEFAULT_STACK_TRACE_LIMIT)
        job.keep_logs = wire.get("keepLogs")
        job.size_limit = wire.get("sizeLimit")
        job.fail_parent_on_failure = wire.get("failParentOnFailure", False)
        job.remove_dependency_on_failure = wire.get("removeDependencyOnFailure", False)
        job.continue_parent_on_failure = wire.get("continueParentOnFailure", False)
        job.ignore_dependency_on_failure = wire.get("ignoreDependencyOnFailure", False)
        job.deduplication_ttl = wire.get("deduplicationTtl")
        job.deduplication_extend = wire.get("deduplicationExtend", False)
        job.deduplication_replace = wire.get("deduplicationReplace", False)
        job.debounce_id = wire.get("debounceId")
        job.debounce_ttl = wire.get("debounceTtl")
        job.timeline = list(wire.get("timeline") or _EMPTY)[-TIMELINE_CAP:]
        job.seq = seq
        job.state = state
        job.pending_deps = None
        job.group_max_size = None
        job.holder = None
        return job

    def __repr__(self):
        return f"<Job {self.id} queue={self.queue} state={self.state}>"

    cpdef note(self, dict entry):
        """Add an entry to the timeline, which keeps the newest ``TIMELINE_CAP``. Entries are never changed
        once made, so one entry may be shared by the jobs of one pull."""
        if self.timeline_shared:
            self.timeline = list(self.timeline)
            self.timeline_shared = False
        cdef list timeline = self.timeline
        timeline.append(entry)
        if len(timeline) > TIMELINE_CAP:
            del timeline[0]

    def to_record(self):
        """Every field, wire and bookkeeping, as a flat tuple for a storage row (see ``from_record``)."""
        return (
            RECORD_VERSION, self.id, self.queue, self.name, self.data is not NO_DATA,
            None if self.data is NO_DATA else self.data, self.created_at, self.run_at, self.started_at,
            self.completed_at, self.attempts, self.backoff, self.backoff_config, list(self.depends_on),
            list(self.children_ids), self.children_completed, list(self.tags), self.progress,
            self.progress_message, self.stacktrace, self.repeat, self.durable, self.last_heartbeat,
            self.stall_count, self.priority, self.lifo, self.max_attempts, self.remove_on_complete,
            self.remove_on_fail, self.ttl, self.timeout, self.unique_key, self.custom_id, self.parent_id,
            self.group_id, self.stall_timeout, self.stack_trace_limit, self.keep_logs, self.size_limit,
            self.fail_parent_on_failure, self.remove_dependency_on_failure,
            self.continue_parent_on_failure, self.ignore_dependency_on_failure, self.deduplication_ttl,
            self.deduplication_extend, self.deduplication_replace, self.debounce_id, self.debounce_ttl,
            self.timeline, self.seq, self.state,
            None if self.pending_deps is None else list(self.pending_deps),
        )

    @staticmethod
    def from_record(record):
        """A job rebuilt from ``to_record()`` output (lists may come back as lists or tuples)."""
        if record[0] != RECORD_VERSION:
            raise ValueError(f"unknown job record version {record[0]!r}")
        cdef Job job = Job.__new__(Job)
        (_, job.id, job.queue, job.name, has_data, data, job.created_at, job.run_at, job.started_at,
         job.completed_at, job.attempts, job.backoff, job.backoff_config, depends_on, children_ids,
         job.children_completed, tags, job.progress, job.progress_message, job.stacktrace, job.repeat,
         job.durable, job.last_heartbeat, job.stall_count, job.priority, job.lifo, job.max_attempts,
         job.remove_on_complete, job.remove_on_fail, job.ttl, job.timeout, job.unique_key, job.custom_id,
         job.parent_id, job.group_id, job.stall_timeout, job.stack_trace_limit, job.keep_logs,
         job.size_limit, job.fail_parent_on_failure, job.remove_dependency_on_failure,
         job.continue_parent_on_failure, job.ignore_dependency_on_failure, job.deduplication_ttl,
         job.deduplication_extend, job.deduplication_replace, job.debounce_id, job.debounce_ttl,
         timeline, job.seq, job.state, pending) = record
        job.data = data if has_data else NO_DATA
        job.depends_on = list(depends_on) if depends_on else _EMPTY
        job.children_ids = list(children_ids) if children_ids else _EMPTY
        job.tags = list(tags) if tags else _EMPTY
        job.timeline = list(timeline) if timeline is not None else []
        job.pending_deps = set(pending) if pending else None
        job.group_max_size = None
        job.holder = None
        return job


cpdef object wire_number(double value):
    """A number as the JS encoder would put it on the wire.

    msgpackr writes an integral number in the int32/uint32 range as an integer and everything else as
    float64; a uint64 would reach JS clients as a BigInt and break their arithmetic.
    """
    if is_wire_integer(value):
        return <long long>value
    return value
