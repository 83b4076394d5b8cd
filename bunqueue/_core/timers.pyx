"""Timer heap: keys due at a time in ms, popped earliest first, removable and reschedulable by key."""
from libc.math cimport isnan
from libc.stdint cimport uint32_t

from bunqueue._core.heap cimport INITIAL_CAPACITY, fill_hole, restore, sift_up


cdef class TimerHeap(IndexedHeap):
    """Keys with due times, earliest first; ties go to the key scheduled first."""

    def __cinit__(self):
        self._entry_size = sizeof(DeadlineEntry)
        self._kind = "timer heap"
        self._reserve(INITIAL_CAPACITY)

    def push(self, str key not None, double when):
        """Schedule `key` at `when`, replacing its time if it is already scheduled."""
        cdef DeadlineEntry* heap
        cdef Py_ssize_t slot, pos
        if isnan(when):
            raise ValueError("when must not be NaN")
        self._reserve(self._size + 1)
        slot = self._claim_slot(key)
        heap = <DeadlineEntry*>self._entries
        if slot < 0:
            pos = self._position_of_slot[-2 - slot]
            heap[pos].when = when
            heap[pos].seq = self._next_seq
            self._next_seq += 1
            restore(heap, self._position_of_slot, self._size, pos)
            return
        heap[self._size].when = when
        heap[self._size].seq = self._next_seq
        heap[self._size].slot = <uint32_t>slot
        self._next_seq += 1
        self._size += 1
        sift_up(heap, self._position_of_slot, self._size - 1)

    def remove(self, key):
        """Cancel `key`; False if it was not scheduled."""
        cdef Py_ssize_t pos = self._position(key)
        if pos < 0:
            return False
        self._remove_at(pos)
        return True

    def when(self, key):
        """The due time of `key`, or None if it is not scheduled."""
        cdef Py_ssize_t pos = self._position(key)
        if pos < 0:
            return None
        return (<DeadlineEntry*>self._entries)[pos].when

    def keys(self):
        """Every scheduled key, in no particular order."""
        return list(self._slot_of_key)

    def pop_due(self, double now, Py_ssize_t limit=-1):
        """Remove and return the keys due at or before `now`, earliest first; at most `limit` if >= 0."""
        cdef list due = []
        while self._size and (<DeadlineEntry*>self._entries)[0].when <= now and limit != 0:
            due.append(self._remove_at(0))
            limit -= 1
        return due

    def peek_time(self):
        """The earliest due time, or None when empty."""
        if self._size == 0:
            return None
        return (<DeadlineEntry*>self._entries)[0].when

    def peek(self):
        """The key due first, or None when empty."""
        if self._size == 0:
            return None
        return self._key_of_slot[(<DeadlineEntry*>self._entries)[0].slot]

    cdef object _remove_at(self, Py_ssize_t pos):
        cdef DeadlineEntry* heap = <DeadlineEntry*>self._entries
        key = self._release_slot(heap[pos].slot)
        self._size -= 1
        fill_hole(heap, self._position_of_slot, self._size, pos)
        return key
