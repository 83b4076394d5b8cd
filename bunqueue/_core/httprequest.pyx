# cython: freethreading_compatible = False
"""HTTP/1.1 requests assembled from what httptools reports of one connection's bytes (design in the .pxd)."""
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

    def feed(self, piece):
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

    # -- parser callbacks ------------------------------------------------------------------------------

    def on_message_begin(self):
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
