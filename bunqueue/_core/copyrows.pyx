"""Binary COPY rows of pushed jobs (see copyrows.pxd)."""
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.math cimport isfinite
from libc.string cimport memchr, memcpy

from bunqueue._core.jobs cimport Job
from bunqueue._core.rows cimport RowBuffer

# "PGCOPY\n\377\r\n\0", then flags (int32 0) and the header extension's length (int32 0).
cdef bytes _HEADER = b"PGCOPY\n\xff\r\n\x00" + b"\x00" * 8
# The columns every row carries, in order (copypush.COPY_COLUMNS).
cdef int _FIELDS = 13
# int64 bounds as doubles: the first value past each end.
cdef double _INT64_END = 9223372036854775808.0
cdef long long _INT32_MAX = 2147483647


cdef inline bint _needs_escape(const char *s, Py_ssize_t n):
    return memchr(s, b'\\', n) != NULL or memchr(s, 0, n) != NULL


cdef inline bint _bigint_fits(double value):
    return isfinite(value) and -_INT64_END <= value < _INT64_END


cdef class CopyRows(RowBuffer):
    """The COPY stream of a flush of plain pushes, for ``namespace``.

    ``add_plain`` takes a job only if it can go in without a look-up (no custom id, unique key, parent or
    dependency, due by ``now``) and its values fit their columns; otherwise it writes nothing and says
    so, and the flush is the INSERT's.
    """

    def __init__(self, str namespace):
        # The namespace's field, kept whole (length and bytes) to be copied into every row.
        self.length = 0
        self._text(namespace)
        self.namespace = PyBytes_FromStringAndSize(self.buf, self.length)
        self.length = 0
        self._put(_HEADER, len(_HEADER))

    def __len__(self):
        return self.rows_written

    def add_plain(self, Job job, int state, double now):
        """Write ``job``'s row in ``state``; False (nothing written) when it needs the INSERT."""
        cdef object group = job.group_id
        cdef Py_ssize_t start = self.length
        if self.finished:
            raise ValueError("the COPY stream is finished")
        if (job.custom_id is not None or job.unique_key is not None or job.parent_id is not None
                or job.pending_deps is not None or job.run_at > now):
            return False
        if not (_bigint_fits(job.run_at) and _bigint_fits(job.created_at)
                and -_INT32_MAX - 1 <= job.max_attempts <= _INT32_MAX):
            return False
        if group is not None and type(group) is not str:
            return False
        try:
            self._plain_row(job, state)
        except UnicodeEncodeError:
            # A lone surrogate has no UTF-8 form: the INSERT's codec answers it as for any other push.
            self.length = start
            return False
        self.rows_written += 1
        return True

    def rows(self):
        """The rows written so far, without the stream's header: a part prepared for another stream of the
        same namespace (``add_rows``)."""
        if self.finished:
            raise ValueError("the COPY stream is finished")
        return PyBytes_FromStringAndSize(self.buf + len(_HEADER), self.length - len(_HEADER))

    def add_rows(self, bytes rows, Py_ssize_t count):
        """Append ``count`` rows that a writer of the same namespace prepared (``rows``)."""
        if self.finished:
            raise ValueError("the COPY stream is finished")
        self._put(rows, len(rows))
        self.rows_written += count

    def finish(self):
        """The whole stream, trailer included; the writer takes no row after it."""
        if not self.finished:
            self._be(0xFFFF, 2)
            self.finished = True
        return PyBytes_FromStringAndSize(self.buf, self.length)

    cdef int _plain_row(self, Job job, int state) except -1:
        cdef Py_ssize_t record
        cdef double priority = job.priority
        cdef unsigned long long bits
        self._be(_FIELDS, 2)
        self._put(self.namespace, len(self.namespace))
        self._be(2, 4)
        self._be(<unsigned short>state, 2)
        self._text(job.id)
        self._text(job.queue)
        self._be(8, 4)
        memcpy(&bits, &priority, 8)
        self._be(bits, 8)
        self._be(1, 4)
        self._byte(1 if job.lifo else 0)
        self._be(8, 4)
        self._be(<unsigned long long><long long>job.run_at, 8)
        self._be(8, 4)
        self._be(<unsigned long long><long long>job.created_at, 8)
        self._be(4, 4)
        self._be(<unsigned int><int>job.max_attempts, 4)
        if job.group_id is None:
            self._be(0xFFFFFFFF, 4)
        else:
            self._text(<str>job.group_id)
        # parent_id: always NULL here (a job with a parent takes the INSERT).
        self._be(0xFFFFFFFF, 4)
        self._be(1, 4)
        self._byte(1 if job.remove_on_complete else 0)
        record = self.length
        self._begin_frame()
        self._record(job)
        self._seal(record)
        return 0

    cdef int _text(self, str value) except -1:
        cdef Py_ssize_t n, i, start
        cdef const char *s = PyUnicode_AsUTF8AndSize(value, &n)
        if not _needs_escape(s, n):
            self._be(<unsigned long long>n, 4)
            return self._put(s, n)
        start = self.length
        self._begin_frame()
        for i in range(n):
            if s[i] == b'\\':
                self._put(b"\\\\", 2)
            elif s[i] == 0:
                self._put(b"\\0", 2)
            else:
                self._byte(<unsigned char>s[i])
        self._seal(start)
        return 0
