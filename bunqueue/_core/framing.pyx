"""Length-prefixed wire framing: split a byte stream into frames, and build frames."""
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.pyport cimport PY_SSIZE_T_MAX
from libc.stdint cimport UINT32_MAX, uint64_t
from libc.string cimport memcpy

from bunqueue._core.wire cimport FRAME_HEADER_SIZE as HEADER_SIZE

from bunqueue import errors
from bunqueue.errors import FrameTooLarge

DEFAULT_MAX_FRAME = errors.MAX_FRAME_BYTES

cdef uint64_t MAX_LENGTH = UINT32_MAX
# Lengths are added to Py_ssize_t offsets, which are only 32 bits wide on 32-bit builds.
cdef uint64_t MAX_ACCEPTED = min(MAX_LENGTH, <uint64_t>(PY_SSIZE_T_MAX - HEADER_SIZE))


cdef inline uint64_t read_length(const unsigned char* header) noexcept:
    return ((<uint64_t>header[0] << 24) | (<uint64_t>header[1] << 16)
            | (<uint64_t>header[2] << 8) | <uint64_t>header[3])


cdef inline void write_length(unsigned char* header, uint64_t length) noexcept:
    header[0] = <unsigned char>(length >> 24)
    header[1] = <unsigned char>(length >> 16)
    header[2] = <unsigned char>(length >> 8)
    header[3] = <unsigned char>length


cdef class FrameReader:
    """Incremental decoder for length-prefixed frames."""

    def __cinit__(self, max_frame=DEFAULT_MAX_FRAME):
        if max_frame < 0:
            raise ValueError(f"max_frame must be >= 0, got {max_frame}")
        self._max_frame = min(max_frame, MAX_ACCEPTED)
        self._pending = bytearray()
        self._failed_length = -1

    @property
    def buffered(self):
        """Bytes held for a frame that is not complete yet (0 between frames)."""
        return PyByteArray_GET_SIZE(self._pending)

    def feed(self, data):
        """Take the next chunk of the stream; return the payloads of all frames it completes, in order."""
        cdef Py_buffer view
        cdef list frames = []
        cdef Py_ssize_t used = 0
        cdef const unsigned char* chunk
        if self._failed_length >= 0:
            raise FrameTooLarge(self._failed_length, self._max_frame, frames)
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:
            chunk = <const unsigned char*>view.buf
            if PyByteArray_GET_SIZE(self._pending):
                used = self._complete_pending(chunk, view.len, frames)
                if PyByteArray_GET_SIZE(self._pending):
                    return frames
            used += self._split_frames(chunk + used, view.len - used, frames)
            self._append_pending(chunk + used, view.len - used)
        finally:
            PyBuffer_Release(&view)
        return frames

    cdef Py_ssize_t _complete_pending(self, const unsigned char* data, Py_ssize_t size,
                                      list frames) except -1:
        cdef Py_ssize_t held = PyByteArray_GET_SIZE(self._pending)
        cdef Py_ssize_t used = 0
        cdef Py_ssize_t wanted
        cdef uint64_t length
        if held < HEADER_SIZE:
            used = min(HEADER_SIZE - held, size)
            self._append_pending(data, used)
            held += used
            if held < HEADER_SIZE:
                return used
        length = read_length(<const unsigned char*>PyByteArray_AS_STRING(self._pending))
        if length > self._max_frame:
            self._reject(length, frames)
        wanted = <Py_ssize_t>length + HEADER_SIZE - held
        if wanted > size - used:
            self._append_pending(data + used, size - used)
            return size
        self._append_pending(data + used, wanted)
        frames.append(PyBytes_FromStringAndSize(PyByteArray_AS_STRING(self._pending) + HEADER_SIZE,
                                                <Py_ssize_t>length))
        # Shrinking to zero also hands a large frame's memory back.
        PyByteArray_Resize(self._pending, 0)
        return used + wanted

    cdef Py_ssize_t _split_frames(self, const unsigned char* data, Py_ssize_t size, list frames) except -1:
        cdef Py_ssize_t pos = 0
        cdef uint64_t length
        while size - pos >= HEADER_SIZE:
            length = read_length(data + pos)
            if length > self._max_frame:
                self._reject(length, frames)
            if <uint64_t>(size - pos - HEADER_SIZE) < length:
                break
            frames.append(PyBytes_FromStringAndSize(<const char*>data + pos + HEADER_SIZE,
                                                    <Py_ssize_t>length))
            pos += HEADER_SIZE + <Py_ssize_t>length
        return pos

    cdef int _append_pending(self, const unsigned char* data, Py_ssize_t size) except -1:
        cdef Py_ssize_t held
        if size <= 0:
            return 0
        held = PyByteArray_GET_SIZE(self._pending)
        PyByteArray_Resize(self._pending, held + size)
        memcpy(PyByteArray_AS_STRING(self._pending) + held, data, <size_t>size)
        return 0

    cdef int _reject(self, uint64_t length, list frames) except -1:
        self._failed_length = <long long>length
        PyByteArray_Resize(self._pending, 0)
        raise FrameTooLarge(length, self._max_frame, frames)


def frame(payload):
    """Return `payload` with its 4-byte big-endian length header in front."""
    cdef Py_buffer view
    cdef bytes framed
    cdef unsigned char* out
    PyObject_GetBuffer(payload, &view, PyBUF_SIMPLE)
    try:
        if <uint64_t>view.len > MAX_LENGTH:
            raise OverflowError(f"payload of {view.len} bytes does not fit a 32-bit length header")
        framed = PyBytes_FromStringAndSize(NULL, view.len + HEADER_SIZE)
        out = <unsigned char*>PyBytes_AS_STRING(framed)
        write_length(out, <uint64_t>view.len)
        memcpy(out + HEADER_SIZE, view.buf, <size_t>view.len)
    finally:
        PyBuffer_Release(&view)
    return framed


def frame_many(payloads):
    """Frame every payload and concatenate the frames into a single bytes object."""
    cdef list items = payloads if type(payloads) is list else list(payloads)
    cdef Py_buffer view
    cdef Py_ssize_t total = 0
    cdef Py_ssize_t pos = 0
    cdef bytes framed
    cdef unsigned char* out
    # Sizes first, so that the result is allocated once and filled in place.
    for payload in items:
        PyObject_GetBuffer(payload, &view, PyBUF_SIMPLE)
        try:
            if <uint64_t>view.len > MAX_LENGTH:
                raise OverflowError(f"payload of {view.len} bytes does not fit a 32-bit length header")
            total += view.len + HEADER_SIZE
        finally:
            PyBuffer_Release(&view)
    framed = PyBytes_FromStringAndSize(NULL, total)
    out = <unsigned char*>PyBytes_AS_STRING(framed)
    for payload in items:
        PyObject_GetBuffer(payload, &view, PyBUF_SIMPLE)
        try:
            if view.len + HEADER_SIZE > total - pos:
                raise RuntimeError("a payload changed size while it was being framed")
            write_length(out + pos, <uint64_t>view.len)
            memcpy(out + pos + HEADER_SIZE, view.buf, <size_t>view.len)
            pos += view.len + HEADER_SIZE
        finally:
            PyBuffer_Release(&view)
    if pos != total:
        raise RuntimeError("a payload changed size while it was being framed")
    return framed
