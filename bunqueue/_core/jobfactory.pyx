# cython: freethreading_compatible = False
"""The per-job push path: validate a job's options and build its record (``JobFactory``)."""
import json
import re

from libc.math cimport NAN, ceil, floor, isfinite, isnan

from bunqueue._core.jobs cimport Job, wire_number
from bunqueue._core.uuidv7 cimport UuidV7Source

from bunqueue import errors
from bunqueue._core.jobs import DEFAULT_BACKOFF as _DEFAULT_BACKOFF
from bunqueue._core.jobs import DEFAULT_MAX_ATTEMPTS as _DEFAULT_MAX_ATTEMPTS
from bunqueue._core.jobs import DEFAULT_STACK_TRACE_LIMIT as _DEFAULT_STACK_TRACE_LIMIT
from bunqueue._core.jobs import NO_DATA as _NO_DATA
from bunqueue.errors import CommandError

MAX_DURATION = 4.32e15
MAX_GROUP_PRIORITY = 2097151
MAX_ATTEMPTS = 2147483647
MAX_MAX_DELAY = 86400000
MAX_DATA_JSON = 10 * 1024 * 1024
MAX_NAME = 256
MAX_SAFE_INTEGER = 9007199254740991.0

cdef double _MAX_DURATION = MAX_DURATION
cdef int _MAX_VALUE_DEPTH = errors.MAX_VALUE_DEPTH
cdef Py_ssize_t MAX_TAG = errors.MAX_TAG_CHARS

_QUEUE_NAME = re.compile(r"[a-zA-Z0-9_\-.:]+\Z")
# Queue names repeat on every command; remembering the valid ones skips the regex on the hot path.
cdef set _valid_queues = set()


def validate_queue_name(name):
    if type(name) is str and name in _valid_queues:
        return name
    if name is None or name == "":
        raise CommandError(errors.QUEUE_REQUIRED)
    if type(name) is not str:
        raise CommandError(errors.QUEUE_NOT_STRING)
    if len(name) > 256:
        raise CommandError(errors.QUEUE_TOO_LONG)
    if _QUEUE_NAME.match(name) is None:
        raise CommandError(errors.QUEUE_INVALID_CHARS)
    if len(_valid_queues) < 65536:
        _valid_queues.add(name)
    return name


cdef double _number(object value, str field) except? -1.5:
    """A numeric option as a double: numbers as given, numeric strings as their number."""
    cdef type t = type(value)
    if t is float:
        return <double>value
    if t is int:
        return <double>value
    if t is str:
        text = (<str>value).strip()
        if text:
            try:
                return float(text)
            except ValueError:
                pass
    raise CommandError(errors.must_be_number(field))


cdef double _finite(object value, str field) except? -1.5:
    cdef double d = _number(value, field)
    if not isfinite(d):
        raise CommandError(errors.must_be_finite(field))
    return d


cdef double _duration(object value, str field, bint non_negative) except? -1.5:
    cdef double d = _finite(value, field)
    if non_negative and d < 0:
        raise CommandError(errors.must_be_at_least(field, 0))
    if d > _MAX_DURATION:
        return _MAX_DURATION
    if d < -_MAX_DURATION:
        return -_MAX_DURATION
    return d


def finite_option(dict opts, str field):
    """A finite numeric option or None when absent (shared with the command handlers)."""
    value = opts.get(field)
    if value is None:
        return None
    return _finite(value, field)


cdef object _max_attempts(object value):
    if value is None:
        return _DEFAULT_MAX_ATTEMPTS
    cdef double d = _number(value, "maxAttempts")
    if isnan(d):
        raise CommandError(errors.must_be_finite("maxAttempts"))
    # 1 or less runs once; a fraction rounds up; Infinity is the int32 ceiling.
    if d <= 1:
        return 1
    if d >= MAX_ATTEMPTS:
        return MAX_ATTEMPTS
    return <long long>ceil(d)


cdef tuple _backoff(object value):
    """(base delay, backoffConfig) from the number or the object form."""
    if value is None:
        return _DEFAULT_BACKOFF, None
    if type(value) is not dict:
        return wire_number(_duration(value, "backoff", True)), None
    cdef dict spec = <dict>value
    kind = "fixed" if spec.get("type") == "fixed" else "exponential"
    delay_value = spec.get("delay")
    delay = _DEFAULT_BACKOFF if delay_value is None else wire_number(
        _duration(delay_value, "backoff.delay", True))
    config = {"type": kind, "delay": delay}
    max_delay = spec.get("maxDelay")
    if max_delay is not None:
        d = _finite(max_delay, "backoff.maxDelay")
        if d < 0:
            raise CommandError(errors.must_be_at_least("backoff.maxDelay", 0))
        if d > MAX_MAX_DELAY:
            raise CommandError(errors.must_be_at_most("backoff.maxDelay", MAX_MAX_DELAY))
        config["maxDelay"] = wire_number(d)
    return delay, config


