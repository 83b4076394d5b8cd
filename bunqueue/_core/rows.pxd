# The parameters of a batch of SQL writes, serialised into one C buffer on the event loop.
#
# A durable store writes one row per changed job, and most of a job row is its record: every field,
# MessagePack-encoded. Building that as a Python tuple and handing it to msgpack cost more than the rest
# of the push path; here the record is written straight from the job's typed fields. The parameters of
# every row (texts, integers, blobs) end up in one buffer, described by two flat C arrays, so a writer
# thread can bind and step the whole batch without holding the GIL, and no Python object stands per row.
#
# The buffer holds bytes only; which SQL statement a row belongs to is an index the store defines.

from libc.stdint cimport int64_t

from bunqueue._core.jobs cimport Job
from bunqueue._core.packer cimport ReplyPacker


cdef enum ParamKind:
    PARAM_NULL = 0
    PARAM_INT = 1
    PARAM_TEXT = 2
    PARAM_BLOB = 3


cdef struct Param:
    ParamKind kind
    # The integer itself (PARAM_INT), or where the bytes start in the buffer (PARAM_TEXT, PARAM_BLOB):
    # an offset, because the buffer moves while it grows.
    int64_t value
    Py_ssize_t size


cdef struct Row:
    # Which of the store's statements the row is bound to.
    int statement
    # Its parameters: params[first] .. params[first + count - 1].
    Py_ssize_t first
    int count


cdef class RowBuffer(ReplyPacker):
    # The MessagePack writer of ReplyPacker, its buffer holding every text and blob of the batch.
    cdef Param *params
    cdef Py_ssize_t n_params
    cdef Py_ssize_t params_capacity
    cdef Row *rows
    cdef Py_ssize_t n_rows
    cdef Py_ssize_t rows_capacity

    cdef int _begin_row(self, int statement) except -1
    cdef Param *_param(self) except NULL
    cdef int _text_param(self, str value) except -1
    cdef int _int_param(self, int64_t value) except -1
    cdef int _key_param(self, object value) except -1
    # A blob parameter of what the caller writes next: opened here, closed by _end_blob.
    cdef Py_ssize_t _begin_blob(self) except -1
    cdef void _end_blob(self, Py_ssize_t param)
    cdef int _count(self, long long value) except -1
    cdef int _optional(self, object value) except -1
    # A job's record: the same bytes as msgpack.packb(job.to_record(), use_bin_type=True).
    cdef int _record(self, Job job) except -1
