# HTTP/1.1 requests as one connection's bytes carry them: httptools (llhttp) finds the request line,
# headers and body, and RequestReader, its callback target, assembles them into HttpRequest objects under
# the limits a server sets on a request's head and body. No I/O: the connection feeds bytes in and answers
# the requests the reader queued.
#
# Between requests, the reader first reads what it can itself: whole keep-alive requests with a known
# method, a printable target, printable ASCII headers and a Content-Length body (or none), the kind every
# API client sends. That costs a fraction of the parser's five or more callbacks per request. Anything else
# (a cut request, chunked bodies, upgrades, 100-continue, a closing request, any byte the fast path does not
# accept) goes to the parser from that request on, so llhttp stays the judge of what is valid: the fast path
# only ever takes requests llhttp reads the same way (a differential test holds the two to it).
#
# The head is counted twice, each count a lower bound that never takes in body bytes: what the parser has
# reported (target, whole header lines), and the pieces that were head from end to end (what the parser
# keeps of an unfinished header it reports only when the header ends). Either over the limit refuses the
# request (431); a declared or received body over its limit refuses it too (413).

cimport cython


@cython.final
cdef class HttpRequest:
    cdef public str method
    cdef public bytes target
    cdef public str version
    cdef public list raw_headers
    cdef public bytes body
    cdef public str path
    cdef public str query_string
    # Header names lowercase; a repeated name keeps its first value.
    cdef public dict headers
    # Bytes that followed an upgrade request (a WebSocket's first frames): they belong to the stream.
    cdef public bytes rest
    cdef public bint keep_alive


@cython.final
cdef class RequestReader:
    cdef readonly object parser
    # Finished requests go here, in order (the connection's queue).
    cdef object requests
    cdef Py_ssize_t max_head
    cdef Py_ssize_t max_body
    # The request being parsed.
    cdef bytes url
    cdef list headers
    cdef list body
    cdef Py_ssize_t size
    cdef bint in_head
    cdef Py_ssize_t head_parsed
    cdef Py_ssize_t head_streamed
    # Whether a request began in the piece being parsed.
    cdef bint began
    # Whether the parser is between requests: only then may the fast path read what comes next.
    cdef bint idle
    # The status that refuses the request being read (431, 413, 400), 0 while none does.
    cdef readonly int refused
    # How many requests asked for "Expect: 100-continue" since the connection last answered them.
    cdef public int continues
    # After an upgrade request: where, in the piece last fed, the upgraded protocol's bytes begin.
    cdef readonly Py_ssize_t upgrade_at

    cdef object _feed_parser(self, object piece)
    cdef Py_ssize_t _read_simple(self, bytes data, Py_ssize_t at) except -2
    cdef int _refuse_head(self) except -1
    cdef int _refuse_body(self) except -1
