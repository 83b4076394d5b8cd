# The ready queue: job ids waiting to be pulled, best first, with removal and re-ranking by id.
#
# An IndexedHeap of ReadyEntry (heap.pxd: the shared 4-ary heap, its slots, and the order of entries:
# higher priority; LIFO before FIFO; among LIFO the newest; among FIFO the earlier run_at; then the
# smaller seq). Measured, the 4-ary shape is a little ahead of a binary heap; at a million entries a
# pop is dominated by cache misses on the id (its dict deletion, its refcount), which no heap shape
# avoids. NaN has no place in the order and is refused.
#
# Final (no subclasses), so its own helpers are direct C calls. push takes exact str ids only
# (Cython's typed argument check): hashing and comparing them runs no Python code, so nothing can
# re-enter the queue between choosing a slot and recording it.

cimport cython
from libc.stdint cimport uint64_t

from bunqueue._core.heap cimport IndexedHeap, ReadyEntry


@cython.final
cdef class ReadyQueue(IndexedHeap):
    # `push` for compiled callers (batch admission): the same checks, no Python call.
    cdef int add(self, str job_id, double priority, bint lifo, double run_at, uint64_t seq) except -1
    # The best job id, removed, or None when empty; compiled activation calls it directly.
    cpdef object pop(self)
    # Removes the entry at `pos`, frees its slot and returns its job id.
    cdef object _remove_at(self, Py_ssize_t pos)
