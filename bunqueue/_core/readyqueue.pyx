"""Ready queue: an indexed 4-ary heap of job ids ordered by priority, LIFO flag, run_at and seq."""
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from libc.math cimport isnan
from libc.stdint cimport uint32_t, uint64_t

cdef enum:
    ARITY = 4
    INITIAL_CAPACITY = 16

cdef Py_ssize_t MAX_ENTRIES = 0xFFFFFFFF


cdef inline bint ranks_before(const ReadyEntry* a, const ReadyEntry* b) noexcept:
    if a.priority != b.priority:
        return a.priority > b.priority
    if a.lifo != b.lifo:
        return a.lifo
    if a.lifo:
        return a.seq > b.seq
    if a.run_at != b.run_at:
        return a.run_at < b.run_at
    return a.seq < b.seq


cdef inline int check_key(double priority, double run_at) except -1:
    if isnan(priority) or isnan(run_at):
        raise ValueError("priority and run_at must not be NaN")
    return 0


cdef class ReadyQueue:
    """Job ids ordered for pulling, with O(log n) push, pop, remove and update by id."""

    def __cinit__(self):
        self._id_of_slot = []
        self._slot_of_id = {}
        self._reserve(INITIAL_CAPACITY)

    def __dealloc__(self):
        PyMem_Free(self._heap)
        PyMem_Free(self._position_of_slot)
        PyMem_Free(self._free_slots)

    def __len__(self):
        return self._size

    def __contains__(self, job_id):
        return job_id in self._slot_of_id

    def push(self, str job_id not None, double priority, bint lifo, double run_at, uint64_t seq):
        """Queue `job_id`; KeyError if it is already queued."""
        cdef Py_ssize_t slot
        cdef ReadyEntry* entry
        check_key(priority, run_at)
        self._reserve(self._size + 1)
        slot = self._free_slots[self._free_count - 1] if self._free_count else len(self._id_of_slot)
        # One dict operation both checks for a duplicate and records the slot.
        if self._slot_of_id.setdefault(job_id, slot) != slot:
            raise KeyError(job_id)
        if self._free_count:
            self._free_count -= 1
            self._id_of_slot[slot] = job_id
        else:
            self._id_of_slot.append(job_id)
        entry = &self._heap[self._size]
        entry.priority = priority
        entry.run_at = run_at
        entry.seq = seq
        entry.slot = <uint32_t>slot
        entry.lifo = lifo
        self._size += 1
        self._sift_up(self._size - 1)

    def pop(self):
        """Remove and return the best job id, or None when empty."""
        if self._size == 0:
            return None
        return self._remove_at(0)

    def peek(self):
        """The best job id without removing it, or None when empty."""
        if self._size == 0:
            return None
        return self._id_of_slot[self._heap[0].slot]

    def pop_many(self, Py_ssize_t n):
        """Remove and return up to `n` job ids, best first."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        return [self._remove_at(0) for _ in range(min(n, self._size))]

    def remove(self, job_id):
        """Drop `job_id`; False if it was not queued."""
        cdef Py_ssize_t pos = self._position(job_id)
        if pos < 0:
            return False
        self._remove_at(pos)
        return True

    def update(self, job_id, double priority, bint lifo, double run_at):
        """Re-rank a queued job (its seq is kept); False if it was not queued."""
        cdef Py_ssize_t pos = self._position(job_id)
        cdef ReadyEntry* entry
        check_key(priority, run_at)
        if pos < 0:
            return False
        entry = &self._heap[pos]
        entry.priority = priority
        entry.run_at = run_at
        entry.lifo = lifo
        self._restore(pos)
        return True

    def ids(self):
        """Every queued job id, in no particular order."""
        return list(self._slot_of_id)

    def clear(self):
        """Drop every entry and give back the memory a past peak left behind."""
        PyMem_Free(self._heap)
        PyMem_Free(self._position_of_slot)
        PyMem_Free(self._free_slots)
        self._heap = NULL
        self._position_of_slot = NULL
        self._free_slots = NULL
        self._size = self._capacity = self._free_count = 0
        self._id_of_slot = []
        self._slot_of_id = {}
        self._reserve(INITIAL_CAPACITY)

    cdef Py_ssize_t _position(self, object job_id) except -2:
        slot = self._slot_of_id.get(job_id)
        if slot is None:
            return -1
        return self._position_of_slot[<Py_ssize_t>slot]

    cdef int _reserve(self, Py_ssize_t needed) except -1:
        cdef Py_ssize_t capacity
        cdef void* grown
        if needed <= self._capacity:
            return 0
        if needed > MAX_ENTRIES:
            raise OverflowError("the ready queue is full")
        capacity = min(max(needed, 2 * self._capacity), MAX_ENTRIES)
        # Each array is swapped in only once its reallocation succeeded, so a MemoryError leaves the
        # queue intact; a larger capacity on some arrays than on others is harmless.
        grown = PyMem_Realloc(self._heap, capacity * sizeof(ReadyEntry))
        if grown == NULL:
            raise MemoryError()
        self._heap = <ReadyEntry*>grown
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
        cdef ReadyEntry moving = self._heap[pos]
        cdef Py_ssize_t parent
        while pos > 0:
            parent = (pos - 1) // ARITY
            if not ranks_before(&moving, &self._heap[parent]):
                break
            self._heap[pos] = self._heap[parent]
            self._position_of_slot[self._heap[pos].slot] = <uint32_t>pos
            pos = parent
        self._heap[pos] = moving
        self._position_of_slot[moving.slot] = <uint32_t>pos

    cdef void _sift_down(self, Py_ssize_t pos) noexcept:
        cdef ReadyEntry moving = self._heap[pos]
        cdef Py_ssize_t child, best, end
        while True:
            child = pos * ARITY + 1
            if child >= self._size:
                break
            best = child
            end = min(child + ARITY, self._size)
            child += 1
            while child < end:
                if ranks_before(&self._heap[child], &self._heap[best]):
                    best = child
                child += 1
            if not ranks_before(&self._heap[best], &moving):
                break
            self._heap[pos] = self._heap[best]
            self._position_of_slot[self._heap[pos].slot] = <uint32_t>pos
            pos = best
        self._heap[pos] = moving
        self._position_of_slot[moving.slot] = <uint32_t>pos

    cdef void _refill_root(self) noexcept:
        cdef Py_ssize_t pos = 0
        cdef Py_ssize_t child, best, end
        if self._size == 0:
            return
        while True:
            child = pos * ARITY + 1
            if child >= self._size:
                break
            best = child
            end = min(child + ARITY, self._size)
            child += 1
            while child < end:
                if ranks_before(&self._heap[child], &self._heap[best]):
                    best = child
                child += 1
            self._heap[pos] = self._heap[best]
            self._position_of_slot[self._heap[pos].slot] = <uint32_t>pos
            pos = best
        if pos != self._size:
            self._heap[pos] = self._heap[self._size]
            self._sift_up(pos)

    cdef void _restore(self, Py_ssize_t pos) noexcept:
        if pos > 0 and ranks_before(&self._heap[pos], &self._heap[(pos - 1) // ARITY]):
            self._sift_up(pos)
        else:
            self._sift_down(pos)

    cdef object _remove_at(self, Py_ssize_t pos):
        cdef Py_ssize_t slot = self._heap[pos].slot
        job_id = self._id_of_slot[slot]
        self._id_of_slot[slot] = None
        del self._slot_of_id[job_id]
        self._free_slots[self._free_count] = <uint32_t>slot
        self._free_count += 1
        self._size -= 1
        if pos == 0:
            self._refill_root()
        elif pos != self._size:
            self._heap[pos] = self._heap[self._size]
            self._restore(pos)
        return job_id
