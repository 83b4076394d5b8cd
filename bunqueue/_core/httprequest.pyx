# cython: freethreading_compatible = False
"""HTTP/1.1 requests assembled from what httptools reports of one connection's bytes (design in the .pxd)."""
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeLatin1
from libc.string cimport memcmp
from urllib.parse import parse_qsl

import httptools

# What a request line adds to its target (method, spaces, version, CRLF), and a header line to its name and
# value (": ", CRLF), give or take optional whitespace.
REQUEST_LINE_BYTES = 20
HEADER_LINE_BYTES = 4
# The outcomes of RequestReader.feed.
PARSED = 0
UPGRADED = 1
REFUSED = 2

cdef Py_ssize_t CONTENT_LENGTH_SIZE = len("content-length")
cdef Py_ssize_t EXPECT_SIZE = len("expect")
cdef bytes EMPTY = b""
# The longest Content-Length the fast path reads (any limit a server sets is far below).
cdef Py_ssize_t MAX_LENGTH_DIGITS = 15

# Header-name characters (RFC 9110 tchar), and the bytes a header value may hold on the fast path.
cdef bint TCHAR[256]
cdef bint VALUE_CHAR[256]
cdef int _c
for _c in range(256):
    TCHAR[_c] = chr(_c).isalnum() and _c < 128 or chr(_c) in "!#$%&'*+-.^_`|~"
    VALUE_CHAR[_c] = 0x20 <= _c < 0x7F or _c == 0x09


# What the fast path tells apart among header names, by _special_header.
cdef enum:
    PLAIN = 0
    CONTENT_LENGTH = 1
    CONNECTION = 2
    # Transfer-Encoding, Upgrade, Expect: the parser reads such requests.
    OTHER_FRAMING = 3

cdef str VERSION_11 = "1.1"
cdef str VERSION_10 = "1.0"


cdef inline bint _lower_is(const unsigned char* p, Py_ssize_t size, const char* lower, Py_ssize_t lower_size):
    """Whether ``p[:size]`` is ``lower`` in any case (``lower`` is lowercase ASCII)."""
    cdef Py_ssize_t k
    if size != lower_size:
        return False
    for k in range(size):
        if (p[k] | 0x20) != <unsigned char>lower[k]:
            return False
    return True


cdef int _special_header(const unsigned char* name, Py_ssize_t size):
    if size == 14 and _lower_is(name, size, b"content-length", 14):
        return CONTENT_LENGTH
    if size == 10 and _lower_is(name, size, b"connection", 10):
        return CONNECTION
    if (_lower_is(name, size, b"transfer-encoding", 17) or _lower_is(name, size, b"upgrade", 7)
            or _lower_is(name, size, b"expect", 6)):
        return OTHER_FRAMING
    return PLAIN


cdef Py_ssize_t _digits_value(const unsigned char* p, Py_ssize_t size):
    """A Content-Length of digits only (at most MAX_LENGTH_DIGITS), or -1."""
    cdef Py_ssize_t value = 0, k
    if size == 0 or size > MAX_LENGTH_DIGITS:
        return -1
    for k in range(size):
        if not 48 <= p[k] <= 57:
            return -1
        value = value * 10 + (p[k] - 48)
    return value


cdef object _method_name(const unsigned char* p, Py_ssize_t size):
    """The method's name, for the methods the API answers; None for any other (the parser judges it)."""
    if size == 3:
        if memcmp(p, b"GET", 3) == 0:
            return "GET"
        if memcmp(p, b"PUT", 3) == 0:
            return "PUT"
    elif size == 4:
        if memcmp(p, b"POST", 4) == 0:
            return "POST"
        if memcmp(p, b"HEAD", 4) == 0:
            return "HEAD"
    elif size == 6 and memcmp(p, b"DELETE", 6) == 0:
        return "DELETE"
    elif size == 5 and memcmp(p, b"PATCH", 5) == 0:
        return "PATCH"
    elif size == 7 and memcmp(p, b"OPTIONS", 7) == 0:
        return "OPTIONS"
    return None


cdef str _lower_name(const unsigned char* p, Py_ssize_t size):
    """A header name (token characters, ASCII) lowercased, as a str."""
    cdef unsigned char buffer[64]
    cdef Py_ssize_t k
    if size > 64:
        return PyUnicode_DecodeLatin1(<const char*>p, size, NULL).lower()
    for k in range(size):
        buffer[k] = p[k] | 0x20 if 65 <= p[k] <= 90 else p[k]
    return PyUnicode_DecodeLatin1(<const char*>buffer, size, NULL)


