"""Timer heap: keys due at a time in ms, popped earliest first, removable and reschedulable by key."""
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from libc.math cimport isnan
from libc.stdint cimport uint32_t

cdef enum:
    ARITY = 4
    INITIAL_CAPACITY = 16

cdef Py_ssize_t MAX_ENTRIES = 0xFFFFFFFF


cdef inline bint due_before(const TimerEntry* a, const TimerEntry* b) noexcept:
    if a.when != b.when:
        return a.when < b.when
    return a.seq < b.seq


cdef class TimerHeap:
    """Keys with due times, earliest first; ties go to the key scheduled first."""

    def __cinit__(self):
        self._key_of_slot = []
        self._slot_of_key = {}
        self._reserve(INITIAL_CAPACITY)

    def __dealloc__(self):
        PyMem_Free(self._heap)
        PyMem_Free(self._position_of_slot)
        PyMem_Free(self._free_slots)

    def __len__(self):
        return self._size

    def __contains__(self, key):
        return key in self._slot_of_key

    def push(self, str key not None, double when):
        """Schedule `key` at `when`, replacing its time if it is already scheduled."""
        cdef Py_ssize_t slot
        cdef TimerEntry* entry
        if isnan(when):
            raise ValueError("when must not be NaN")
        self._reserve(self._size + 1)
        slot = self._free_slots[self._free_count - 1] if self._free_count else len(self._key_of_slot)
        # One dict operation both finds an existing key and records the slot of a new one.
        existing = self._slot_of_key.setdefault(key, slot)
        if existing != slot:
            entry = &self._heap[self._position_of_slot[<Py_ssize_t>existing]]
            entry.when = when
            entry.seq = self._next_seq
            self._next_seq += 1
            self._restore(self._position_of_slot[<Py_ssize_t>existing])
            return
        if self._free_count:
            self._free_count -= 1
            self._key_of_slot[slot] = key
        else:
            self._key_of_slot.append(key)
        entry = &self._heap[self._size]
        entry.when = when
        entry.seq = self._next_seq
        entry.slot = <uint32_t>slot
        self._next_seq += 1
        self._size += 1
        self._sift_up(self._size - 1)

    def remove(self, key):
        """Cancel `key`; False if it was not scheduled."""
        slot = self._slot_of_key.get(key)
        if slot is None:
            return False
        self._remove_at(self._position_of_slot[<Py_ssize_t>slot])
        return True

    def when(self, key):
        """The due time of `key`, or None if it is not scheduled."""
        slot = self._slot_of_key.get(key)
        if slot is None:
            return None
        return self._heap[self._position_of_slot[<Py_ssize_t>slot]].when

    def keys(self):
        """Every scheduled key, in no particular order."""
        return list(self._slot_of_key)

    def pop_due(self, double now, Py_ssize_t limit=-1):
        """Remove and return the keys due at or before `now`, earliest first; at most `limit` if >= 0."""
        cdef list due = []
        while self._size and self._heap[0].when <= now and limit != 0:
            due.append(self._remove_at(0))
            limit -= 1
        return due

    def peek_time(self):
        """The earliest due time, or None when empty."""
        if self._size == 0:
            return None
        return self._heap[0].when

    def peek(self):
        """The key due first, or None when empty."""
        if self._size == 0:
            return None
        return self._key_of_slot[self._heap[0].slot]

    def clear(self):
        """Cancel every timer and give back the memory a past peak left behind."""
        PyMem_Free(self._heap)
        PyMem_Free(self._position_of_slot)
        PyMem_Free(self._free_slots)
        self._heap = NULL
        self._position_of_slot = NULL
        self._free_slots = NULL
        self._size = self._capacity = self._free_count = 0
        self._key_of_slot = []
        self._slot_of_key = {}
        self._reserve(INITIAL_CAPACITY)

    cdef int _reserve(self, Py_ssize_t needed) except -1:
        cdef Py_ssize_t capacity
        cdef void* grown
        if needed <= self._capacity:
            return 0
        if needed > MAX_ENTRIES:
            raise OverflowError("the timer heap is full")
        capacity = min(max(needed, 2 * self._capacity), MAX_ENTRIES)
        # Each array is swapped in only once its reallocation succeeded, so a MemoryError leaves the
        # heap intact; a larger capacity on some arrays than on others is harmless.
        grown = PyMem_Realloc(self._heap, capacity * sizeof(TimerEntry))
        if grown == NULL:
            raise MemoryError()
        self._heap = <TimerEntry*>grown
        grown = PyMem_Realloc(self._position_of_slot, capacity * sizeof(uint32_t))
        if grown == NULL:
            raise MemoryError()
        self._position_of_slot = <uint32_t*>grown
        grown = PyMem_Realloc(self._free_slots, capacity * sizeof(uint32_t))
        if grown == NULL:
            raise MemoryError()
        self._free_slots = <uint32_t*>grown
        self._capacity = capacity
        return 0

    cdef void _sift_up(self, Py_ssize_t pos) noexcept:
        cdef TimerEntry moving = self._heap[pos]
        cdef Py_ssize_t parent
        while pos > 0:
            parent = (pos - 1) // ARITY
            if not due_before(&moving, &self._heap[parent]):
                break
            self._heap[pos] = self._heap[parent]
            self._position_of_slot[self._heap[pos].slot] = <uint32_t>pos
            pos = parent
        self._heap[pos] = moving
        self._position_of_slot[moving.slot] = <uint32_t>pos

    cdef void _sift_down(self, Py_ssize_t pos) noexcept:
        cdef TimerEntry moving = self._heap[pos]
        cdef Py_ssize_t child, best, end
        while True:
            child = pos * ARITY + 1
            if child >= self._size:
                break
            best = child
            end = min(child + ARITY, self._size)
            child += 1
            while child < end:
                if due_before(&self._heap[child], &self._heap[best]):
                    best = child
                child += 1
            if not due_before(&self._heap[best], &moving):
                break
            self._heap[pos] = self._heap[best]
            self._position_of_slot[self._heap[pos].slot] = <uint32_t>pos
            pos = best
        self._heap[pos] = moving
        self._position_of_slot[moving.slot] = <uint32_t>pos

    cdef void _restore(self, Py_ssize_t pos) noexcept:
        if pos > 0 and due_before(&self._heap[pos], &self._heap[(pos - 1) // ARITY]):
            self._sift_up(pos)
        else:
            self._sift_down(pos)

    cdef object _remove_at(self, Py_ssize_t pos):
        cdef Py_ssize_t slot = self._heap[pos].slot
        key = self._key_of_slot[slot]
        self._key_of_slot[slot] = None
        del self._slot_of_key[key]
        self._free_slots[self._free_count] = <uint32_t>slot
        self._free_count += 1
        self._size -= 1
        if pos != self._size:
            self._heap[pos] = self._heap[self._size]
            self._restore(pos)
        return key
