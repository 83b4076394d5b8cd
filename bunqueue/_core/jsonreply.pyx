"""HTTP replies as JSON bytes in one pass, the way JSON.stringify shows the broker's plain values.

``plain_json`` writes a value made only of exact str-keyed dicts, lists, strings, booleans, None, 64-bit
integers and floats; it gives None for anything else (an ExtType, a Job, a tuple, an integer past 64 bits,
a string that UTF-8 cannot carry), and the caller takes the wire encoder's round trip instead. What it
writes is byte for byte what ``json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)`` writes after
``encoding._ready``: integral floats within 2^53 as integers, NaN and infinities as null.
"""
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.math cimport fabs, floor, isfinite, llround
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcpy

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object text)

# Deeper values take the Python path, which follows them as far as the interpreter's recursion limit lets.
cdef int MAX_DEPTH = 256
# A buffer that grew past this is given back after use, so one huge reply does not pin memory.
cdef Py_ssize_t KEEP_CAPACITY = 1 << 20
cdef double SAFE_INTEGER_END = 9007199254740992.0  # 2^53
# Below it a double's step is under 0.01 (2^-9 at 1e13): no shorter decimal reads back as a two-decimal one.
cdef double CENTS_END = 1e13
cdef char *HEX = b"0123456789abcdef"


