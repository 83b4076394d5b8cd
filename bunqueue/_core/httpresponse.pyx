# cython: freethreading_compatible = False
"""The bytes of an HTTP answer, its head made of cached parts (design in the .pxd)."""
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.string cimport memcpy
from libc.time cimport time, time_t

from email.utils import formatdate
from http import HTTPStatus

JSON_TYPE = "application/json"
TEXT_TYPE = "text/plain;charset=utf-8"
MAX_CACHED_HEADS = 256

cdef bytes CLOSE = b"Connection: close\r\n\r\n"
cdef bytes KEEP_ALIVE = b"Connection: keep-alive\r\n\r\n"
cdef bytes END = b"\r\n"
cdef bytes EMPTY = b""
cdef dict REASONS = {int(s): s.phrase for s in HTTPStatus}
# Head parts by (status, content type, extra headers' serial or items).
cdef dict HEADS = {}
cdef long next_serial = 0
# The Date header's value and line end, formatted once a second.
cdef time_t date_second = -1
cdef bytes date_line = EMPTY


cdef class FixedHeaders(dict):
    def __init__(self, headers):
        global next_serial
        dict.__init__(self, headers)
        self.serial = next_serial
        next_serial += 1


cdef class HttpResponse:
    """An answer: status, body, content type (None: no Content-Type header) and extra headers."""

    def __init__(self, int status, bytes body, content_type=JSON_TYPE, headers=None):
        self.status = status
        self.body = body
        self.content_type = content_type
        self.headers = headers

    cpdef bytes message(self, bint keep_alive, str version, bint with_body):
        """The status line and headers, then the body unless ``with_body`` is false (a HEAD request)."""
        headers = self.headers
        if type(headers) is FixedHeaders:
            key = (self.status, self.content_type, (<FixedHeaders>headers).serial)
        else:
            key = (self.status, self.content_type, tuple(headers.items()) if headers else None)
        parts = HEADS.get(key)
        if parts is None:
            parts = _head_parts(self.status, self.content_type, tuple(headers.items()) if headers else None)
            if len(HEADS) < MAX_CACHED_HEADS:
                HEADS[key] = parts
        cdef bytes start = (<tuple>parts)[0]
        cdef object end = (<tuple>parts)[1]
        cdef bytes tail = CLOSE if not keep_alive else KEEP_ALIVE if version == "1.0" else END
        cdef bytes body = self.body if with_body else EMPTY
        cdef char digits[24]
        cdef int digit_count = 0
        if end is not None:
            digit_count = _decimal(digits, PyBytes_GET_SIZE(self.body))
        else:
            end = EMPTY
        cdef bytes date = _date_line()
        cdef Py_ssize_t size = (PyBytes_GET_SIZE(start) + digit_count + PyBytes_GET_SIZE(<bytes>end)
                                + PyBytes_GET_SIZE(date) + PyBytes_GET_SIZE(tail) + PyBytes_GET_SIZE(body))
        cdef bytes out = PyBytes_FromStringAndSize(NULL, size)
        cdef char* at = PyBytes_AS_STRING(out)
        at = _put(at, start)
        memcpy(at, digits, digit_count)
        at += digit_count
        at = _put(at, <bytes>end)
        at = _put(at, date)
        at = _put(at, tail)
        _put(at, body)
        return out


cdef int _decimal(char* out, Py_ssize_t value):
    """``value`` (not negative) in decimal digits at ``out``; how many."""
    cdef char reversed_digits[24]
    cdef int count = 0, k
    while True:
        reversed_digits[count] = <char>(48 + value % 10)
        count += 1
        value //= 10
        if value == 0:
            break
    for k in range(count):
        out[k] = reversed_digits[count - 1 - k]
    return count


cdef inline char* _put(char* at, bytes part):
    cdef Py_ssize_t size = PyBytes_GET_SIZE(part)
    memcpy(at, PyBytes_AS_STRING(part), size)
    return at + size


cdef bytes _date_line():
    global date_second, date_line
    cdef time_t now = time(NULL)
    if now != date_second:
        date_line = formatdate(now, usegmt=True).encode("latin-1") + END
        date_second = now
    return date_line


def _head_parts(int status, content_type, tuple headers):
    """The head up to the Content-Length value and from it to the Date header (None: no length)."""
    lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Unknown')}"]
    if content_type is not None:
        lines.append(f"Content-Type: {content_type}")
    extra = "".join(f"{name}: {value}\r\n" for name, value in headers or ())
    # A 304 has no body of its own: a length would describe the body it stands for.
    if status not in (204, 304) and status >= 200:
        lines.append("Content-Length: ")
        return "\r\n".join(lines).encode("latin-1"), ("\r\n" + extra + "Date: ").encode("latin-1")
    return ("\r\n".join(lines) + "\r\n" + extra + "Date: ").encode("latin-1"), None