cdef class HttpRequest:
    """A parsed request. Header names are lowercase; a repeated header keeps its first value."""

    def __init__(self, str method, bytes target, str version, list raw_headers, bytes body):
        self.method = method
        self.target = target
        self.version = version
        self.raw_headers = raw_headers
        self.body = body
        path, _, query = target.partition(b"?")
        # The path as sent (percent escapes included), as the route table matches it.
        self.path = path.decode("latin-1")
        self.query_string = query.decode("latin-1")
        cdef dict headers = {}
        cdef Py_ssize_t i
        # From the last header to the first, so that a repeated name keeps its first value.
        for i in range(len(raw_headers) - 1, -1, -1):
            name, value = raw_headers[i]
            headers[(<bytes>name).decode("latin-1").lower()] = (<bytes>value).decode("latin-1")
        self.headers = headers
        self.rest = EMPTY
        self.keep_alive = True

    def query(self):
        """Each query parameter with all of its values, in order (``+`` and escapes decoded)."""
        if not self.query_string:
            return {}
        cdef dict found = {}
        for key, value in parse_qsl(self.query_string, keep_blank_values=True):
            found.setdefault(key, []).append(value)
        return found

    def raw(self):
        """The request as it came (the same bytes but for header-name case): for a stream handler that
        parses it again."""
        lines = [b"%s %s HTTP/%s" % (self.method.encode(), self.target, self.version.encode())]
        lines += [name + b": " + value for name, value in self.raw_headers]
        return b"\r\n".join(lines) + b"\r\n\r\n" + self.body + self.rest