cdef object _optional_finite(dict opts, str field):
    value = opts.get(field)
    if value is None:
        return None
    return wire_number(_finite(value, field))


cdef object _optional_duration(dict opts, str field, bint non_negative):
    value = opts.get(field)
    if value is None:
        return None
    return wire_number(_duration(value, field, non_negative))


cdef bint _flag(dict opts, str field) except -1:
    value = opts.get(field)
    if value is None or value is False:
        return False
    if value is True:
        return True
    raise CommandError(errors.must_be_boolean(field))


cdef object _string(dict opts, str field):
    value = opts.get(field)
    if value is None or value == "":
        return None
    if type(value) is not str:
        raise CommandError(errors.must_be_string(field))
    return value


cdef list _string_list(dict opts, str field):
    value = opts.get(field)
    if value is None:
        return None
    if type(value) is not list:
        raise CommandError(errors.must_be_string_array(field))
    for item in <list>value:
        if type(item) is not str:
            raise CommandError(errors.must_be_string_array(field))
    return list(<list>value)


cdef list _tags(dict opts):
    """``tags``: an array of strings of at most 256 characters each (no cap on how many)."""
    value = opts.get("tags")
    if value is None:
        return None
    if type(value) is not list:
        raise CommandError(errors.TAGS_INVALID)
    for item in <list>value:
        if type(item) is not str or len(<str>item) > MAX_TAG:
            raise CommandError(errors.TAGS_INVALID)
    return list(<list>value)


cdef tuple _name_and_data(dict opts):
    """Protocol v3 name, or the legacy envelope: a string ``data.name`` when no top-level name is sent."""
    if "name" in opts:
        name = opts["name"]
        data = opts.get("data", _NO_DATA)
    else:
        data = opts.get("data", _NO_DATA)
        name = "default"
        if type(data) is dict:
            legacy = (<dict>data).get("name")
            if type(legacy) is str:
                name = legacy
                data = {k: v for k, v in (<dict>data).items() if k != "name"}
    if type(name) is not str or not (0 < len(<str>name) <= MAX_NAME):
        raise CommandError(errors.JOB_NAME_INVALID)
    return name, data


cdef bint _nests_deeper(object value, int levels) except -1:
    """Whether `value` holds containers nested more than `levels` deep (a scalar nests 0 levels)."""
    cdef type t = type(value)
    if t is dict:
        if levels == 0:
            return True
        for k, v in (<dict>value).items():
            if _nests_deeper(k, levels - 1) or _nests_deeper(v, levels - 1):
                return True
    elif t is list or t is tuple:
        if levels == 0:
            return True
        for item in value:
            if _nests_deeper(item, levels - 1):
                return True
    return False


def check_nesting(value, str field):
    """Refuse a value to keep (job data, a result) that nests deeper than every reply can carry it."""
    if _nests_deeper(value, _MAX_VALUE_DEPTH):
        raise CommandError(errors.nested_too_deeply(field))


def flag_option(dict opts, str field):
    """A boolean option, False when absent (shared with the command handlers)."""
    return _flag(opts, field)


def id_option(dict opts, str field):
    """An optional id: absent or empty means none (shared with the command handlers)."""
    return _string(opts, field)


def data_too_large(data):
    """Whether the payload is over 10 MB as JSON, the size the reference measures."""
    try:
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=_json_fallback)
    except (TypeError, ValueError):
        return False
    return len(text) > MAX_DATA_JSON


def _json_fallback(value):
    if isinstance(value, (bytes, bytearray)):
        return list(value)
    return None


cdef object _group(dict opts, double *priority):
    """The group id, checking the intra-group priority rules (integer 0..2097151, lower first)."""
    group_id = opts.get("groupId")
    if group_id is None:
        return None
    if type(group_id) is not str:
        raise CommandError(errors.must_be_string("groupId"))
    if not group_id:
        raise CommandError(errors.must_be_non_empty_string("groupId"))
    if len(<str>group_id) > MAX_NAME:
        raise CommandError(errors.must_be_at_most_chars("groupId", MAX_NAME))
    cdef double p = priority[0]
    if p != floor(p):
        raise CommandError(errors.GROUP_PRIORITY_INTEGER)
    if p < 0 or p > MAX_GROUP_PRIORITY:
        raise CommandError(errors.GROUP_PRIORITY_RANGE)
    return group_id


