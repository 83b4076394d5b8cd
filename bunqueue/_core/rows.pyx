"""SQL parameter rows of one storage batch, serialised into one C buffer (see rows.pxd)."""
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.stdint cimport int64_t

from bunqueue._core.jobs cimport Job
from bunqueue._core.packer cimport ReplyPacker
from bunqueue._core.jobs import NO_DATA
from bunqueue._core.jobs import RECORD_VERSION as _record_version

cdef object _NO_DATA = NO_DATA
cdef long long _RECORD_VERSION = _record_version


cdef void *_grown(void *array, Py_ssize_t *capacity, Py_ssize_t first, size_t item) except NULL:
    """``array`` reallocated to twice its capacity (``first`` items when empty); ``capacity`` updated."""
    cdef Py_ssize_t cap = capacity[0] * 2 if capacity[0] else first
    cdef void *grown = PyMem_Realloc(array, cap * item)
    if grown == NULL:
        raise MemoryError()
    capacity[0] = cap
    return grown


cdef class RowBuffer(ReplyPacker):
    """Rows of SQL parameters (NULL, integers, texts, blobs), each tagged with its statement's index.

    Filled on one thread, then read by another: the store hands the buffer over and never touches it
    again, so a reader needs no lock.
    """

    def __dealloc__(self):
        PyMem_Free(self.params)
        PyMem_Free(self.rows)

    def __len__(self):
        return self.n_rows

    def add(self, int statement, tuple keys):
        """A row of ``keys``: texts, integers or None."""
        self._begin_row(statement)
        for key in keys:
            self._key_param(key)

    def add_packed(self, int statement, tuple keys, value):
        """A row of ``keys`` followed by ``value`` MessagePack-encoded as a blob."""
        cdef Py_ssize_t blob
        self._begin_row(statement)
        for key in keys:
            self._key_param(key)
        blob = self._begin_blob()
        self._any(value, 0)
        self._end_blob(blob)

    def add_jobs(self, int statement, dict jobs):
        """A row (id, queue, state, record) for every job of ``jobs`` (values), in order."""
        cdef Job job
        cdef Py_ssize_t blob
        for value in jobs.values():
            job = <Job?>value
            self._begin_row(statement)
            self._text_param(job.id)
            self._text_param(job.queue)
            self._int_param(job.state)
            blob = self._begin_blob()
            self._record(job)
            self._end_blob(blob)

    def add_pulls(self, int statement, dict jobs):
        """A row (state, start of the attempt, job id) for every job of ``jobs`` (values): what a pull
        changed.

        Start times are integral epoch milliseconds (the broker's clock), stored as integers.
        """
        cdef Job job
        for value in jobs.values():
            job = <Job?>value
            self._begin_row(statement)
            self._int_param(job.state)
            self._int_param(<int64_t>job.started_at)
            self._text_param(job.id)

    def record(self, Job job):
        """A job's record alone, as bytes (what a job row stores)."""
        cdef Py_ssize_t start = self.length
        self._record(job)
        out = PyBytes_FromStringAndSize(self.buf + start, self.length - start)
        self.length = start
        return out

    def decoded(self):
        """Every row as (statement, params) with Python values: what a writer will bind."""
        cdef Row row
        cdef Param *param
        cdef Py_ssize_t i, j
        out = []
        for i in range(self.n_rows):
            row = self.rows[i]
            values = []
            for j in range(row.first, row.first + row.count):
                param = &self.params[j]
                if param.kind == PARAM_NULL:
                    values.append(None)
                elif param.kind == PARAM_INT:
                    values.append(param.value)
                else:
                    data = PyBytes_FromStringAndSize(self.buf + param.value, param.size)
                    values.append(data.decode() if param.kind == PARAM_TEXT else data)
            out.append((row.statement, tuple(values)))
        return out

    # -- rows and parameters ---------------------------------------------------------------------

    cdef int _begin_row(self, int statement) except -1:
        if self.n_rows == self.rows_capacity:
            self.rows = <Row *>_grown(self.rows, &self.rows_capacity, 64, sizeof(Row))
        self.rows[self.n_rows] = Row(statement, self.n_params, 0)
        self.n_rows += 1
        return 0

    cdef Param *_param(self) except NULL:
        if self.n_params == self.params_capacity:
            self.params = <Param *>_grown(self.params, &self.params_capacity, 256, sizeof(Param))
        self.rows[self.n_rows - 1].count += 1
        self.n_params += 1
        return &self.params[self.n_params - 1]

    cdef int _text_param(self, str value) except -1:
        cdef Py_ssize_t n
        cdef const char *data = PyUnicode_AsUTF8AndSize(value, &n)
        cdef Param *param = self._param()
        param[0] = Param(PARAM_TEXT, self.length, n)
        return self._put(data, n)

    cdef int _int_param(self, int64_t value) except -1:
        self._param()[0] = Param(PARAM_INT, value, 0)
        return 0

    cdef int _key_param(self, object value) except -1:
        if type(value) is str:
            return self._text_param(<str>value)
        if value is None:
            self._param()[0] = Param(PARAM_NULL, 0, 0)
            return 0
        if type(value) is int:
            return self._int_param(value)
        raise TypeError(f"a key parameter must be a str, an int or None, not {type(value).__name__}")

    cdef Py_ssize_t _begin_blob(self) except -1:
        self._param()[0] = Param(PARAM_BLOB, self.length, 0)
        return self.n_params - 1

    cdef void _end_blob(self, Py_ssize_t param):
        self.params[param].size = self.length - self.params[param].value

    # -- the job record --------------------------------------------------------------------------

    cdef int _count(self, long long value) except -1:
        # Most counters of a record are small: a positive fixint needs no Python integer.
        if 0 <= value < 0x80:
            return self._byte(<unsigned char>value)
        return self._int(value)

    cdef int _optional(self, object value) except -1:
        # Most optional fields of a record are unset.
        if value is None:
            return self._byte(0xC0)
        return self._any(value, 1)

    cdef int _record(self, Job job) except -1:
        # Field for field what Job.to_record() lists; its doubles are Python floats there, so float64 here.
        cdef bint has_data = job.data is not _NO_DATA
        self._byte(0xDC)
        self._be(52, 2)
        self._count(_RECORD_VERSION)
        self._str(job.id)
        self._str(job.queue)
        self._str(job.name)
        self._bool(has_data)
        if has_data:
            self._any(job.data, 1)
        else:
            self._nil()
        self._double(job.created_at)
        self._double(job.run_at)
        self._double(job.started_at)
        self._double(job.completed_at)
        self._count(job.attempts)
        self._optional(job.backoff)
        self._optional(job.backoff_config)
        self._any(job.depends_on, 1)
        self._any(job.children_ids, 1)
        self._count(job.children_completed)
        self._any(job.tags, 1)
        self._optional(job.progress)
        self._optional(job.progress_message)
        self._optional(job.stacktrace)
        self._optional(job.repeat)
        self._bool(job.durable)
        self._double(job.last_heartbeat)
        self._count(job.stall_count)
        self._double(job.priority)
        self._bool(job.lifo)
        self._count(job.max_attempts)
        self._bool(job.remove_on_complete)
        self._bool(job.remove_on_fail)
        self._optional(job.ttl)
        self._optional(job.timeout)
        self._optional(job.unique_key)
        self._optional(job.custom_id)
        self._optional(job.parent_id)
        self._optional(job.group_id)
        self._optional(job.stall_timeout)
        self._optional(job.stack_trace_limit)
        self._optional(job.keep_logs)
        self._optional(job.size_limit)
        self._bool(job.fail_parent_on_failure)
        self._bool(job.remove_dependency_on_failure)
        self._bool(job.continue_parent_on_failure)
        self._bool(job.ignore_dependency_on_failure)
        self._optional(job.deduplication_ttl)
        self._bool(job.deduplication_extend)
        self._bool(job.deduplication_replace)
        self._optional(job.debounce_id)
        self._optional(job.debounce_ttl)
        self._any(job.timeline, 1)
        self._count(job.seq)
        self._count(job.state)
        if job.pending_deps is None:
            return self._nil()
        self._header(len(job.pending_deps), 0x90, 0xDC, 0xDD)
        for dep in job.pending_deps:
            self._any(dep, 1)
        return 0
