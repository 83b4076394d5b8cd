# Request bodies read from MessagePack into Python values, as `msgpack.unpackb(raw=False,
# strict_map_key=False)` reads them, minus the per-string cost that dominates a PUSHB.
#
# msgpack decodes every map key afresh, hashes it (SipHash) and interns it: for a job map of two or three
# short keys that was over a third of the broker's whole per-job cost. The keys and names of requests repeat
# (`name`, `data`, `queue`, a job's name, its data's field names), so short ASCII strings are remembered in a
# small table indexed by a cheap hash of their bytes: a hit hands out the same str object, already interned
# and with its hash computed, and is compared by its bytes alone. A miss decodes as msgpack does and takes
# the slot. Only ASCII strings are kept, since their bytes are their characters.

cimport cython
from cpython.object cimport PyObject


cdef enum:
    # Power of two: a slot is the hash masked.
    STRING_SLOTS = 1024
    # Keys are cached up to a fixstr's 31 bytes; values, which are more often unique (ids, texts), only up
    # to 16, so that they do not churn the table.
    CACHED_KEY_MAX = 31
    CACHED_VALUE_MAX = 16
    # msgpack's stack of open containers holds 1024; a 1025th nested container is refused the same way.
    MAX_DEPTH = 1024


# A read position in one body; lives on the C stack of one `unpack` call.
cdef struct Cursor:
    const unsigned char* data
    Py_ssize_t pos
    Py_ssize_t end


@cython.final
cdef class RequestUnpacker:
    # Strong references (or NULL), released in __dealloc__.
    cdef PyObject* _strings[STRING_SLOTS]
    # What ext type 0 (msgpackr's JS `undefined`) reads as; other ext types become `_ext_type(code, data)`
    # and type -1 a `_timestamp_type`, as msgpack's defaults do.
    cdef object _undefined
    cdef object _ext_type
    cdef object _timestamp_type
    # Whether the last body read held an `undefined` anywhere, so that only such a body is walked again.
    cdef readonly bint saw_undefined

    cpdef object unpack(self, object body)
    cdef object _whole(self, Cursor* cur)
    cdef object _value(self, Cursor* cur, int depth)
    cdef object _string(self, Cursor* cur, Py_ssize_t size, Py_ssize_t cached_max)
    cdef object _array(self, Cursor* cur, Py_ssize_t size, int depth)
    cdef object _map(self, Cursor* cur, Py_ssize_t size, int depth)
    cdef object _ext(self, Cursor* cur, Py_ssize_t size)