cdef class JsonWriter:
    """One reusable buffer; not thread-safe (one per event loop: each call is synchronous)."""

    cdef char *buf
    cdef Py_ssize_t length
    cdef Py_ssize_t capacity

    def __cinit__(self):
        self.capacity = 4096
        self.length = 0
        self.buf = <char *>PyMem_Malloc(self.capacity)
        if self.buf == NULL:
            raise MemoryError()

    def __dealloc__(self):
        PyMem_Free(self.buf)

    cdef int reserve(self, Py_ssize_t extra) except -1:
        cdef Py_ssize_t needed = self.length + extra
        cdef Py_ssize_t capacity = self.capacity
        cdef char *grown
        if needed <= capacity:
            return 0
        while capacity < needed:
            capacity *= 2
        grown = <char *>PyMem_Realloc(self.buf, capacity)
        if grown == NULL:
            raise MemoryError()
        self.buf = grown
        self.capacity = capacity
        return 0

    cdef inline int put(self, const char *data, Py_ssize_t size) except -1:
        self.reserve(size)
        memcpy(self.buf + self.length, data, size)
        self.length += size
        return 0

    cdef inline int put_char(self, char c) except -1:
        self.reserve(1)
        self.buf[self.length] = c
        self.length += 1
        return 0

    cdef int put_string(self, str text) except -1:
        """1 when written, 0 when UTF-8 cannot carry it (a lone surrogate)."""
        cdef Py_ssize_t size, i
        cdef const char *data
        cdef bytes encoded
        cdef unsigned char c
        cdef char *out
        if PyUnicode_IS_ASCII(text):
            # The ASCII form is the string's own storage: nothing is allocated or cached on it.
            data = PyUnicode_AsUTF8AndSize(text, &size)
        else:
            try:
                encoded = text.encode("utf-8")
            except UnicodeEncodeError:
                return 0
            data = encoded
            size = len(encoded)
        # At most six bytes per input byte (\u00XX), plus the quotes.
        self.reserve(size * 6 + 2)
        out = self.buf + self.length
        out[0] = b'"'
        out += 1
        for i in range(size):
            c = <unsigned char>data[i]
            if c >= 0x20 and c != b'"' and c != b'\\':
                out[0] = <char>c
                out += 1
            elif c == b'"' or c == b'\\':
                out[0] = b'\\'
                out[1] = <char>c
                out += 2
            elif c == b'\n':
                out[0] = b'\\'
                out[1] = b'n'
                out += 2
            elif c == b'\r':
                out[0] = b'\\'
                out[1] = b'r'
                out += 2
            elif c == b'\t':
                out[0] = b'\\'
                out[1] = b't'
                out += 2
            elif c == 0x08:
                out[0] = b'\\'
                out[1] = b'b'
                out += 2
            elif c == 0x0C:
                out[0] = b'\\'
                out[1] = b'f'
                out += 2
            else:
                out[0] = b'\\'
                out[1] = b'u'
                out[2] = b'0'
                out[3] = b'0'
                out[4] = HEX[c >> 4]
                out[5] = HEX[c & 0xF]
                out += 6
        out[0] = b'"'
        out += 1
        self.length = out - self.buf
        return 1

    cdef int put_int(self, object value) except -1:
        """1 when written, 0 for an integer past the wire's 64 bits (signed or not)."""
        cdef int64_t signed_value
        if value < 0:
            if value < -9223372036854775808:
                return 0
            signed_value = value
            # Negated one short of it, so that -2^63 fits.
            return self.put_decimal(<uint64_t>(-(signed_value + 1)) + 1, True)
        if value > 18446744073709551615:
            return 0
        return self.put_decimal(<uint64_t>value, False)

    cdef int put_decimal(self, uint64_t magnitude, bint negative) except -1:
        # Written from the last digit back: snprintf's format parsing cost more than the digits.
        cdef char digits[24]
        cdef int i = 24
        while True:
            i -= 1
            digits[i] = <char>(48 + magnitude % 10)
            magnitude //= 10
            if magnitude == 0:
                break
        if negative:
            i -= 1
            digits[i] = b'-'
        self.put(digits + i, 24 - i)
        return 1

    cdef int put_float(self, double value) except -1:
        cdef bytes text
        cdef long long hundredths
        cdef uint64_t magnitude
        if not isfinite(value):
            self.put(b"null", 4)
        elif fabs(value) < SAFE_INTEGER_END and value == floor(value):
            self.put_decimal(<uint64_t>fabs(value), value < 0)
        elif fabs(value) < CENTS_END and <double>(hundredths := llround(value * 100.0)) / 100.0 == value:
            # A value of at most two decimals (a size in MB, a rate): those digits are the shortest form
            # that reads back as it (below CENTS_END, 0.01 apart is more than a double's step), so they are
            # what repr() writes, without its arbitrary-precision search.
            magnitude = <uint64_t>(hundredths if hundredths > 0 else -hundredths)
            self.put_decimal(magnitude // 100, value < 0)
            self.put_char(b'.')
            self.put_char(<char>(48 + magnitude % 100 // 10))
            if magnitude % 10:
                self.put_char(<char>(48 + magnitude % 10))
        else:
            # Python's shortest round-trip form, as the json module writes it.
            text = repr(value).encode("ascii")
            self.put(text, len(text))
        return 1

    cdef int put_value(self, object value, int depth) except -1:
        """1 when written, 0 when the value is not plain (the caller then gives up on the whole reply)."""
        cdef type kind = type(value)
        cdef bint first
        if kind is str:
            return self.put_string(<str>value)
        if value is None:
            self.put(b"null", 4)
            return 1
        if kind is bool:
            if value:
                self.put(b"true", 4)
            else:
                self.put(b"false", 5)
            return 1
        if kind is int:
            return self.put_int(value)
        if kind is float:
            return self.put_float(<double>value)
        if depth >= MAX_DEPTH:
            return 0
        if kind is dict:
            self.put_char(b'{')
            first = True
            for key, item in (<dict>value).items():
                if type(key) is not str:
                    return 0
                if not first:
                    self.put_char(b',')
                first = False
                if not self.put_string(<str>key):
                    return 0
                self.put_char(b':')
                if not self.put_value(item, depth + 1):
                    return 0
            self.put_char(b'}')
            return 1
        if kind is list:
            self.put_char(b'[')
            first = True
            for item in <list>value:
                if not first:
                    self.put_char(b',')
                first = False
                if not self.put_value(item, depth + 1):
                    return 0
            self.put_char(b']')
            return 1
        return 0

    def plain_json(self, value):
        """``value`` as UTF-8 JSON bytes, or None when it is not made of plain values only."""
        cdef int written
        self.length = 0
        try:
            written = self.put_value(value, 0)
            if not written:
                return None
            return PyBytes_FromStringAndSize(self.buf, self.length)
        finally:
            if self.capacity > KEEP_CAPACITY:
                PyMem_Free(self.buf)
                self.capacity = 4096
                self.length = 0
                self.buf = <char *>PyMem_Malloc(self.capacity)
                if self.buf == NULL:
                    raise MemoryError()