cdef class RequestReader:
    """httptools' callback target for one connection: ``feed`` parses a piece of the stream and returns
    PARSED, UPGRADED (``upgrade_at``) or REFUSED (``refused`` is the status); finished requests are appended
    to ``requests``."""

    def __init__(self, requests, Py_ssize_t max_head, Py_ssize_t max_body):
        self.requests = requests
        self.max_head = max_head
        self.max_body = max_body
        self.parser = httptools.HttpRequestParser(self)
        self.url = EMPTY
        self.headers = []
        self.body = []
        self.idle = True

    def feed(self, piece):
        cdef Py_ssize_t at = 0, end, size
        if self.idle and type(piece) is bytes:
            # Between requests, whole keep-alive requests of the common kind are read here, without the
            # parser's callbacks; the first one that is not (or not whole) goes to the parser with the rest.
            size = PyBytes_GET_SIZE(piece)
            while at < size:
                end = self._read_simple(<bytes>piece, at)
                if end < 0:
                    break
                at = end
            if at == size:
                return PARSED
            if at:
                piece = piece[at:]
        outcome = self._feed_parser(piece)
        if outcome == UPGRADED:
            self.upgrade_at += at
        return outcome

    cdef object _feed_parser(self, object piece):
        cdef bint in_head = self.in_head
        self.began = False
        try:
            self.parser.feed_data(piece)
        except httptools.HttpParserUpgrade as upgrade:
            self.upgrade_at = upgrade.args[0]
            return UPGRADED
        except httptools.HttpParserError:
            if not self.refused:
                self.refused = 400
            return REFUSED
        if in_head and self.in_head and not self.began:
            self.head_streamed += len(piece)
            if self.head_streamed > self.max_head:
                self.refused = 431
                return REFUSED
        return PARSED

    cdef Py_ssize_t _read_simple(self, bytes data, Py_ssize_t at) except -2:
        """Queue the request at ``at`` and return where it ends, or -1 if the parser is to read it: any
        request but a whole keep-alive one with a known method, a plain target, printable ASCII headers and
        no body besides a Content-Length one within the limits."""
        cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
        cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
        cdef Py_ssize_t i = at, target_at, query_at = -1, target_end, name_at, name_end, value_at, value_end
        cdef Py_ssize_t length = -1, counted
        cdef bint close = False, keep = False
        while i < n and 65 <= p[i] <= 90:
            i += 1
        method = _method_name(p + at, i - at)
        if method is None or i + 1 >= n or p[i] != 32 or p[i + 1] != 47:
            return -1
        i += 1
        target_at = i
        while i < n and 0x21 <= p[i] <= 0x7E:
            if p[i] == 63 and query_at < 0:
                query_at = i
            i += 1
        target_end = i
        if i + 11 > n or p[i] != 32:
            return -1
        if memcmp(p + i + 1, b"HTTP/1.1\r\n", 10) == 0:
            version = VERSION_11
        elif memcmp(p + i + 1, b"HTTP/1.0\r\n", 10) == 0:
            version = VERSION_10
        else:
            return -1
        i += 11
        counted = REQUEST_LINE_BYTES + target_end - target_at
        if counted > self.max_head:
            return -1
        cdef list raw = []
        cdef dict headers = {}
        while True:
            if i + 1 >= n:
                return -1
            if p[i] == 13:
                if p[i + 1] != 10:
                    return -1
                i += 2
                break
            name_at = i
            while i < n and TCHAR[p[i]]:
                i += 1
            if i == name_at or i >= n or p[i] != 58:
                return -1
            name_end = i
            i += 1
            while i < n and (p[i] == 32 or p[i] == 9):
                i += 1
            value_at = i
            while i < n and VALUE_CHAR[p[i]]:
                i += 1
            if i + 1 >= n or p[i] != 13 or p[i + 1] != 10:
                return -1
            value_end = i
            i += 2
            counted += name_end - name_at + value_end - value_at + HEADER_LINE_BYTES
            if counted > self.max_head:
                return -1
            special = _special_header(p + name_at, name_end - name_at)
            if special == CONTENT_LENGTH:
                if length >= 0:
                    return -1
                length = _digits_value(p + value_at, value_end - value_at)
                if length < 0 or length > self.max_body:
                    return -1
            elif special == CONNECTION:
                if _lower_is(p + value_at, value_end - value_at, b"close", 5):
                    close = True
                elif _lower_is(p + value_at, value_end - value_at, b"keep-alive", 10):
                    keep = True
                else:
                    return -1
            elif special == OTHER_FRAMING:
                return -1
            raw.append((PyBytes_FromStringAndSize(<const char*>p + name_at, name_end - name_at),
                        PyBytes_FromStringAndSize(<const char*>p + value_at, value_end - value_at)))
            key = _lower_name(p + name_at, name_end - name_at)
            if key not in headers:
                headers[key] = PyUnicode_DecodeLatin1(<const char*>p + value_at, value_end - value_at, NULL)
        if length < 0:
            length = 0
        # Only a request that keeps the connection: after one that closes it, the parser refuses what follows.
        if i + length > n or close or (version is VERSION_10 and not keep):
            return -1
        cdef HttpRequest request = HttpRequest.__new__(HttpRequest)
        request.method = method
        request.target = PyBytes_FromStringAndSize(<const char*>p + target_at, target_end - target_at)
        request.version = version
        request.raw_headers = raw
        request.body = PyBytes_FromStringAndSize(<const char*>p + i, length) if length else EMPTY
        if query_at < 0:
            request.path = PyUnicode_DecodeLatin1(<const char*>p + target_at, target_end - target_at, NULL)
            request.query_string = ""
        else:
            request.path = PyUnicode_DecodeLatin1(<const char*>p + target_at, query_at - target_at, NULL)
            request.query_string = PyUnicode_DecodeLatin1(<const char*>p + query_at + 1,
                                                          target_end - query_at - 1, NULL)
        request.headers = headers
        request.rest = EMPTY
        request.keep_alive = True
        self.requests.append(request)
        return i + length

    # -- parser callbacks ------------------------------------------------------------------------------

    def on_message_begin(self):
        self.idle = False
        self.in_head = True
        self.began = True
        self.head_parsed = REQUEST_LINE_BYTES
        self.head_streamed = 0
        self.url = EMPTY
        self.headers = []
        self.body = []
        self.size = 0

    def on_url(self, bytes url):
        self.url += url
        self.head_parsed += len(url)
        if self.head_parsed > self.max_head:
            self._refuse_head()

    def on_header(self, bytes name, bytes value):
        if self.in_head:
            self.headers.append((name, value))
            self.head_parsed += len(name) + len(value) + HEADER_LINE_BYTES
            if self.head_parsed > self.max_head:
                self._refuse_head()

    def on_headers_complete(self):
        self.in_head = False
        cdef Py_ssize_t size
        cdef bytes name, value
        for name, value in self.headers:
            # Only two names matter here: their lengths rule out the other headers without a lowercase copy.
            size = len(name)
            if size == CONTENT_LENGTH_SIZE:
                if (name.lower() == b"content-length" and value.strip().isdigit()
                        and int(value) > self.max_body):
                    self._refuse_body()
            elif size == EXPECT_SIZE and name.lower() == b"expect" and value.lower() == b"100-continue":
                self.continues += 1

    def on_body(self, bytes body):
        self.size += len(body)
        if self.size > self.max_body:
            self._refuse_body()
        self.body.append(body)

    def on_message_complete(self):
        self.idle = True
        if self.refused:
            return
        parser = self.parser
        request = HttpRequest(parser.get_method().decode("latin-1"), self.url, parser.get_http_version(),
                              self.headers, b"".join(self.body) if self.body else EMPTY)
        request.keep_alive = parser.should_keep_alive()
        self.requests.append(request)

    cdef int _refuse_head(self) except -1:
        self.refused = 431
        # Stop parsing: the rest of the head is not read.
        raise httptools.HttpParserError("head too large")

    cdef int _refuse_body(self) except -1:
        self.refused = 413
        # Stop parsing: what follows is the refused body.
        raise httptools.HttpParserError("body too large")
