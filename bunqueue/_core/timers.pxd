# Timers: keys (delayed job ids, deadlines) due at a time in ms, earliest first.
#
# An IndexedHeap of DeadlineEntry (heap.pxd), keyed (when, seq). seq is stamped on every push,
# including a push that moves an existing key, so keys due at the same time come out in the order they
# were last scheduled. Keys are removable and reschedulable by name in O(log n); no stale entries are
# ever left in the heap, so its size is always the number of pending timers. NaN times are refused:
# they have no place in the order. push takes exact str keys only (Cython's typed argument check).

cimport cython
from libc.stdint cimport uint64_t

from bunqueue._core.heap cimport DeadlineEntry, IndexedHeap


@cython.final
cdef class TimerHeap(IndexedHeap):
    # Next push stamp: the tie-break between equal due times.
    cdef uint64_t _next_seq

    # Removes the entry at `pos`, frees its slot and returns its key.
    cdef object _remove_at(self, Py_ssize_t pos)
