"""Replies to length-prefixed MessagePack frames, with job records written from their typed fields."""
cimport cython
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.math cimport isnan
from libc.stdint cimport INT32_MIN, UINT32_MAX, int64_t, uint64_t
from libc.string cimport memcpy

from msgpack import ExtType, Timestamp

from bunqueue._core.jobs cimport Job
from bunqueue._core.wire cimport is_wire_integer
from bunqueue._core.jobs import NO_DATA

# Far above MAX_VALUE_DEPTH, the nesting admitted in a value the broker keeps, plus the few levels of a
# reply around it: the limit guards the C stack, and no admitted value comes near it.
cdef int MAX_DEPTH = 1024
# A reply buffer that grew past this is given back after use, so one huge reply does not pin memory.
cdef Py_ssize_t KEEP_CAPACITY = 1 << 20
cdef object _NO_DATA = NO_DATA


cdef bytes _key(str name):
    raw = name.encode()
    return bytes([0xA0 | len(raw)]) + raw


# Every key of a job's wire form, pre-encoded (all are fixstr: shorter than 32 bytes).
cdef bytes K_ID = _key("id"), K_QUEUE = _key("queue"), K_NAME = _key("name"), K_DATA = _key("data")
cdef bytes K_CREATED = _key("createdAt"), K_RUN = _key("runAt"), K_STARTED = _key("startedAt")
cdef bytes K_COMPLETED = _key("completedAt"), K_ATTEMPTS = _key("attempts"), K_BACKOFF = _key("backoff")
cdef bytes K_BACKOFF_CONFIG = _key("backoffConfig"), K_DEPENDS = _key("dependsOn")
cdef bytes K_CHILDREN = _key("childrenIds"), K_CHILDREN_DONE = _key("childrenCompleted")
cdef bytes K_TAGS = _key("tags"), K_PROGRESS = _key("progress"), K_PROGRESS_MSG = _key("progressMessage")
cdef bytes K_STACK = _key("stacktrace"), K_REPEAT = _key("repeat"), K_DURABLE = _key("durable")
cdef bytes K_HEARTBEAT = _key("lastHeartbeat"), K_STALLS = _key("stallCount"), K_PRIORITY = _key("priority")
cdef bytes K_LIFO = _key("lifo"), K_MAX_ATTEMPTS = _key("maxAttempts")
cdef bytes K_REMOVE_COMPLETE = _key("removeOnComplete"), K_REMOVE_FAIL = _key("removeOnFail")
cdef bytes K_TTL = _key("ttl"), K_TIMEOUT = _key("timeout"), K_UNIQUE = _key("uniqueKey")
cdef bytes K_CUSTOM = _key("customId"), K_PARENT = _key("parentId"), K_GROUP = _key("groupId")
cdef bytes K_STALL_TIMEOUT = _key("stallTimeout"), K_STACK_LIMIT = _key("stackTraceLimit")
cdef bytes K_KEEP_LOGS = _key("keepLogs"), K_SIZE_LIMIT = _key("sizeLimit")
cdef bytes K_FAIL_PARENT = _key("failParentOnFailure")
cdef bytes K_REMOVE_DEP = _key("removeDependencyOnFailure")
cdef bytes K_CONTINUE_PARENT = _key("continueParentOnFailure")
cdef bytes K_IGNORE_DEP = _key("ignoreDependencyOnFailure")
cdef bytes K_DEDUP_TTL = _key("deduplicationTtl"), K_DEDUP_EXTEND = _key("deduplicationExtend")
cdef bytes K_DEDUP_REPLACE = _key("deduplicationReplace"), K_DEBOUNCE_ID = _key("debounceId")
cdef bytes K_DEBOUNCE_TTL = _key("debounceTtl"), K_TIMELINE = _key("timeline")


