# Timers: keys (delayed job ids, deadlines) due at a time in ms, earliest first.
#
# The same indexed 4-ary heap as the ready queue, with a simpler key: (when, seq). seq is stamped on
# every push, including a push that moves an existing key, so keys due at the same time come out in the
# order they were last scheduled. Keys are removable and reschedulable by name in O(log n) through a
# stable slot per key and a slot -> heap position array; no stale entries are ever left in the heap, so
# its size is always the number of pending timers. NaN times are refused: they have no place in the order.
# push takes exact str keys only (Cython's typed argument check), so the dict operation inside it runs
# no Python code that could re-enter the heap between choosing a slot and recording it.

cimport cython
from libc.stdint cimport uint32_t, uint64_t


# 24 bytes; the slot ties the entry back to its key without a Python object in the heap.
cdef struct TimerEntry:
    double when
    uint64_t seq
    uint32_t slot


@cython.final
cdef class TimerHeap:
    cdef TimerEntry* _heap
    cdef Py_ssize_t _size
    # Capacity of _heap, _position_of_slot and _free_slots alike (there are never more slots than the
    # largest size the heap has had). Grown by doubling; only clear() gives the memory back.
    cdef Py_ssize_t _capacity
    cdef uint32_t* _position_of_slot
    # Slots freed by removals, reused before new ones are minted, so slot numbers stay dense.
    cdef uint32_t* _free_slots
    cdef Py_ssize_t _free_count
    # Key held by each slot (None when free); len() is the number of slots ever minted.
    cdef list _key_of_slot
    cdef dict _slot_of_key
    # Next push stamp: the tie-break between equal due times.
    cdef uint64_t _next_seq

    cdef int _reserve(self, Py_ssize_t needed) except -1
    cdef void _sift_up(self, Py_ssize_t pos) noexcept
    cdef void _sift_down(self, Py_ssize_t pos) noexcept
    # Re-establishes heap order around `pos` after its key changed in either direction.
    cdef void _restore(self, Py_ssize_t pos) noexcept
    # Removes the entry at `pos`, frees its slot and returns its key.
    cdef object _remove_at(self, Py_ssize_t pos)
