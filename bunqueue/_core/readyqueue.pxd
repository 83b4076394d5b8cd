# The ready queue: job ids waiting to be pulled, best first, with removal and re-ranking by id.
#
# An indexed 4-ary min-heap: half as deep as a binary heap, so a pop moves half as many entries, and a
# node's four children are contiguous, so comparing them costs few cache misses. Measured, it is a
# little ahead of a binary heap; at a million entries a pop is dominated by cache misses on the id (its
# dict deletion, its refcount), which no heap shape avoids.
#
# Entries are C structs stored inline in the heap array, so sifting compares and moves plain memory and
# never touches a Python object. Each job id gets a slot: a small integer that never changes while the
# id is queued. The id itself, and the dict from id to slot, are only touched on push and removal; the
# slot -> heap position array is what every move updates, which keeps "remove by id" and "update by id"
# O(log n) without a Python-level write per swap.
#
# Final (no subclasses), so the sift helpers are direct C calls rather than vtable lookups. push takes
# exact str ids only (Cython's typed argument check): hashing and comparing them runs no Python code, so
# nothing can re-enter the queue between choosing a slot and recording it.
#
# Order, first difference wins: higher priority; LIFO before FIFO; among LIFO the newest (larger seq);
# among FIFO the earlier run_at; then the smaller seq. NaN has no place in that order and is refused.

cimport cython
from libc.stdint cimport uint32_t, uint64_t


# 32 bytes: two entries to a cache line, and a node's four children in 128 contiguous bytes.
cdef struct ReadyEntry:
    double priority
    double run_at
    uint64_t seq
    uint32_t slot
    uint32_t lifo


@cython.final
cdef class ReadyQueue:
    cdef ReadyEntry* _heap
    cdef Py_ssize_t _size
    # Capacity of _heap, _position_of_slot and _free_slots alike: there are never more slots than the
    # largest size the queue has had, so one capacity bounds all three. They grow by doubling and only
    # clear() shrinks them: slot numbers up to the peak may still be in use after the queue drains.
    cdef Py_ssize_t _capacity
    # Heap position of the entry that owns each slot; stale for free slots. 32-bit positions halve the
    # memory the random writes of a sift touch; MAX_ENTRIES keeps them in range.
    cdef uint32_t* _position_of_slot
    # Slots released by removals, reused before new ones are minted, so slot numbers stay dense.
    cdef uint32_t* _free_slots
    cdef Py_ssize_t _free_count
    # Job id held by each slot (None when free); len() is the number of slots ever minted.
    cdef list _id_of_slot
    cdef dict _slot_of_id

    cdef int _reserve(self, Py_ssize_t needed) except -1
    cdef void _sift_up(self, Py_ssize_t pos) noexcept
    cdef void _sift_down(self, Py_ssize_t pos) noexcept
    # Pop path: walks the hole left at the root down to a leaf along the best children, then sifts the
    # last entry up from there. The last entry nearly always belongs near the bottom, so this saves the
    # comparison against it at every level that a plain sift-down would make.
    cdef void _refill_root(self) noexcept
    # Re-establishes heap order around `pos` after its key changed in either direction.
    cdef void _restore(self, Py_ssize_t pos) noexcept
    # Removes the entry at `pos`, frees its slot and returns its job id.
    cdef object _remove_at(self, Py_ssize_t pos)
    cdef Py_ssize_t _position(self, object job_id) except -2
