# One HTTP answer and the bytes a connection writes for it: the status line and headers, then the body. No
# I/O: the connection writes what ``message`` returns.
#
# A head is the same for every answer of one status, content type and set of extra headers but for three
# values: the body's length, the Date and the Connection header. Its fixed parts are made once per kind (a few
# dozen kinds in all; past MAX_CACHED_HEADS, made each time) and an answer is those parts and the three
# values copied into one bytes object of the right size.

cimport cython


@cython.final
cdef class FixedHeaders(dict):
    # Headers many answers share and nobody changes (the API's CORS headers): a head is found by this
    # number instead of by the items, which would be copied and hashed for every answer.
    cdef readonly long serial


@cython.final
cdef class HttpResponse:
    cdef public int status
    cdef public bytes body
    cdef public object content_type
    # Headers besides Content-Type, Content-Length, Date and Connection (a dict, a FixedHeaders or None).
    cdef public object headers

    cpdef bytes message(self, bint keep_alive, str version, bint with_body)