cdef class ReplyPacker:
    """Packs replies; not thread-safe (one per event loop is plenty: each call is synchronous)."""

    def __cinit__(self):
        self.capacity = 4096
        self.length = 0
        self.buf = <char *>PyMem_Malloc(self.capacity)
        if self.buf == NULL:
            raise MemoryError()

    def __dealloc__(self):
        PyMem_Free(self.buf)

    def pack(self, obj):
        """The MessagePack body alone, without a length prefix."""
        self.length = 0
        self._any(obj, 0)
        return self._end_frame(-1)

    def frame(self, obj):
        """One length-prefixed frame."""
        self.length = 0
        start = self.length
        self._begin_frame()
        self._any(obj, 0)
        return self._end_frame(start)

    def frames(self, list objs):
        """Several frames in one bytes object, for one write."""
        cdef Py_ssize_t start
        self.length = 0
        for obj in objs:
            start = self.length
            self._begin_frame()
            self._any(obj, 0)
            self._seal(start)
        return self._end_frame(-1)

    # -- buffer ----------------------------------------------------------------------------------

    @cython.final
    cdef int _reserve(self, Py_ssize_t extra) except -1:
        cdef Py_ssize_t need = self.length + extra
        cdef Py_ssize_t cap = self.capacity
        cdef char *grown
        if need <= cap:
            return 0
        while cap < need:
            cap *= 2
        grown = <char *>PyMem_Realloc(self.buf, cap)
        if grown == NULL:
            raise MemoryError()
        self.buf = grown
        self.capacity = cap
        return 0

    @cython.final
    cdef int _put(self, const char *data, Py_ssize_t n) except -1:
        self._reserve(n)
        memcpy(self.buf + self.length, data, n)
        self.length += n
        return 0

    @cython.final
    cdef int _byte(self, unsigned char b) except -1:
        self._reserve(1)
        self.buf[self.length] = <char>b
        self.length += 1
        return 0

    @cython.final
    cdef int _be(self, unsigned long long value, int width) except -1:
        cdef int i
        self._reserve(width)
        for i in range(width):
            self.buf[self.length + i] = <char>((value >> (8 * (width - 1 - i))) & 0xFF)
        self.length += width
        return 0

    @cython.final
    cdef int _begin_frame(self) except -1:
        self._reserve(4)
        self.length += 4
        return 0

    @cython.final
    cdef void _seal(self, Py_ssize_t start):
        cdef unsigned long long size = self.length - start - 4
        cdef int i
        for i in range(4):
            self.buf[start + i] = <char>((size >> (8 * (3 - i))) & 0xFF)

    @cython.final
    cdef bytes _end_frame(self, Py_ssize_t start):
        if start >= 0:
            self._seal(start)
        out = PyBytes_FromStringAndSize(self.buf, self.length)
        self.length = 0
        if self.capacity > KEEP_CAPACITY:
            PyMem_Free(self.buf)
            self.capacity = 4096
            self.buf = <char *>PyMem_Malloc(self.capacity)
            if self.buf == NULL:
                raise MemoryError()
        return out

    # -- scalars ---------------------------------------------------------------------------------

    @cython.final
    cdef int _nil(self) except -1:
        return self._byte(0xC0)

    @cython.final
    cdef int _int(self, object value) except -1:
        cdef int64_t n
        cdef uint64_t u
        if value >= 0:
            u = value
            if u < 0x80:
                return self._byte(<unsigned char>u)
            if u <= 0xFF:
                self._byte(0xCC)
                return self._be(u, 1)
            if u <= 0xFFFF:
                self._byte(0xCD)
                return self._be(u, 2)
            if u <= UINT32_MAX:
                self._byte(0xCE)
                return self._be(u, 4)
            self._byte(0xCF)
            return self._be(u, 8)
        n = value
        if n >= -32:
            return self._byte(<unsigned char>(n & 0xFF))
        if n >= -128:
            self._byte(0xD0)
            return self._be(<uint64_t>n, 1)
        if n >= -32768:
            self._byte(0xD1)
            return self._be(<uint64_t>n, 2)
        if n >= INT32_MIN:
            self._byte(0xD2)
            return self._be(<uint64_t>n, 4)
        self._byte(0xD3)
        return self._be(<uint64_t>n, 8)

    @cython.final
    cdef int _double(self, double value) except -1:
        cdef uint64_t bits
        memcpy(&bits, &value, 8)
        self._byte(0xCB)
        return self._be(bits, 8)

    @cython.final
    cdef int _number(self, double value) except -1:
        if is_wire_integer(value):
            return self._int(<long long>value)
        return self._double(value)

    @cython.final
    cdef int _str(self, str value) except -1:
        cdef Py_ssize_t n
        cdef const char *data = PyUnicode_AsUTF8AndSize(value, &n)
        if n < 32:
            self._byte(0xA0 | <unsigned char>n)
        elif n <= 0xFF:
            self._byte(0xD9)
            self._be(n, 1)
        elif n <= 0xFFFF:
            self._byte(0xDA)
            self._be(n, 2)
        else:
            self._byte(0xDB)
            self._be(n, 4)
        return self._put(data, n)

    @cython.final
    cdef int _bin(self, const unsigned char[:] value) except -1:
        cdef Py_ssize_t n = value.shape[0]
        if n <= 0xFF:
            self._byte(0xC4)
            self._be(n, 1)
        elif n <= 0xFFFF:
            self._byte(0xC5)
            self._be(n, 2)
        else:
            self._byte(0xC6)
            self._be(n, 4)
        if n:
            self._put(<const char *>&value[0], n)
        return 0

    @cython.final
    cdef int _header(self, Py_ssize_t n, unsigned char fix, unsigned char b16, unsigned char b32) except -1:
        if n < 16:
            return self._byte(fix | <unsigned char>n)
        if n <= 0xFFFF:
            self._byte(b16)
            return self._be(n, 2)
        self._byte(b32)
        return self._be(n, 4)

    @cython.final
    cdef int _ext(self, int code, bytes data) except -1:
        cdef Py_ssize_t n = len(data)
        if n == 1:
            self._byte(0xD4)
        elif n == 2:
            self._byte(0xD5)
        elif n == 4:
            self._byte(0xD6)
        elif n == 8:
            self._byte(0xD7)
        elif n == 16:
            self._byte(0xD8)
        elif n <= 0xFF:
            self._byte(0xC7)
            self._be(n, 1)
        elif n <= 0xFFFF:
            self._byte(0xC8)
            self._be(n, 2)
        else:
            self._byte(0xC9)
            self._be(n, 4)
        self._byte(<unsigned char>(code & 0xFF))
        return self._put(data, n)

    # -- values ----------------------------------------------------------------------------------

    @cython.final
    cdef int _any(self, object value, int depth) except -1:
        cdef type t = type(value)
        if depth > MAX_DEPTH:
            raise ValueError("reply nested too deeply")
        if t is str:
            return self._str(<str>value)
        if value is None:
            return self._nil()
        if t is bool:
            return self._byte(0xC3 if value else 0xC2)
        if t is int:
            return self._int(value)
        if t is float:
            return self._double(<double>value)
        if t is dict:
            self._header(len(<dict>value), 0x80, 0xDE, 0xDF)
            for k, v in (<dict>value).items():
                self._any(k, depth + 1)
                self._any(v, depth + 1)
            return 0
        if t is list or t is tuple:
            self._header(len(value), 0x90, 0xDC, 0xDD)
            for item in value:
                self._any(item, depth + 1)
            return 0
        if t is Job:
            return self._job(<Job>value, depth)
        if t is bytes or t is bytearray or t is memoryview:
            return self._bin(value)
        if t is ExtType:
            return self._ext(value.code, value.data)
        if t is Timestamp:
            # The decoder turns ext -1 into a Timestamp; it goes back out in the msgpack spec's shortest
            # form, the one msgpackr and msgpack-python write.
            return self._ext(-1, value.to_bytes())
        # Subclasses of the basic types pack as their base type, as msgpack's Packer does.
        if isinstance(value, bool):
            return self._byte(0xC3 if value else 0xC2)
        if isinstance(value, int):
            return self._int(int(value))
        if isinstance(value, float):
            return self._double(float(value))
        if isinstance(value, str):
            return self._str(str(value))
        if isinstance(value, dict):
            return self._any(dict(value), depth)
        if isinstance(value, (list, tuple)):
            return self._any(list(value), depth)
        raise TypeError(f"cannot serialize {t.__name__!r} object")

    @cython.final
    cdef int _nullable(self, double value) except -1:
        if isnan(value):
            return self._nil()
        return self._number(value)

    @cython.final
    cdef int _bool(self, bint value) except -1:
        return self._byte(0xC3 if value else 0xC2)

    @cython.final
    cdef int _field(self, bytes key) except -1:
        return self._put(key, len(key))

    @cython.final
    cdef int _job(self, Job job, int depth) except -1:
        cdef bint has_data = job.data is not _NO_DATA
        self._byte(0xDE)
        self._be(47 if has_data else 46, 2)
        self._field(K_ID)
        self._str(job.id)
        self._field(K_QUEUE)
        self._str(job.queue)
        self._field(K_NAME)
        self._str(job.name)
        if has_data:
            self._field(K_DATA)
            self._any(job.data, depth + 1)
        self._field(K_CREATED)
        self._number(job.created_at)
        self._field(K_RUN)
        self._number(job.run_at)
        self._field(K_STARTED)
        self._nullable(job.started_at)
        self._field(K_COMPLETED)
        self._nullable(job.completed_at)
        self._field(K_ATTEMPTS)
        self._int(job.attempts)
        self._field(K_BACKOFF)
        self._any(job.backoff, depth + 1)
        self._field(K_BACKOFF_CONFIG)
        self._any(job.backoff_config, depth + 1)
        self._field(K_DEPENDS)
        self._any(job.depends_on, depth + 1)
        self._field(K_CHILDREN)
        self._any(job.children_ids, depth + 1)
        self._field(K_CHILDREN_DONE)
        self._int(job.children_completed)
        self._field(K_TAGS)
        self._any(job.tags, depth + 1)
        self._field(K_PROGRESS)
        self._any(job.progress, depth + 1)
        self._field(K_PROGRESS_MSG)
        self._any(job.progress_message, depth + 1)
        self._field(K_STACK)
        self._any(job.stacktrace, depth + 1)
        self._field(K_REPEAT)
        self._any(job.repeat, depth + 1)
        self._field(K_DURABLE)
        self._bool(job.durable)
        self._field(K_HEARTBEAT)
        self._number(job.last_heartbeat)
        self._field(K_STALLS)
        self._int(job.stall_count)
        self._field(K_PRIORITY)
        self._number(job.priority)
        self._field(K_LIFO)
        self._bool(job.lifo)
        self._field(K_MAX_ATTEMPTS)
        self._int(job.max_attempts)
        self._field(K_REMOVE_COMPLETE)
        self._bool(job.remove_on_complete)
        self._field(K_REMOVE_FAIL)
        self._bool(job.remove_on_fail)
        self._field(K_TTL)
        self._any(job.ttl, depth + 1)
        self._field(K_TIMEOUT)
        self._any(job.timeout, depth + 1)
        self._field(K_UNIQUE)
        self._any(job.unique_key, depth + 1)
        self._field(K_CUSTOM)
        self._any(job.custom_id, depth + 1)
        self._field(K_PARENT)
        self._any(job.parent_id, depth + 1)
        self._field(K_GROUP)
        self._any(job.group_id, depth + 1)
        self._field(K_STALL_TIMEOUT)
        self._any(job.stall_timeout, depth + 1)
        self._field(K_STACK_LIMIT)
        self._any(job.stack_trace_limit, depth + 1)
        self._field(K_KEEP_LOGS)
        self._any(job.keep_logs, depth + 1)
        self._field(K_SIZE_LIMIT)
        self._any(job.size_limit, depth + 1)
        self._field(K_FAIL_PARENT)
        self._bool(job.fail_parent_on_failure)
        self._field(K_REMOVE_DEP)
        self._bool(job.remove_dependency_on_failure)
        self._field(K_CONTINUE_PARENT)
        self._bool(job.continue_parent_on_failure)
        self._field(K_IGNORE_DEP)
        self._bool(job.ignore_dependency_on_failure)
        self._field(K_DEDUP_TTL)
        self._any(job.deduplication_ttl, depth + 1)
        self._field(K_DEDUP_EXTEND)
        self._bool(job.deduplication_extend)
        self._field(K_DEDUP_REPLACE)
        self._bool(job.deduplication_replace)
        self._field(K_DEBOUNCE_ID)
        self._any(job.debounce_id, depth + 1)
        self._field(K_DEBOUNCE_TTL)
        self._any(job.debounce_ttl, depth + 1)
        self._field(K_TIMELINE)
        self._any(job.timeline, depth + 1)
        return 0