cdef object _group_max_size(dict opts):
    value = opts.get("groupMaxSize")
    if value is None:
        return None
    cdef double d
    try:
        d = _number(value, "groupMaxSize")
    except CommandError:
        raise CommandError(errors.GROUP_MAX_SIZE)
    if not (isfinite(d) and d >= 1 and d == floor(d) and d <= MAX_SAFE_INTEGER):
        raise CommandError(errors.GROUP_MAX_SIZE)
    return <long long>d


cdef object _repeat(dict opts):
    value = opts.get("repeat")
    if value is None:
        return None
    if type(value) is not dict:
        raise CommandError(errors.REPEAT_SHAPE)
    cdef dict spec = <dict>value
    every = spec.get("every")
    pattern = spec.get("pattern")
    if (every is None) == (pattern is None):
        raise CommandError(errors.REPEAT_SHAPE)
    out = {}
    if every is not None:
        d = _number(every, "repeat.every")
        if not (isfinite(d) and d > 0):
            raise CommandError(errors.REPEAT_EVERY)
        out["every"] = wire_number(d)
    else:
        if type(pattern) is not str or not pattern:
            raise CommandError(errors.must_be_non_empty_string("repeat.pattern"))
        out["pattern"] = pattern
    for field in ("limit", "count", "startDate", "endDate"):
        if spec.get(field) is not None:
            out[field] = wire_number(_finite(spec[field], "repeat." + field))
    if spec.get("tz") is not None:
        if type(spec["tz"]) is not str:
            raise CommandError(errors.must_be_string("repeat.tz"))
        out["tz"] = spec["tz"]
    if spec.get("immediately") is not None:
        out["immediately"] = bool(spec["immediately"])
    return out


cdef object _dedup(dict opts, Job job):
    value = opts.get("dedup")
    if value is None:
        return
    if type(value) is not dict:
        raise CommandError(errors.must_be_object("dedup"))
    cdef dict spec = <dict>value
    if spec.get("ttl") is not None:
        job.deduplication_ttl = wire_number(_duration(spec["ttl"], "dedup.ttl", True))
    job.deduplication_extend = _flag(spec, "extend")
    job.deduplication_replace = _flag(spec, "replace")


cdef frozenset _RARE_KEYS = frozenset((
    "durable", "removeOnComplete", "removeOnFail", "failParentOnFailure", "removeDependencyOnFailure",
    "continueParentOnFailure", "ignoreDependencyOnFailure", "childrenIds", "tags", "parentId",
    "debounceId", "keepLogs", "sizeLimit", "debounceTtl", "dedup",
))
cdef tuple _EMPTY = ()


cdef void _rare_options(dict opts, Job job) except *:
    """Options most jobs do not send, looked up only when the request names one of them."""
    job.durable = _flag(opts, "durable")
    job.remove_on_complete = _flag(opts, "removeOnComplete")
    job.remove_on_fail = _flag(opts, "removeOnFail")
    job.fail_parent_on_failure = _flag(opts, "failParentOnFailure")
    job.remove_dependency_on_failure = _flag(opts, "removeDependencyOnFailure")
    job.continue_parent_on_failure = _flag(opts, "continueParentOnFailure")
    job.ignore_dependency_on_failure = _flag(opts, "ignoreDependencyOnFailure")
    value = _string_list(opts, "childrenIds")
    if value:
        job.children_ids = value
    value = _tags(opts)
    if value:
        job.tags = value
    job.parent_id = _string(opts, "parentId")
    job.debounce_id = _string(opts, "debounceId")
    job.keep_logs = _optional_finite(opts, "keepLogs")
    job.size_limit = _optional_finite(opts, "sizeLimit")
    job.debounce_ttl = _optional_finite(opts, "debounceTtl")
    _dedup(opts, job)


# What a job map or a PUSH frame may hold besides its options: the fields the factory does not read.
cdef frozenset _PLAIN_KEYS = frozenset(("name", "data", "cmd", "queue", "reqId"))
cdef str _NAME_KEY = "name"
cdef str _DATA_KEY = "data"


