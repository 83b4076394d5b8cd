# One HTTP/1.1 connection's state: the requests parsed and not answered yet, the one whose answer waits, and
# how the connection ends. Requests are answered in the order they came; reading pauses while the writes back
# up or too many requests wait (MAX_PIPELINED).

from bunqueue._core.httprequest cimport HttpRequest, RequestReader
from bunqueue._core.httpresponse cimport HttpResponse


cdef class HttpConnection:
    cdef readonly object listener
    cdef readonly object api
    cdef readonly object loop
    cdef public object transport
    # Parsed requests not answered yet (the reader appends to it), and the task of the one whose answer waits.
    cdef readonly object queue
    cdef readonly RequestReader reader
    cdef readonly object waiting
    # What ends the connection once the queue is answered (a refused request), and whether to close then.
    cdef readonly HttpResponse final
    cdef public bint closing
    # Set once the connection belongs to the stream handler: what arrives meanwhile is that request's.
    cdef readonly HttpRequest streaming
    cdef bint paused
    cdef bint write_paused
    # Set once the last answer is written; the timer that closes the connection then.
    cdef bint ended
    cdef object linger
    # When a byte last came or an answer last went (the loop's clock), and the idle check's timer.
    cdef double last_seen
    cdef object idle_timer

    cdef update_reading(self)
    cdef bint feed(self, object piece, object data, Py_ssize_t start) except -1
    cdef answer_queued(self)
    cdef bint writable(self) except -1
    cdef write(self, HttpRequest request, HttpResponse answer)
    cdef end(self)
    cdef hand_over(self, HttpRequest request)
