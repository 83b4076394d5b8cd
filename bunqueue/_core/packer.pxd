# Replies to length-prefixed MessagePack frames, written straight from Python objects and job records.
#
# msgpack's own Packer needs a dict for every job it sends; a PULLB of 1000 jobs would build 1000
# 47-key dicts only to throw them away. This packer writes a Job's wire form from its typed fields, and
# everything else by the same rules as msgpack's Packer(use_bin_type=True), into one growing C buffer
# whose first four bytes become the frame's length prefix, so a reply needs no second copy to be framed.

from bunqueue._core.jobs cimport Job


# Every method is final in packer.pyx (RowBuffer adds its own, overriding none): called directly rather than
# through the type's table, so the C compiler inlines the byte-sized writers into the per-field code that
# calls them dozens of times per job.
cdef class ReplyPacker:
    cdef char *buf
    cdef Py_ssize_t length
    cdef Py_ssize_t capacity

    cdef int _reserve(self, Py_ssize_t extra) except -1
    cdef int _put(self, const char *data, Py_ssize_t n) except -1
    cdef int _byte(self, unsigned char b) except -1
    cdef int _be(self, unsigned long long value, int width) except -1
    cdef int _nil(self) except -1
    cdef int _int(self, object value) except -1
    cdef int _double(self, double value) except -1
    # A JS number as msgpackr writes it: an integer when integral and in int32/uint32, else float64.
    cdef int _number(self, double value) except -1
    cdef int _str(self, str value) except -1
    cdef int _bin(self, const unsigned char[:] value) except -1
    cdef int _header(self, Py_ssize_t n, unsigned char fix, unsigned char b16, unsigned char b32) except -1
    cdef int _ext(self, int code, bytes data) except -1
    cdef int _any(self, object value, int depth) except -1
    # A pre-encoded key of the job map.
    cdef int _field(self, bytes key) except -1
    cdef int _job(self, Job job, int depth) except -1
    cdef int _nullable(self, double value) except -1
    cdef int _bool(self, bint value) except -1
    cdef int _begin_frame(self) except -1
    # Writes the length of the frame that starts at `start` into its four reserved bytes.
    cdef void _seal(self, Py_ssize_t start)
    cdef bytes _end_frame(self, Py_ssize_t start)
