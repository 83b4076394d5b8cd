# cython: freethreading_compatible = False
"""MessagePack request bodies read into Python values, short strings shared (see unpacker.pxd)."""
cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_New, PyDict_SetItem
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.long cimport PyLong_FromLongLong, PyLong_FromUnsignedLongLong
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy


cdef extern from "Python.h":
    object PyUnicode_DecodeUTF8(const char* data, Py_ssize_t size, const char* errors)
    void PyUnicode_InternInPlace(PyObject** text)
    Py_ssize_t PyUnicode_GET_LENGTH(PyObject* text)
    void* PyUnicode_DATA(PyObject* text)
    int PyUnicode_IS_ASCII(PyObject* text)


cdef inline uint64_t _be(const unsigned char* p, int width) noexcept:
    cdef uint64_t value = 0
    cdef int i
    for i in range(width):
        value = (value << 8) | p[i]
    return value


cdef inline const unsigned char* _take(Cursor* cur, Py_ssize_t size) except NULL:
    """The next ``size`` bytes of the body, or ValueError when it ends before them."""
    cdef const unsigned char* start
    if size > cur.end - cur.pos:
        raise ValueError("Unpack failed: incomplete input")
    start = cur.data + cur.pos
    cur.pos += size
    return start


@cython.final
cdef class RequestUnpacker:
    """Reads one MessagePack value per body; a malformed, truncated or over-deep body raises ValueError,
    trailing bytes too, and a map key that cannot be hashed TypeError."""

    def __cinit__(self, undefined, ext_type, timestamp_type):
        self._undefined = undefined
        self._ext_type = ext_type
        self._timestamp_type = timestamp_type

    def __dealloc__(self):
        cdef Py_ssize_t i
        for i in range(STRING_SLOTS):
            Py_XDECREF(self._strings[i])
            self._strings[i] = NULL

    cpdef object unpack(self, object body):
        cdef Cursor cur
        cdef Py_buffer view
        self.saw_undefined = False
        if type(body) is bytes:
            cur.data = <const unsigned char*>PyBytes_AS_STRING(body)
            cur.pos = 0
            cur.end = PyBytes_GET_SIZE(body)
            return self._whole(&cur)
        PyObject_GetBuffer(body, &view, PyBUF_SIMPLE)
        try:
            cur.data = <const unsigned char*>view.buf
            cur.pos = 0
            cur.end = view.len
            return self._whole(&cur)
        finally:
            PyBuffer_Release(&view)

    cdef object _whole(self, Cursor* cur):
        value = self._value(cur, 0)
        if cur.pos != cur.end:
            raise ValueError("Unpack failed: extra data")
        return value

    cdef object _value(self, Cursor* cur, int depth):
        cdef const unsigned char* p = _take(cur, 1)
        cdef unsigned char head = p[0]
        cdef uint32_t bits32
        cdef uint64_t bits64
        cdef float single
        cdef double double_
        cdef int width
        if head <= 0x7f:
            return head
        if head <= 0x8f:
            return self._map(cur, head & 0x0f, depth)
        if head <= 0x9f:
            return self._array(cur, head & 0x0f, depth)
        if head <= 0xbf:
            return self._string(cur, head & 0x1f, CACHED_VALUE_MAX)
        if head >= 0xe0:
            return <int>head - 256
        if head == 0xc0:
            return None
        if head == 0xc2:
            return False
        if head == 0xc3:
            return True
        if 0xcc <= head <= 0xcf:
            return PyLong_FromUnsignedLongLong(_be(_take(cur, 1 << (head - 0xcc)), 1 << (head - 0xcc)))
        if head == 0xd0:
            return <int8_t>_take(cur, 1)[0]
        if head == 0xd1:
            return <int16_t>_be(_take(cur, 2), 2)
        if head == 0xd2:
            return <int32_t>_be(_take(cur, 4), 4)
        if head == 0xd3:
            return PyLong_FromLongLong(<int64_t>_be(_take(cur, 8), 8))
        if head == 0xca:
            bits32 = <uint32_t>_be(_take(cur, 4), 4)
            memcpy(&single, &bits32, 4)
            return <double>single
        if head == 0xcb:
            bits64 = _be(_take(cur, 8), 8)
            memcpy(&double_, &bits64, 8)
            return double_
        if 0xd9 <= head <= 0xdb:
            return self._string(cur, <Py_ssize_t>_be(_take(cur, 1 << (head - 0xd9)), 1 << (head - 0xd9)),
                                CACHED_VALUE_MAX)
        if 0xc4 <= head <= 0xc6:
            bits64 = _be(_take(cur, 1 << (head - 0xc4)), 1 << (head - 0xc4))
            return PyBytes_FromStringAndSize(<const char*>_take(cur, <Py_ssize_t>bits64), <Py_ssize_t>bits64)
        if 0xdc <= head <= 0xdf:
            # array 16, array 32, map 16, map 32
            width = 2 if head == 0xdc or head == 0xde else 4
            bits64 = _be(_take(cur, width), width)
            if head <= 0xdd:
                return self._array(cur, <Py_ssize_t>bits64, depth)
            return self._map(cur, <Py_ssize_t>bits64, depth)
        if 0xd4 <= head <= 0xd8:
            return self._ext(cur, 1 << (head - 0xd4))
        if 0xc7 <= head <= 0xc9:
            return self._ext(cur, <Py_ssize_t>_be(_take(cur, 1 << (head - 0xc7)), 1 << (head - 0xc7)))
        # 0xc1: never used by the format.
        raise ValueError("Unpack failed: invalid byte 0xc1")

    cdef object _string(self, Cursor* cur, Py_ssize_t size, Py_ssize_t cached_max):
        cdef const char* start = <const char*>_take(cur, size)
        cdef uint32_t hashed = 2166136261u
        cdef Py_ssize_t i
        cdef PyObject* held
        cdef PyObject* interned
        if size > cached_max:
            return PyUnicode_DecodeUTF8(start, size, NULL)
        # FNV-1a: a few instructions a byte, enough to spread names over the slots.
        for i in range(size):
            hashed = (hashed ^ <unsigned char>start[i]) * 16777619u
        i = hashed & (STRING_SLOTS - 1)
        held = self._strings[i]
        if (held != NULL and PyUnicode_GET_LENGTH(held) == size
                and memcmp(PyUnicode_DATA(held), start, size) == 0):
            return <object>held
        text = PyUnicode_DecodeUTF8(start, size, NULL)
        interned = <PyObject*>text
        if not PyUnicode_IS_ASCII(interned):
            return text
        # The same object as the program's own literals and as msgpack would have made it.
        Py_INCREF(text)
        PyUnicode_InternInPlace(&interned)
        text = <object>interned
        Py_DECREF(text)
        Py_XDECREF(self._strings[i])
        Py_INCREF(text)
        self._strings[i] = interned
        return text

    cdef object _array(self, Cursor* cur, Py_ssize_t size, int depth):
        cdef Py_ssize_t i
        if depth >= MAX_DEPTH:
            raise ValueError("Unpack failed: nested too deeply")
        # Each element takes a byte at least: a count past the body's end is refused before allocating.
        if size > cur.end - cur.pos:
            raise ValueError("Unpack failed: incomplete input")
        items = PyList_New(size)
        for i in range(size):
            item = self._value(cur, depth + 1)
            Py_INCREF(item)
            PyList_SET_ITEM(items, i, item)
        return items

    cdef object _map(self, Cursor* cur, Py_ssize_t size, int depth):
        cdef Py_ssize_t _
        cdef unsigned char head
        if depth >= MAX_DEPTH:
            raise ValueError("Unpack failed: nested too deeply")
        if size > (cur.end - cur.pos) // 2:
            raise ValueError("Unpack failed: incomplete input")
        mapping = PyDict_New()
        for _ in range(size):
            # Keys are read here rather than by _value so that they get the longer cache limit.
            if cur.pos < cur.end and 0xa0 <= cur.data[cur.pos] <= 0xbf:
                head = cur.data[cur.pos]
                cur.pos += 1
                key = self._string(cur, head & 0x1f, CACHED_KEY_MAX)
            else:
                key = self._value(cur, depth + 1)
            PyDict_SetItem(mapping, key, self._value(cur, depth + 1))
        return mapping

    cdef object _ext(self, Cursor* cur, Py_ssize_t size):
        cdef const unsigned char* start
        cdef int8_t code = <int8_t>_take(cur, 1)[0]
        cdef uint64_t packed
        start = _take(cur, size)
        if code == 0:
            self.saw_undefined = True
            return self._undefined
        if code != -1:
            return self._ext_type(code, PyBytes_FromStringAndSize(<const char*>start, size))
        # The timestamp extension in its three sizes, read as msgpack's default (Timestamp) reads it.
        if size == 4:
            return self._timestamp_type(_be(start, 4), 0)
        if size == 8:
            packed = _be(start, 8)
            return self._timestamp_type(packed & 0x3ffffffff, packed >> 34)
        if size == 12:
            return self._timestamp_type(<int64_t>_be(start + 4, 8), _be(start, 4))
        raise ValueError(f"invalid timestamp data (length {size})")