cdef bint _only_plain_keys(dict opts):
    """Whether ``opts`` holds no option. msgpack interns the keys it decodes, so a job map's usual two are
    told apart by identity, before any hashing."""
    for key in opts:
        if key is not _NAME_KEY and key is not _DATA_KEY and key not in _PLAIN_KEYS:
            return False
    return True


cdef int _read_options(dict opts, Job job, bint batch) except -1:
    """Every option but name and data, checked in the order the errors are told, over the defaults."""
    cdef double priority = 0.0
    cdef double delay = 0.0
    cdef double created_at = job.created_at
    value = opts.get("priority")
    if value is not None:
        priority = _finite(value, "priority")
    group_id = _group(opts, &priority)
    group_max = _group_max_size(opts)
    value = opts.get("delay")
    if value is not None:
        delay = _duration(value, "delay", False)
    max_attempts = _max_attempts(opts.get("maxAttempts"))
    backoff, backoff_config = _backoff(opts.get("backoff"))
    ttl = _optional_duration(opts, "ttl", True)
    timeout = _optional_duration(opts, "timeout", True)
    stall_timeout = _optional_duration(opts, "stallTimeout", False)
    value = opts.get("timestamp")
    if value is not None:
        created_at = _finite(value, "timestamp")
        if created_at > _MAX_DURATION:
            raise CommandError(errors.must_be_at_most("timestamp", "4320000000000000"))
        if created_at < -_MAX_DURATION:
            raise CommandError(errors.must_be_at_least("timestamp", "-4320000000000000"))
    stack_limit = _optional_finite(opts, "stackTraceLimit")
    custom_id = _string(opts, "customId" if batch else "jobId")
    unique_key = _string(opts, "uniqueKey")
    depends_on = _string_list(opts, "dependsOn")
    lifo = _flag(opts, "lifo")
    repeat = _repeat(opts)

    job.created_at = created_at
    job.run_at = created_at + delay
    job.last_heartbeat = created_at
    job.backoff = backoff
    job.backoff_config = backoff_config
    if depends_on:
        job.depends_on = depends_on
        job.pending_deps = set(depends_on)
    job.repeat = repeat
    job.priority = priority
    job.lifo = lifo
    job.max_attempts = max_attempts
    job.ttl = ttl
    job.timeout = timeout
    job.unique_key = unique_key
    job.custom_id = custom_id
    job.group_id = group_id
    job.group_max_size = group_max
    job.stall_timeout = stall_timeout
    if stack_limit is not None:
        job.stack_trace_limit = stack_limit
    if not _RARE_KEYS.isdisjoint(opts):
        _rare_options(opts, job)
    return 0


cdef class JobFactory:
    """Builds validated job records. One per broker: it owns the id and sequence sources."""

    def __cinit__(self):
        self._seq = 0
        self._ids = UuidV7Source()

    def resume_after(self, unsigned long long seq):
        """Continue admission numbers after those of jobs read back from storage."""
        if seq > self._seq:
            self._seq = seq

    cpdef str new_token(self):
        return self._ids.token()

    def next_seq(self):
        """A sequence number after every job admitted so far: a promoted job queues behind them."""
        self._seq += 1
        return self._seq

    cpdef Job build(self, dict opts, str queue, double now, bint batch):
        cdef Job job = Job.__new__(Job)
        name, data = _name_and_data(opts)
        if _nests_deeper(data, _MAX_VALUE_DEPTH):
            raise CommandError(errors.nested_too_deeply("data"))
        job.queue = queue
        job.name = name
        job.data = data
        job.created_at = now
        job.run_at = now
        job.last_heartbeat = now
        job.started_at = NAN
        job.completed_at = NAN
        job.attempts = 0
        job.backoff = _DEFAULT_BACKOFF
        # Empty lists are the shared empty tuple (packed as an empty array); a change assigns a new list.
        job.depends_on = _EMPTY
        job.children_ids = _EMPTY
        job.children_completed = 0
        job.tags = _EMPTY
        job.progress = 0
        job.priority = 0.0
        job.max_attempts = _DEFAULT_MAX_ATTEMPTS
        job.stack_trace_limit = _DEFAULT_STACK_TRACE_LIMIT
        job.stall_count = 0
        job.state = 0
        # Most jobs send a name and data only: the ~20 other options are then not looked up one by one.
        if not _only_plain_keys(opts):
            _read_options(opts, job, batch)
        job.seq = self._seq = self._seq + 1
        job.id = job.custom_id if job.custom_id is not None else self._ids.job_id()
        return job
