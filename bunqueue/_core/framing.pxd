# Wire framing: every frame is a 4-byte big-endian unsigned length followed by that many payload bytes.
#
# The reader never copies a chunk into a buffer just to parse it. Frames are sliced straight out of the
# chunk the transport handed over; only the tail of a frame that is still incomplete is kept, in one
# bytearray that grows in place (amortised O(1) appends). So a chunk of many small frames costs one copy
# per payload, a large frame arriving in many chunks costs two copies of its bytes in total, and nothing
# is ever copied twice while waiting (no quadratic re-slicing of a growing buffer).

cimport cython
from libc.stdint cimport uint64_t


@cython.final
cdef class FrameReader:
    # The incomplete frame, header included, exactly as received. It always starts at a frame boundary
    # and is empty between frames, so its size is what a slow-loris timeout watches. Its body length is
    # re-read from its first four bytes when needed rather than kept in a second field that could drift.
    cdef bytearray _pending
    # Declared lengths above this are rejected on sight of the header, before a byte of body is held;
    # otherwise a peer could make the broker reserve memory for a body it never sends.
    cdef uint64_t _max_frame
    # After an oversized header the byte stream has no trustworthy frame boundary left, so the reader
    # stays failed (value: the offending length; -1 while healthy) and every later feed raises again.
    cdef long long _failed_length

    # Both return the number of bytes of `data` consumed and append finished payloads to `frames`.
    # _complete_pending only tops up the pending frame; _split_frames parses frame boundaries in place.
    cdef Py_ssize_t _complete_pending(self, const unsigned char* data, Py_ssize_t size,
                                      list frames) except -1
    cdef Py_ssize_t _split_frames(self, const unsigned char* data, Py_ssize_t size, list frames) except -1
    cdef int _append_pending(self, const unsigned char* data, Py_ssize_t size) except -1
    cdef int _reject(self, uint64_t length, list frames) except -1
